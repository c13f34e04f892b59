"""Op cases of legacy v0.4 ops (records in ``records/losses.py``, ``upsample.py``, ``normalization.py``,
``matmul.py``, ``categorical.py``, ``reduce.py`` and ``shape.py``). op_cases.py appends ``CASES``.

References are plain numpy loops written from the definitions: CTC sums the probabilities of every
alignment path (enumerated, so targets stay short), upsampling reads each output's source pixels,
the attention projection slices heads explicitly. Inputs keep away from kinks (|d| = beta for smooth L1,
|x| near 1 for the margin's arccos).
"""
from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
from hypothesis import strategies as st

from flowjob_core.testing import OpCase
from flowjob_core.testing.modules import sibling

base = sibling(__file__, "op_cases")
Draw = Any
Case = tuple[list[np.ndarray], dict]


# smooth L1 ------------------------------------------------------------------------------------
def smooth_l1_case(draw: Draw) -> Case:
    shape = base._shape(draw)
    beta = draw(st.sampled_from([0.0, 0.5, 1.0, 2.0]))
    label = base._array(draw, shape)
    # the difference keeps a gap from 0 and from +-beta, where the pieces meet
    diff = base._away(draw, shape, (0.0, beta, -beta), 0.1, -4.0, 4.0)
    return [label + diff, label], {"beta": beta}


def smooth_l1_ref(prediction: np.ndarray, label: np.ndarray, beta: float) -> np.ndarray:
    d = np.abs(prediction - label)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(d < beta, 0.5 * d * d / beta, d - 0.5 * beta)


def smooth_l1_grad_case(draw: Draw) -> Case:
    (prediction, label), attrs = smooth_l1_case(draw)
    return [base._array(draw, prediction.shape), prediction, label], attrs


def smooth_l1_grad_ref(dy: np.ndarray, prediction: np.ndarray, label: np.ndarray, beta: float) -> np.ndarray:
    d = prediction - label
    with np.errstate(divide="ignore", invalid="ignore"):
        return dy * np.where(np.abs(d) < beta, d / beta, np.sign(d))


# combined margin ------------------------------------------------------------------------------
def margin_case(draw: Draw) -> Case:
    rows, classes = draw(st.integers(1, 4)), draw(st.integers(1, 5))
    x = base._array(draw, (rows, classes), -0.9, 0.9)
    # some labels fall outside [0, classes): legacy leaves those rows unchanged
    label = np.array([draw(st.integers(-1, classes)) for _ in range(rows)], dtype=draw(st.sampled_from(
        [np.int32, np.int64])))
    attrs = {"m1": draw(st.sampled_from([1.0, 2.0])), "m2": draw(st.sampled_from([0.0, 0.3])),
             "m3": draw(st.sampled_from([0.0, 0.2]))}
    return [x, label], attrs


def margin_ref(x: np.ndarray, label: np.ndarray, m1: float, m2: float, m3: float) -> np.ndarray:
    y = x.copy()
    for i, c in enumerate(label):
        if 0 <= c < x.shape[1]:
            y[i, c] = math.cos(m1 * math.acos(x[i, c]) + m2) - m3
    return y


def margin_grad_case(draw: Draw) -> Case:
    (x, label), attrs = margin_case(draw)
    return [base._array(draw, x.shape), label, x], attrs


def margin_grad_ref(dy: np.ndarray, label: np.ndarray, x: np.ndarray, m1: float, m2: float, m3: float) -> np.ndarray:
    dx = dy.copy()
    for i, c in enumerate(label):
        if 0 <= c < x.shape[1]:
            # d/dx cos(m1 acos x + m2) = m1 sin(m1 acos x + m2) / sqrt(1 - x^2)
            dx[i, c] = dy[i, c] * m1 * math.sin(m1 * math.acos(x[i, c]) + m2) / math.sqrt(1 - x[i, c] ** 2)
    return dx


