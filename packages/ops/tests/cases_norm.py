"""Op cases for normalization: moments, batch_norm, their gradient ops and the moving-average update,
with plain-numpy references (float64 arithmetic).

Variances are drawn in [0.5, 3] so the inverse square root stays well conditioned for the
central-difference check; ``moments`` inputs are plain draws (the variance is smooth everywhere).
"""
from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

from flowjob_core.testing import OpCase
from flowjob_core.testing import strategies as fst
from flowjob_core.testing.modules import sibling

base = sibling(__file__, "op_cases")
Draw = Any
Case = tuple[list[np.ndarray], dict]


# moments -----------------------------------------------------------------------------
def _axes(draw: Draw, rank: int) -> tuple[int, ...]:
    chosen = draw(st.lists(st.integers(0, rank - 1), min_size=1, max_size=rank, unique=True))
    # legacy accepts negative axes too
    return tuple(a - rank if draw(st.booleans()) else a for a in chosen)


def moments_case(draw: Draw) -> Case:
    shape = base._shape(draw, 1, 3)
    return [base._array(draw, shape)], {"axes": _axes(draw, len(shape)), "keepdims": draw(st.booleans())}


def moments_ref(x: np.ndarray, axes: tuple[int, ...], keepdims: bool) -> tuple[np.ndarray, np.ndarray]:
    x64 = x.astype(np.float64)
    return (base.legacy_reduced(x64.mean(axis=axes, keepdims=keepdims)),
            base.legacy_reduced(x64.var(axis=axes, keepdims=keepdims)))


def moments_grad_case(draw: Draw) -> Case:
    (x,), attrs = moments_case(draw)
    mean, _ = moments_ref(x, **attrs)
    mean = mean.astype(x.dtype)
    which = draw(st.sampled_from([(True, True), (True, False), (False, True)]))
    grads = [base._array(draw, mean.shape) for flag in which if flag]
    return [x, mean, *grads], {**attrs, "with_mean": which[0], "with_variance": which[1]}


def moments_grad_ref(x: np.ndarray, mean: np.ndarray, *grads: np.ndarray, axes: tuple[int, ...], keepdims: bool,
                     with_mean: bool, with_variance: bool) -> np.ndarray:
    rank = x.ndim
    kept = tuple(1 if i in {a % rank for a in axes} else d for i, d in enumerate(x.shape))
    n = x.size // int(np.prod(kept))
    out = np.zeros(x.shape)
    if with_mean:
        out += grads[0].reshape(kept) / n
    if with_variance:
        out += grads[-1].reshape(kept) * 2.0 * (x - mean.reshape(kept)) / n
    return out


# batch_norm --------------------------------------------------------------------------
def _param_shape(draw: Draw, shape: tuple[int, ...]) -> tuple[int, ...]:
    """x's rank, each extent 1 or x's (per-channel, per-sample or elementwise statistics)."""
    return tuple(d if draw(st.booleans()) else 1 for d in shape)


def batch_norm_case(draw: Draw) -> Case:
    shape = base._shape(draw, 1, 3)
    p = _param_shape(draw, shape)
    with_scale, with_offset = draw(st.booleans()), draw(st.booleans())
    inputs = [base._array(draw, shape), base._array(draw, p), base._positive(draw, p)]
    if with_scale:
        inputs.append(base._array(draw, p))
    if with_offset:
        inputs.append(base._array(draw, p))
    eps = draw(st.sampled_from([1e-5, 1e-3, 0.1]))
    return inputs, {"epsilon": eps, "with_scale": with_scale, "with_offset": with_offset}


def batch_norm_ref(x: np.ndarray, mean: np.ndarray, variance: np.ndarray, *params: np.ndarray, epsilon: float,
                   with_scale: bool, with_offset: bool) -> np.ndarray:
    y = (x - mean) / np.sqrt(variance.astype(np.float64) + epsilon)
    if with_scale:
        y = y * params[0]
    if with_offset:
        y = y + params[-1]
    return y


def batch_norm_grad_case(draw: Draw) -> Case:
    inputs, attrs = batch_norm_case(draw)
    saved = inputs[:4] if attrs["with_scale"] else inputs[:3]
    return [*saved, base._array(draw, inputs[0].shape)], {"epsilon": attrs["epsilon"],
                                                          "with_scale": attrs["with_scale"]}


