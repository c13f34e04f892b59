"""Op cases of ``flow.quantization`` (fake_quantization and the observers), ``distributed_partial_fc_sample``,
``amp_white_identity`` and the profiler marks. op_cases.py appends ``CASES`` to its table.

The quantization references follow legacy's CPU kernels element by element in plain Python (round half to
even for values, half away from zero for the zero point). Observers and fake quantization are checked
forward only: fake quantization's gradient is the straight-through estimator, not the derivative of a step
function, so test_quantization.py checks it in a job.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
from hypothesis import strategies as st

from flowjob_core.testing import OpCase
from flowjob_core.testing import strategies as fst

Draw = Any
Case = tuple[list[np.ndarray], dict]


def _round_away(v: float) -> float:
    return math.copysign(math.floor(abs(v) + 0.5), v)


def _params(low: float, high: float, bit: int, scheme: str, formula: str) -> tuple[float, float]:
    if formula == "cambricon":
        return math.floor(math.log2(max(abs(low), abs(high)))) - (bit - 2), 0.0
    if scheme == "symmetric":
        return max(abs(low), abs(high)) / (2 ** (bit - 1) - 1), 0.0
    scale = (high - low) / (2 ** bit - 1)
    return scale, -_round_away(low / scale)


def _attrs(draw: Draw, cambricon: bool = True) -> dict:
    formula = draw(st.sampled_from(["google", "cambricon"] if cambricon else ["google"]))
    return {"quantization_bit": draw(st.integers(2, 8)),
            "quantization_scheme": draw(st.sampled_from(["symmetric", "affine"])), "quantization_formula": formula}


def _input(draw: Draw, min_dims: int = 1) -> np.ndarray:
    shape = tuple(draw(fst.small_shapes(min_dims, 3, 4)))
    # a range that is never all zeros, so scales are finite
    x = draw(fst.arrays(shape, st.floats(-3.0, 3.0, allow_subnormal=False)))
    x.flat[0] = draw(st.sampled_from([-2.5, 1.75, 3.0]))
    return x


# min_max_observer --------------------------------------------------------------------------
def min_max_case(draw: Draw) -> Case:
    attrs = _attrs(draw)
    per_layer = attrs["quantization_formula"] == "cambricon" or draw(st.booleans())
    x = _input(draw)
    if not per_layer:  # every channel needs a nonzero range
        x.reshape(x.shape[0], -1)[:, 0] = 1.5
        x.reshape(x.shape[0], -1)[:, -1] = -0.5 if x[0].size > 1 else 1.5
    if (x.size if per_layer else x[0].size) < 2:  # one value: an affine range of width 0 has no scale
        attrs["quantization_scheme"] = "symmetric"
    elif per_layer:
        x.flat[-1] = x.flat[0] - 1.0
    return [x], {**attrs, "per_layer_quantization": per_layer}


def min_max_ref(x: np.ndarray, quantization_bit: int, quantization_scheme: str, quantization_formula: str,
                per_layer_quantization: bool) -> tuple[np.ndarray, np.ndarray]:
    rows = [x.ravel()] if per_layer_quantization else [r.ravel() for r in x]
    pairs = [_params(float(r.min()), float(r.max()), quantization_bit, quantization_scheme, quantization_formula)
             for r in rows]
    return np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])


# moving_average_min_max_observer -------------------------------------------------------------
def moving_case(draw: Draw) -> Case:
    x = _input(draw)
    state = draw(st.sampled_from([0.0, 0.5, 2.0]))
    moving_max = np.array([state])
    moving_min = np.array([-state / 2 if state else 0.0])
    step = np.array([draw(st.integers(0, 3))], dtype=np.int64)
    attrs = {**_attrs(draw), "training": draw(st.booleans()), "stop_update_after_iters": draw(st.integers(1, 2)),
             "momentum": draw(st.sampled_from([0.0, 0.5, 0.95]))}
    updates = attrs["training"] and int(step[0]) <= attrs["stop_update_after_iters"]
    if not updates and state == 0.0:  # a range never set has no scale
        moving_max, moving_min = np.array([1.25]), np.array([-0.75])
    if x.size < 2:  # one value: an affine range of width 0 has no scale
        attrs["quantization_scheme"] = "symmetric"
    else:
        x.flat[-1] = x.flat[0] - 1.0
    return [x, step, moving_max, moving_min], attrs


def moving_ref(x: np.ndarray, step: np.ndarray, moving_max: np.ndarray, moving_min: np.ndarray, training: bool,
               stop_update_after_iters: int, quantization_bit: int, quantization_scheme: str,
               quantization_formula: str, momentum: float) -> tuple[np.ndarray, np.ndarray]:
    high, low = float(moving_max[0]), float(moving_min[0])
    affine = quantization_scheme == "affine" and quantization_formula == "google"

    def blend(state: float, value: float) -> float:
        return value if state == 0 else state * momentum + value * (1 - momentum)

    if training and int(step[0]) <= stop_update_after_iters:
        if affine:
            high, low = blend(high, float(x.max())), blend(low, float(x.min()))
        else:
            high = low = blend(high, max(abs(float(x.max())), abs(float(x.min()))))
    scale, zero = _params(low, high, quantization_bit, quantization_scheme, quantization_formula)
    return np.array([scale]), np.array([zero])


# fake_quantization -------------------------------------------------------------------------
def fake_case(draw: Draw) -> Case:
    attrs = _attrs(draw)
    x = _input(draw)
    per_channel = attrs["quantization_formula"] == "google" and draw(st.booleans())
    count = x.shape[0] if per_channel else 1
    scales = np.array(draw(st.lists(st.sampled_from([0.05, 0.1, 0.25, 0.3]), min_size=count, max_size=count)))
    if attrs["quantization_formula"] == "cambricon":
        scales = np.array([float(draw(st.integers(-4, 1)))])  # a shift
    # zero points outside [0, 255] too: those of ranges that do not reach 0
    zeros = np.array(draw(st.lists(st.integers(-20, 300), min_size=count, max_size=count)), dtype=np.float64)
    if attrs["quantization_scheme"] == "symmetric":
        zeros[:] = 0
    return [x, scales, zeros], attrs


def fake_ref(x: np.ndarray, scale: np.ndarray, zero_point: np.ndarray, quantization_bit: int,
             quantization_scheme: str, quantization_formula: str) -> np.ndarray:
    out = np.empty_like(x)
    rows = x.reshape(scale.size, -1) if scale.size > 1 else x.reshape(1, -1)
    flat = out.reshape(rows.shape)
    for c, row in enumerate(rows):
        s, z = float(scale[c]), float(zero_point[c])
        for i, v in enumerate(row):
            if quantization_formula == "cambricon":
                step, top = 2.0 ** int(s), 2 ** (quantization_bit - 1) - 1
                flat[c, i] = min(max(round(v / step), -top - 1), top) * step  # round(): half to even
            elif quantization_scheme == "symmetric":
                top = 2 ** (quantization_bit - 1) - 1
                flat[c, i] = min(max(round(v / s), -top - 1), top) * s
            else:
                zp = _round_away(z)
                flat[c, i] = (min(max(round(v / s + zp), 0), 2 ** quantization_bit - 1) - zp) * s
    return out


# distributed_partial_fc_sample (the numpy backend's stream for a seeded node) -------------------------
def partial_fc_case(draw: Draw) -> Case:
    shards = draw(st.sampled_from([1, 2]))
    size = draw(st.integers(1, 5))
    classes = shards * size
    weight = draw(fst.arrays((classes, draw(st.integers(1, 3)))))
    label = np.array(draw(st.lists(st.integers(0, classes - 1), min_size=1, max_size=6)), dtype=np.int32)
    # each shard samples at least its distinct labels
    most = max(len({v for v in label.tolist() if v // size == s}) for s in range(shards))
    num_sample = shards * draw(st.integers(max(most, 1), size))
    return [weight, label], {"num_sample": num_sample, "seed": draw(st.integers(0, 1000)), "parallel_num": shards}


def partial_fc_ref(weight: np.ndarray, label: np.ndarray, num_sample: int, seed: int,
                   parallel_num: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    classes = weight.shape[0]
    size, per_shard = classes // parallel_num, num_sample // parallel_num
    keys = [math.floor(u * size) for u in np.random.default_rng(seed).random(classes)]
    for v in label.tolist():
        keys[v] = v % size - size
    sampled: list[int] = []
    place = {}
    for s in range(parallel_num):
        order = sorted(range(s * size, (s + 1) * size), key=lambda c: keys[c])  # Python's sort is stable
        for j, c in enumerate(order[:per_shard]):
            place[c] = s * per_shard + j
        sampled += order[:per_shard]
    mapped = np.array([place[v] for v in label.tolist()], dtype=label.dtype)
    return mapped, np.array(sampled, dtype=label.dtype), weight[sampled]


def sharded_partial_fc_case(draw: Draw) -> Case:
    """One rank's shard of the class weights: the whole op's draws, this shard's block of its samples."""
    (weight, label), attrs = partial_fc_case(draw)
    shards = attrs["parallel_num"] = 2
    classes = weight.shape[0] + weight.shape[0] % 2
    weight = np.concatenate([weight, weight[:1]])[:classes] if classes != weight.shape[0] else weight
    size = classes // shards
    most = max(len({v for v in label.tolist() if v // size == s}) for s in range(shards))
    attrs["num_sample"] = shards * draw(st.integers(max(most, 1), size))
    shard = draw(st.integers(0, shards - 1))
    attrs.update(shard_start=shard * size, shard_stop=(shard + 1) * size, shard_size=classes)
    return [weight[shard * size:(shard + 1) * size], label], attrs


def sharded_partial_fc_ref(piece: np.ndarray, label: np.ndarray, num_sample: int, seed: int, parallel_num: int,
                           shard_start: int, shard_stop: int, shard_size: int
                           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    whole = np.zeros((shard_size,) + piece.shape[1:], piece.dtype)
    whole[shard_start:shard_stop] = piece
    mapped, sampled, _ = partial_fc_ref(whole, label, num_sample, seed, parallel_num)
    per_shard, shard = num_sample // parallel_num, shard_start // piece.shape[0]
    mine = sampled[shard * per_shard:(shard + 1) * per_shard]
    return mapped, mine, piece[mine - shard_start]


def partial_fc_grad_case(draw: Draw) -> Case:
    classes, width = draw(st.integers(1, 6)), draw(st.integers(1, 3))
    sampled = np.array(draw(st.lists(st.integers(0, classes - 1), min_size=1, max_size=classes, unique=True)),
                       dtype=np.int32)
    return [draw(fst.arrays((sampled.size, width))), sampled, draw(fst.arrays((classes, width)))], {"parallel_num": 1}


def partial_fc_grad_ref(data: np.ndarray, sampled: np.ndarray, weight: np.ndarray, parallel_num: int,
                        start: int = 0) -> np.ndarray:
    out = np.zeros_like(weight)
    for row, c in zip(data, sampled.tolist()):
        out[c - start] += row
    return out


def sharded_partial_fc_grad_case(draw: Draw) -> Case:
    shards, size, width = draw(st.sampled_from([2, 3])), draw(st.integers(1, 4)), draw(st.integers(1, 3))
    per_shard, shard = draw(st.integers(1, size)), draw(st.integers(0, shards - 1))
    sampled = np.array(draw(st.lists(st.integers(shard * size, (shard + 1) * size - 1), min_size=per_shard,
                                     max_size=per_shard, unique=True)), dtype=np.int32)
    return [draw(fst.arrays((per_shard, width))), sampled, draw(fst.arrays((size, width)))], {
        "parallel_num": shards, "shard_start": shard * per_shard, "shard_stop": (shard + 1) * per_shard,
        "shard_size": shards * per_shard}


def sharded_partial_fc_grad_ref(data: np.ndarray, sampled: np.ndarray, weight: np.ndarray, parallel_num: int,
                                shard_start: int, shard_stop: int, shard_size: int) -> np.ndarray:
    return partial_fc_grad_ref(data, sampled, weight, parallel_num,
                               shard_start // (shard_stop - shard_start) * weight.shape[0])


def identity_case(draw: Draw) -> Case:
    return [draw(fst.arrays(tuple(draw(fst.small_shapes(0, 3, 4)))))], {}


def mark_case(draw: Draw) -> Case:
    (x,), _ = identity_case(draw)
    return [x], {"mark_prefix": draw(st.sampled_from(["fc", "layer-1"]))}


CASES = [
    OpCase("min_max_observer", min_max_case, reference=min_max_ref, wrt=()),
    OpCase("moving_average_min_max_observer", moving_case, reference=moving_ref, wrt=()),
    OpCase("fake_quantization", fake_case, reference=fake_ref, wrt=()),
    OpCase("distributed_partial_fc_sample", partial_fc_case, reference=partial_fc_ref, wrt=()),
    OpCase("distributed_partial_fc_sample_grad", partial_fc_grad_case, reference=partial_fc_grad_ref, wrt=()),
    OpCase("sharded_distributed_partial_fc_sample", sharded_partial_fc_case, reference=sharded_partial_fc_ref,
           wrt=()),
    OpCase("sharded_distributed_partial_fc_sample_grad", sharded_partial_fc_grad_case,
           reference=sharded_partial_fc_grad_ref, wrt=()),
    OpCase("amp_white_identity", identity_case, reference=lambda x: x),
    OpCase("nvtx_start", mark_case, reference=lambda x, mark_prefix: x),
    OpCase("nvtx_end", mark_case, reference=lambda x, mark_prefix: x),
]