# CTC ------------------------------------------------------------------------------------------
def ctc_case(draw: Draw) -> Case:
    batch, classes, longest = draw(st.integers(1, 3)), draw(st.integers(2, 4)), draw(st.integers(1, 2))
    blank = draw(st.integers(0, classes - 1))
    labels = [c for c in range(classes) if c != blank]
    target_lengths = np.array([draw(st.integers(0, longest)) for _ in range(batch)], dtype=np.int32)
    steps = draw(st.integers(2 * longest + 1, 2 * longest + 2))  # every target fits (repeats need a blank)
    input_lengths = np.array([draw(st.integers(2 * int(n) + 1, steps)) for n in target_lengths],
                             dtype=draw(st.sampled_from([np.int32, np.int64])))
    targets = np.array([[draw(st.sampled_from(labels)) for _ in range(longest)] for _ in range(batch)],
                       dtype=np.int32)
    logits = base._array(draw, (steps, batch, classes), -2.0, 2.0)
    log_probs = logits - np.log(np.exp(logits).sum(axis=-1, keepdims=True))
    return [log_probs, targets, input_lengths, target_lengths], {"blank": blank, "zero_infinity": False}


def _collapse(path: tuple[int, ...], blank: int) -> list[int]:
    out: list[int] = []
    previous = None
    for c in path:
        if c != previous and c != blank:
            out.append(c)
        previous = c
    return out


def ctc_ref(log_probs: np.ndarray, targets: np.ndarray, input_lengths: np.ndarray, target_lengths: np.ndarray,
            blank: int, zero_infinity: bool) -> np.ndarray:
    """-log of the summed probability of every path that collapses to the target (all paths enumerated)."""
    _, batch, classes = log_probs.shape
    loss = np.empty(batch)
    for b in range(batch):
        steps, want = int(input_lengths[b]), list(targets[b, :int(target_lengths[b])])
        total = 0.0
        for path in itertools.product(range(classes), repeat=steps):
            if _collapse(path, blank) == want:
                total += math.exp(sum(log_probs[t, b, c] for t, c in enumerate(path)))
        loss[b] = -math.log(total) if total > 0 else math.inf
        if zero_infinity and math.isinf(loss[b]):
            loss[b] = 0.0
    return loss.astype(log_probs.dtype)


def ctc_grad_case(draw: Draw) -> Case:
    inputs, attrs = ctc_case(draw)
    loss = ctc_ref(*inputs, **attrs)
    return [*inputs, base._array(draw, loss.shape), loss], attrs


def ctc_grad_ref(log_probs: np.ndarray, targets: np.ndarray, input_lengths: np.ndarray, target_lengths: np.ndarray,
                 dy: np.ndarray, loss: np.ndarray, blank: int, zero_infinity: bool) -> np.ndarray:
    """d loss / d log_probs by path enumeration: minus the posterior count of (t, c) on the target's paths."""
    steps_all, batch, classes = log_probs.shape
    grad = np.zeros_like(log_probs)
    for b in range(batch):
        steps, want = int(input_lengths[b]), list(targets[b, :int(target_lengths[b])])
        counts, total = np.zeros((steps_all, classes)), 0.0
        for path in itertools.product(range(classes), repeat=steps):
            if _collapse(path, blank) == want:
                p = math.exp(sum(log_probs[t, b, c] for t, c in enumerate(path)))
                total += p
                for t, c in enumerate(path):
                    counts[t, c] += p
        grad[:, b] = -dy[b] * counts / total
    return grad