def _sum_to(a: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    axes = tuple(i for i, (n, m) in enumerate(zip(shape, a.shape)) if n == 1 and m != 1)
    return a.sum(axis=axes, keepdims=True) if axes else a


def batch_norm_grad_ref(x: np.ndarray, mean: np.ndarray, variance: np.ndarray, *rest: np.ndarray, epsilon: float,
                        with_scale: bool) -> tuple[np.ndarray, ...]:
    dy = rest[-1].astype(np.float64)
    inv = 1.0 / np.sqrt(variance.astype(np.float64) + epsilon)
    g = dy * rest[0] if with_scale else dy
    dx = g * inv
    dmean = -_sum_to(np.broadcast_to(dx, x.shape), mean.shape)
    dvar = _sum_to(g * (x - mean), variance.shape) * -0.5 * inv ** 3
    grads = [dx, dmean, dvar]
    if with_scale:
        grads.append(_sum_to(dy * (x - mean) * inv, rest[0].shape))
    return tuple(grads)


# moving average ----------------------------------------------------------------------
def moving_update_case(draw: Draw) -> Case:
    shape = base._shape(draw, 1, 1)
    return [base._array(draw, shape), base._array(draw, shape)], {"momentum": draw(st.sampled_from([0.0, 0.9, 0.99,
                                                                                                     1.0]))}


def l2_case(draw: Draw) -> Case:
    """Elements away from 0 (a slice's norm >= 0.2, so finite differences stay well conditioned), and
    maybe one slice of zeros with epsilon 1e-2: the clamped branch, whose gradient is dy / sqrt(epsilon)
    (with epsilon 1e-12 a finite-difference step of 1e-6 would cross the kink at sum == epsilon)."""
    shape = base._shape(draw)
    x = draw(fst.array_away_from(shape, (0.0,), 0.2, -3.0, 3.0))
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    epsilon = draw(st.sampled_from([1e-12, 1e-2]))
    if epsilon == 1e-2 and draw(st.booleans()):
        x[tuple(slice(None) if i == axis % len(shape) else 0 for i in range(len(shape)))] = 0.0
    return [x], {"axis": axis, "epsilon": epsilon}


def l2_ref(x: np.ndarray, axis: int, epsilon: float) -> tuple[np.ndarray, np.ndarray]:
    sums = np.sum(x * x, axis=axis, keepdims=True)
    return x / np.sqrt(np.maximum(sums, epsilon)), sums


def l2_grad_case(draw: Draw) -> Case:
    (x,), attrs = l2_case(draw)
    y, sums = l2_ref(x, **attrs)
    return [base._array(draw, x.shape), y, sums], attrs


def l2_grad_ref(dy: np.ndarray, y: np.ndarray, sums: np.ndarray, axis: int, epsilon: float) -> np.ndarray:
    """Jacobian-vector product of x / sqrt(max(s, eps)) written from the definition, slice by slice."""
    norm = np.sqrt(np.maximum(sums, epsilon))
    x = y * norm
    moved_x, moved_dy = np.moveaxis(x, axis, -1), np.moveaxis(dy, axis, -1)
    moved_n, moved_s = np.moveaxis(norm, axis, -1), np.moveaxis(sums, axis, -1)
    out = np.empty_like(moved_x)
    for index in np.ndindex(*moved_x.shape[:-1]):
        v, g, n = moved_x[index], moved_dy[index], moved_n[index][0]
        jac = np.eye(v.size) / n
        if moved_s[index][0] >= epsilon:  # d(1/n)/dx = -x / n^3
            jac -= np.outer(v, v) / n ** 3
        out[index] = jac.T @ g
    return np.moveaxis(out, -1, axis)


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


CASES = [
    OpCase("moments", moments_case, reference=moments_ref),
    OpCase("moments_grad", moments_grad_case, wrt=(), reference=moments_grad_ref),
    OpCase("batch_norm", batch_norm_case, reference=batch_norm_ref),
    OpCase("batch_norm_grad", batch_norm_grad_case, wrt=(), reference=batch_norm_grad_ref),
    # no outputs: the case runs the kernel under the contract (the statistic stays read-only); the
    # updated values are checked in test_normalization_legacy.py
    OpCase("batch_norm_moving_update", moving_update_case, wrt=(), reference=lambda moving, stat, momentum: ()),
    OpCase("l2_normalize", l2_case, reference=l2_ref),
    OpCase("l2_normalize_grad", l2_grad_case, reference=l2_grad_ref, wrt=()),
    OpCase("layer_norm_grad", layer_norm_grad_case, reference=layer_norm_grad_ref, wrt=()),
    OpCase("layer_norm_param_grad", param_grad_case, reference=param_grad_ref, wrt=()),
]
