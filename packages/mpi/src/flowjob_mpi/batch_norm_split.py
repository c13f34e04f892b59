"""Train-mode batch normalization whose rows are split over the ranks (data parallel, as one process): the pieces of
the signature ``(x S(k)) -> (y S(k), mean B, variance B)`` that flowjob-ops' rule names
(``flowjob_ops.layout_rules.batch_norm_train``), and of its gradient.

The statistics are the whole batch's, as one process takes them: the per-channel sums of every rank's rows are
all-reduced (``MPI_SUM``, float64), first of x (the mean), then of the squares of x - mean (the variance, two-pass
as flowjob-ops' kernel). The gradient all-reduces, in one message, the sums of dy and of dy * (x - mean), from which
dgamma and dbeta (the same on every rank) and each rank's rows of dx follow. The math is flowjob-ops'
``records/batch_norm_train.py`` with the sums taken over the ranks; without ranks that record runs.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np

from flowjob_core import BlobSpec, Effects, KernelContext, OpDef, ShapeError

from flowjob_mpi.faults import WAITING
from flowjob_mpi.world import world


def _axis(x: BlobSpec, attrs: dict, op: str) -> int:
    axis = attrs.get("axis")
    if not isinstance(axis, int) or not -len(x.shape) <= axis < len(x.shape):
        raise ShapeError(f"{op}: axis {axis!r} is out of range for x of shape {x.shape}")
    return axis % len(x.shape)


def _check_piece(attrs: dict, op: str) -> float:
    """How many times the rows of the piece the whole split axis holds (the whole batch over this rank's rows)."""
    start, stop, size = attrs.get("shard_start"), attrs.get("shard_stop"), attrs.get("shard_size")
    if not all(isinstance(v, int) for v in (start, stop, size)) or not 0 <= start < stop <= size:
        raise ShapeError(f"{op}: shard_start {start!r}, shard_stop {stop!r} and shard_size {size!r} must name this "
                         f"rank's rows")
    return size / (stop - start)


def _infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    op = "mpi_batch_norm_train_rows_split"
    x = inputs[0]
    _check_piece(attrs, op)
    channels = x.shape[_axis(x, attrs, op)]
    if any(p.shape != (channels,) for p in inputs[1:]) or x.dtype.kind != "f":
        raise ShapeError(f"{op}: x must be floating and gamma, beta of shape ({channels},), got {list(inputs)}")
    stat = BlobSpec((channels,), x.dtype)
    return [x, stat, stat]


def _grad_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    op = "mpi_batch_norm_train_grad_rows_split"
    x = inputs[0]
    _check_piece(attrs, op)
    if inputs[-1].shape != x.shape:
        raise ShapeError(f"{op}: dy {inputs[-1].shape} must be shaped like x {x.shape}")
    stat = BlobSpec((x.shape[_axis(x, attrs, op)],), x.dtype)
    return [x] + [stat] * (bool(attrs.get("with_scale")) + bool(attrs.get("with_offset")))


def _view(ctx: KernelContext) -> tuple[tuple[int, int, int], tuple[int, int, int], float]:
    """x's piece seen as (outer, channels, inner), a per-channel vector's broadcast shape, and 1 / the whole count."""
    x = ctx.inputs[0]
    axis = _axis(x, ctx.attrs, ctx.node_name)
    shape = (math.prod(x.shape[:axis]), x.shape[axis], math.prod(x.shape[axis + 1:]))
    whole = shape[0] * shape[2] * _check_piece(ctx.attrs, ctx.node_name)
    return shape, (1, shape[1], 1), 1.0 / whole


def _summed(ctx: KernelContext, what: str) -> Callable[[np.ndarray], np.ndarray]:
    from mpi4py import MPI

    comm = world().comm
    label = f"the {what} of node {ctx.node_name!r}"

    def total(sums: np.ndarray) -> np.ndarray:
        sums = np.ascontiguousarray(sums, dtype=np.float64)
        WAITING.enter(label)
        comm.Allreduce(MPI.IN_PLACE, sums, op=MPI.SUM)
        WAITING.leave()
        return sums

    return total


def _place(ctx: KernelContext, out: Any, value: np.ndarray) -> None:
    if ctx.backend.host_arrays:
        np.copyto(out, value.reshape(out.shape), casting="unsafe")
    else:
        out[...] = ctx.backend.from_host(np.ascontiguousarray(value.reshape(out.shape).astype(out.dtype)))


def _kernel(ctx: KernelContext) -> Callable[..., Any]:
    shape, per_channel, inv_n = _view(ctx)
    total = _summed(ctx, "batch statistics")
    eps, dtype = float(ctx.attrs["epsilon"]), ctx.inputs[0].dtype
    with_scale, with_offset = bool(ctx.attrs.get("with_scale")), bool(ctx.attrs.get("with_offset"))
    relu = ctx.attrs.get("activation") == "relu"
    y_out, mean_out, var_out = ctx.out(0), ctx.out(1), ctx.out(2)
    host = ctx.backend.to_host

    def run(x: Any, *params: Any) -> tuple[Any, Any, Any]:
        x3 = np.asarray(host(x)).reshape(shape)
        mean = total(x3.sum(axis=(0, 2), dtype=np.float64)) * inv_n
        centred = x3 - mean.astype(dtype).reshape(per_channel)
        variance = total((centred.astype(np.float32) ** 2).sum(axis=(0, 2), dtype=np.float64)) * inv_n
        scale = 1.0 / np.sqrt(variance + eps)
        if with_scale:
            scale = scale * np.asarray(host(params[0]))
        y = centred * scale.astype(dtype).reshape(per_channel)
        if with_offset:
            y = y + np.asarray(host(params[-1])).reshape(per_channel)
        if relu:
            y = np.maximum(y, 0)
        _place(ctx, y_out, y.astype(dtype))
        _place(ctx, mean_out, mean)
        _place(ctx, var_out, variance)
        return y_out, mean_out, var_out

    return run


def _grad_kernel(ctx: KernelContext) -> Callable[..., Any]:
    shape, per_channel, inv_n = _view(ctx)
    total = _summed(ctx, "batch-normalization gradient sums")
    eps, dtype = float(ctx.attrs["epsilon"]), ctx.inputs[0].dtype
    with_scale, with_offset = bool(ctx.attrs.get("with_scale")), bool(ctx.attrs.get("with_offset"))
    relu = ctx.attrs.get("activation") == "relu"
    outs = [ctx.out(i) for i in range(len(ctx.outputs))]
    host = ctx.backend.to_host

    def run(x: Any, mean: Any, variance: Any, *rest: Any) -> Any:
        dy3 = np.asarray(host(rest[-1])).reshape(shape)
        if relu:  # the gradient reaching the normalization: dy where the ReLU's output is positive
            dy3 = dy3 * (np.asarray(host(rest[-2])).reshape(shape) > 0)
        centred = np.asarray(host(x)).reshape(shape) - np.asarray(host(mean)).reshape(per_channel)
        wide_dy, wide_centred = dy3.astype(np.float32), centred.astype(np.float32)
        sums = total(np.concatenate([(wide_dy * wide_centred).sum(axis=(0, 2), dtype=np.float64),
                                     wide_dy.sum(axis=(0, 2), dtype=np.float64)]))
        sum_dy_centred, sum_dy = sums[:shape[1]], sums[shape[1]:]
        inv_sigma = 1.0 / np.sqrt(np.asarray(host(variance)).astype(np.float64) + eps)
        if with_scale:
            _place(ctx, outs[1], sum_dy_centred * inv_sigma)  # dgamma = sum(dy * xhat)
        if with_offset:
            _place(ctx, outs[-1], sum_dy)  # dbeta = sum(dy)
        gain = inv_sigma * np.asarray(host(rest[0])) if with_scale else inv_sigma
        along = -inv_sigma * inv_sigma * sum_dy_centred * inv_n
        mean_dy = sum_dy * inv_n
        dx = (centred * along.astype(dtype).reshape(per_channel) + dy3 - mean_dy.astype(dtype).reshape(per_channel))
        _place(ctx, outs[0], (dx * gain.astype(dtype).reshape(per_channel)).astype(dtype))
        return tuple(outs) if len(outs) > 1 else outs[0]

    return run


BATCH_NORM_TRAIN_ROWS_SPLIT = OpDef(
    "mpi_batch_norm_train_rows_split", _infer, kernel=_kernel, not_differentiable=True,
    doc="inputs (this rank's rows of x[, gamma][, beta]): (its rows of y, the whole batch's mean and variance)",
    effects=Effects(ordered=True))
BATCH_NORM_TRAIN_GRAD_ROWS_SPLIT = OpDef(
    "mpi_batch_norm_train_grad_rows_split", _grad_infer, kernel=_grad_kernel, not_differentiable=True,
    doc="inputs (this rank's rows of x, mean, variance[, gamma][, y], its rows of dy): (its rows of dx[, dgamma]"
        "[, dbeta]), the parameters' gradients summed over every rank's rows", effects=Effects(ordered=True))

OPS = (BATCH_NORM_TRAIN_ROWS_SPLIT, BATCH_NORM_TRAIN_GRAD_ROWS_SPLIT)