# upsample -------------------------------------------------------------------------------------
def upsample_case(draw: Draw) -> Case:
    shape = (draw(st.integers(1, 2)), draw(st.integers(1, 2)), draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    interpolation = draw(st.sampled_from(["nearest", "bilinear"]))
    align = interpolation == "bilinear" and draw(st.booleans())
    attrs = {"height_scale": float(draw(st.sampled_from([1, 2, 3]))),
             "width_scale": float(draw(st.sampled_from([1, 2, 2.5]))), "align_corners": align,
             "interpolation": interpolation}
    return [base._array(draw, shape)], attrs


def _source(o: int, size: int, out_size: int, scale: float, align: bool, interpolation: str) -> list[tuple[int, float]]:
    """The input positions output ``o`` reads along one axis, with weights (legacy's index rules)."""
    if interpolation == "nearest":
        return [(min(int(math.floor((o + 0.5) / scale)), size - 1), 1.0)]
    if align:
        position = o * (size - 1) / (out_size - 1) if out_size > 1 else 0.0
    else:
        position = max((o + 0.5) / scale - 0.5, 0.0)
    low = min(int(math.floor(position)), size - 1)
    high = min(int(math.ceil(position)), size - 1)
    frac = position - math.floor(position)
    return [(low, 1.0 - frac), (high, frac)]


def upsample_ref(x: np.ndarray, height_scale: float, width_scale: float, align_corners: bool,
                 interpolation: str) -> np.ndarray:
    n, c, h, w = x.shape
    oh, ow = int(height_scale * h), int(width_scale * w)
    y = np.zeros((n, c, oh, ow), dtype=x.dtype)
    for i in range(oh):
        for j in range(ow):
            for hi, hw in _source(i, h, oh, height_scale, align_corners, interpolation):
                for wi, ww in _source(j, w, ow, width_scale, align_corners, interpolation):
                    y[:, :, i, j] += hw * ww * x[:, :, hi, wi]
    return y


def upsample_grad_case(draw: Draw) -> Case:
    (x,), attrs = upsample_case(draw)
    dy_shape = upsample_ref(x, **attrs).shape
    return [base._array(draw, dy_shape), x], attrs


def upsample_grad_ref(dy: np.ndarray, x: np.ndarray, height_scale: float, width_scale: float, align_corners: bool,
                      interpolation: str) -> np.ndarray:
    _, _, h, w = x.shape
    _, _, oh, ow = dy.shape
    dx = np.zeros_like(x)
    for i in range(oh):
        for j in range(ow):
            for hi, hw in _source(i, h, oh, height_scale, align_corners, interpolation):
                for wi, ww in _source(j, w, ow, width_scale, align_corners, interpolation):
                    dx[:, :, hi, wi] += hw * ww * dy[:, :, i, j]
    return dx


# fused self-attention -------------------------------------------------------------------------
def attention_case(draw: Draw) -> Case:
    seq, batch, heads, size = (draw(st.integers(1, 3)) for _ in range(4))
    attrs = {"head_size": size, "alpha": draw(st.sampled_from([1.0, 0.5]))}
    return [base._array(draw, (seq, batch, heads * 3 * size))], attrs


def _qkv(hidden: np.ndarray, head_size: int) -> list[np.ndarray]:
    seq, batch, width = hidden.shape
    heads = width // (3 * head_size)
    out = []
    for part in range(3):
        t = np.empty((batch, heads, seq, head_size), dtype=hidden.dtype)
        for h in range(heads):
            start = h * 3 * head_size + part * head_size
            t[:, h] = hidden[:, :, start:start + head_size].transpose(1, 0, 2)
        out.append(t)
    return out


def attention_ref(hidden: np.ndarray, head_size: int, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    q, k, v = _qkv(hidden, head_size)
    return alpha * np.einsum("bhid,bhjd->bhij", q, k), v


def attention_grad_case(draw: Draw) -> Case:
    (hidden,), attrs = attention_case(draw)
    qmk, v = attention_ref(hidden, **attrs)
    return [hidden, base._array(draw, qmk.shape), base._array(draw, v.shape)], attrs


def attention_grad_ref(hidden: np.ndarray, dqmk: np.ndarray, dv: np.ndarray, head_size: int,
                       alpha: float) -> np.ndarray:
    q, k, _ = _qkv(hidden, head_size)
    grads = [alpha * np.einsum("bhij,bhjd->bhid", dqmk, k), alpha * np.einsum("bhij,bhid->bhjd", dqmk, q), dv]
    out = np.empty_like(hidden)
    heads = hidden.shape[2] // (3 * head_size)
    for part, g in enumerate(grads):
        for h in range(heads):
            start = h * 3 * head_size + part * head_size
            out[:, :, start:start + head_size] = g[:, h].transpose(1, 0, 2)
    return out


# layer norm gradients -------------------------------------------------------------------------
def layer_norm_grad_case(draw: Draw) -> Case:
    shape = base._shape(draw, 2, 4)
    axis = draw(st.integers(1, len(shape) - 1))
    x = base._array(draw, shape)
    axes = tuple(range(axis, len(shape)))
    mean = x.mean(axis=axes)
    inv = 1.0 / np.sqrt(x.var(axis=axes) + 1e-5)
    signed = draw(st.sampled_from([axis, axis - len(shape)]))
    return [base._array(draw, shape), x, mean, inv], {"begin_norm_axis": signed}


def layer_norm_grad_ref(dy: np.ndarray, x: np.ndarray, mean: np.ndarray, inv_variance: np.ndarray,
                        begin_norm_axis: int) -> np.ndarray:
    """Per normalized group: d/dx of (x - mean(x)) * r with r held at the given 1/std, by the chain rule
    through the group's mean and variance: r * (dy - mean(dy) - xhat mean(dy xhat))."""
    axis = begin_norm_axis % x.ndim
    groups = int(np.prod(x.shape[:axis]))
    dx = np.empty_like(x)
    flat_dx, flat_dy, flat_x = dx.reshape(groups, -1), dy.reshape(groups, -1), x.reshape(groups, -1)
    for g in range(groups):
        r = inv_variance.reshape(-1)[g]
        xhat = (flat_x[g] - mean.reshape(-1)[g]) * r
        flat_dx[g] = r * (flat_dy[g] - flat_dy[g].mean() - xhat * (flat_dy[g] * xhat).mean())
    return dx


def param_grad_case(draw: Draw) -> Case:
    shape = base._shape(draw, 2, 4)
    axis = draw(st.integers(1, len(shape) - 1))
    signed = draw(st.sampled_from([axis, axis - len(shape)]))
    return [base._array(draw, shape), base._array(draw, shape), base._array(draw, shape[axis:])], \
        {"begin_params_axis": signed}


def param_grad_ref(dy: np.ndarray, normalized: np.ndarray, gamma: np.ndarray,
                   begin_params_axis: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    lead = tuple(range(begin_params_axis % dy.ndim))
    return dy * gamma, dy.sum(axis=lead), (dy * normalized).sum(axis=lead)


# counts, shape_elem_cnt, ordinal encoding -----------------------------------------------------
def _with_specials(draw: Draw, shape: tuple[int, ...]) -> np.ndarray:
    x = base._array(draw, shape)
    flat = x.reshape(-1)
    for i in range(flat.size):
        flat[i] = draw(st.sampled_from([flat[i], flat[i], np.inf, -np.inf, np.nan]))
    return x


def count_case(draw: Draw) -> Case:
    return [_with_specials(draw, base._shape(draw, 0, 3))], {}


def multi_count_case(draw: Draw) -> Case:
    return [_with_specials(draw, base._shape(draw, 0, 3)) for _ in range(draw(st.integers(1, 3)))], {}


def count_ref(*blobs: np.ndarray) -> np.ndarray:
    return np.array([sum(int(np.sum(~np.isfinite(b))) for b in blobs)], dtype=np.int64)


def elem_cnt_case(draw: Draw) -> Case:
    shape = base._shape(draw, 1, 4)
    axis = draw(st.one_of(st.none(), st.lists(st.integers(-len(shape), len(shape) - 1), min_size=0,
                                              max_size=len(shape))))
    return [np.zeros(shape)], {"axis": axis, "dtype": draw(st.sampled_from([None, np.int64, np.float32]))}


def elem_cnt_ref(x: np.ndarray, axis: Any, dtype: Any) -> np.ndarray:
    axes = range(x.ndim) if axis is None else {a % x.ndim for a in axis}
    return np.array([math.prod(x.shape[a] for a in axes)], dtype=dtype or np.int32)


def encode_case(draw: Draw) -> Case:
    dtype = draw(st.sampled_from([np.int32, np.int64]))
    capacity = draw(st.integers(4, 8))
    # at most capacity - 2 keys of its own, so with the <= 2 keys already in the table it never fills
    values = np.array(draw(st.lists(st.integers(0, 12), min_size=1, max_size=capacity - 2)), dtype=dtype)
    # a table already holding some keys (as after earlier steps): encode them through the probing path
    table, size = np.zeros(2 * capacity, dtype=dtype), np.zeros(1, dtype=dtype)
    for key in draw(st.lists(st.integers(1, 12), max_size=2, unique=True)):
        _insert(table, size, key)
    return [values.reshape(draw(st.sampled_from([(-1,), (1, -1)]))), table, size], {"hash_precomputed": True}


def _insert(table: np.ndarray, size: np.ndarray, key: int) -> int:
    """The reference probe: first slot from key % capacity holding the key (its ordinal) or 0 (a new one)."""
    capacity = table.size // 2
    for step in range(capacity):
        slot = (key + step) % capacity
        if table[2 * slot] == key:
            return int(table[2 * slot + 1])
        if table[2 * slot] == 0:
            size[0] += 1
            table[2 * slot], table[2 * slot + 1] = key, size[0]
            return int(size[0])
    raise AssertionError("full table")


def encode_ref(values: np.ndarray, table: np.ndarray, size: np.ndarray, hash_precomputed: bool) -> np.ndarray:
    table, size = table.copy(), size.copy()
    return np.array([_insert(table, size, int(v)) for v in values.reshape(-1)], dtype=values.dtype).reshape(
        values.shape)


CASES = [
    OpCase("smooth_l1_loss", smooth_l1_case, reference=smooth_l1_ref, wrt=(0,)),
    OpCase("smooth_l1_loss_grad", smooth_l1_grad_case, reference=smooth_l1_grad_ref, wrt=()),
    OpCase("combined_margin_loss", margin_case, reference=margin_ref),
    OpCase("combined_margin_loss_grad", margin_grad_case, reference=margin_grad_ref, wrt=()),
    OpCase("ctc_loss", ctc_case, reference=ctc_ref),
    OpCase("ctc_loss_grad", ctc_grad_case, reference=ctc_grad_ref, wrt=()),
    OpCase("upsample", upsample_case, reference=upsample_ref),
    OpCase("upsample_grad", upsample_grad_case, reference=upsample_grad_ref, wrt=()),
    OpCase("fused_self_attention_query_mul_key_and_value", attention_case, reference=attention_ref),
    OpCase("fused_self_attention_query_mul_key_and_value_grad", attention_grad_case, reference=attention_grad_ref,
           wrt=()),
    OpCase("layer_norm_grad", layer_norm_grad_case, reference=layer_norm_grad_ref, wrt=()),
    OpCase("layer_norm_param_grad", param_grad_case, reference=param_grad_ref, wrt=()),
    OpCase("count_not_finite", count_case, reference=count_ref, wrt=()),
    OpCase("multi_count_not_finite", multi_count_case, reference=count_ref, wrt=()),
    OpCase("shape_elem_cnt", elem_cnt_case, reference=elem_cnt_ref, wrt=()),
    # the table and size it updates in place are checked step by step in tests/test_nn_extra_legacy.py
    OpCase("categorical_ordinal_encode", encode_case, reference=encode_ref, wrt=()),
]
