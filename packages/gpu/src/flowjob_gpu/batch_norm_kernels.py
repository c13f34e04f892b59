"""The gpu backend's train-mode batch normalization, forward and backward: flowjob-kernels' ``cuda/batch_norm.cu``,
one launch each where the records' xp kernels take about ten (sums, subtract, square, sum, sqrt, scale, add, ...).

Semantics are the op records' (``flowjob_ops.records.batch_norm_train``): x seen as (outer, channels, inner)
with the channel on ``axis``; outputs (y, mean, biased variance) of x's dtype; the two-pass variance; sums in
float64 (float32 inputs too); y = (x - mean) * T(gamma / sqrt(variance + epsilon)) [+ beta], then max(y, 0) with
``activation='relu'``. The gradient's inputs are (x, mean, variance[, gamma][, y], dy), y only with the ReLU
(dy is masked by y > 0 first); its outputs (dx[, dgamma][, dbeta]) for the parameters the forward had
(``with_scale``, ``with_offset``), dx through the batch statistics.

Launch shape (both directions): a 2-D block of ``THREADS`` threads, ``channels_per_block`` channels along x
(1 where ``inner`` > 1, e.g. NCHW; up to 32 neighbouring channels where ``inner`` == 1, channels last, so a
warp reads consecutive values) and the rest along y striding over the outer * inner values of a channel; a
grid of one block per channel group (at most ``MAX_BLOCKS``, the blocks then stride). A channel's statistics
and its normalization are all one block's: no second launch, no atomics, a reduction order fixed by the launch
shape. With few channels and large batches that leaves SMs idle (64 channels use 64 blocks); splitting a
channel over blocks would need a second launch or a grid-wide handshake.

Inputs that are not C-contiguous (a transposed view) are copied into a buffer this node allocates on the first
such call and reuses after. Dtypes the source has no entry point for (float16) run the record's own kernel.
"""
from __future__ import annotations

import math
from typing import Any, Callable

from flowjob_core import BlobSpec, KernelContext
from flowjob_ops.records.batch_norm_train import BATCH_NORM_TRAIN, BATCH_NORM_TRAIN_GRAD

from flowjob_gpu.record_kernels import ContiguousInputs, own_kernel
from flowjob_gpu.sources import compiled_module

FAMILY = "batch_norm"
FORWARD = {"float32": "batch_norm_forward_f32", "float64": "batch_norm_forward_f64"}
BACKWARD = {"float32": "batch_norm_backward_f32", "float64": "batch_norm_backward_f64"}
THREADS = 512  # per block; the kernels' shared memory holds 1024 doubles, so at most 1024
WARP = 32
MAX_BLOCKS = 65535


def _axis(spec: BlobSpec, attrs: dict) -> int:
    """The channel axis, non-negative (the record's infer has checked it is an int in range)."""
    return int(attrs["axis"]) % len(spec.shape)


class _Channels:
    """What both kernels share: the entry point, x seen as (outer, channels, inner) and the launch shape."""

    def __init__(self, ctx: KernelContext, symbol: str) -> None:
        cp = self.cp = ctx.xp
        self.fn = compiled_module(cp, FAMILY, cp.cuda.Device().id).get_function(symbol)
        x = ctx.inputs[0]
        axis = _axis(x, ctx.attrs)
        self.outer, self.channels, self.inner = (math.prod(x.shape[:axis]), x.shape[axis],
                                                 math.prod(x.shape[axis + 1:]))
        per_block = 1 if self.inner > 1 else min(WARP, 1 << max(0, self.channels - 1).bit_length())
        self.block = (per_block, THREADS // per_block)
        self.grid = (max(1, min(-(-self.channels // per_block), MAX_BLOCKS)),)
        self.sizes = (cp.int64(self.outer), cp.int64(self.channels), cp.int64(self.inner),
                      cp.float64(1.0 / (self.outer * self.inner)), cp.float64(float(ctx.attrs["epsilon"])))
        self.with_scale = bool(ctx.attrs.get("with_scale"))
        self.with_offset = bool(ctx.attrs.get("with_offset"))
        self.relu = ctx.attrs.get("activation") == "relu"
        self.flags = (cp.int32(self.with_scale), cp.int32(self.with_offset), cp.int32(self.relu))
        self.dense = ContiguousInputs(ctx)

    @classmethod
    def of(cls, ctx: KernelContext, symbols: dict[str, str]) -> "_Channels | None":
        """For the entry point of x's dtype; None where the source has none (the record's kernel runs)."""
        symbol = symbols.get(ctx.inputs[0].dtype.name)
        return None if symbol is None else cls(ctx, symbol)


def batch_norm_train_kernel(ctx: KernelContext) -> Any:
    """Inputs (x[, gamma][, beta]); outputs (y, mean, variance)."""
    kernel = _Channels.of(ctx, FORWARD)
    if kernel is None:
        return own_kernel(ctx, str(ctx.inputs[0].dtype))
    fn, dense = kernel.fn, kernel.dense
    y, mean, variance = ctx.out(0), ctx.out(1), ctx.out(2)
    scale_at = 1 if kernel.with_scale else None
    offset_at = 1 + kernel.with_scale if kernel.with_offset else None

    def run(x: Any, *params: Any) -> tuple[Any, Any, Any]:
        x = dense(0, x)
        # an absent parameter's pointer is never read: x stands in for it
        gamma = x if scale_at is None else dense(scale_at, params[scale_at - 1])
        beta = x if offset_at is None else dense(offset_at, params[offset_at - 1])
        fn(kernel.grid, kernel.block, (x, gamma, beta, y, mean, variance, *kernel.sizes, *kernel.flags))
        return y, mean, variance

    return run


def batch_norm_train_grad_kernel(ctx: KernelContext) -> Any:
    """Inputs (x, mean, variance[, gamma][, y], dy); outputs (dx[, dgamma][, dbeta])."""
    kernel = _Channels.of(ctx, BACKWARD)
    if kernel is None:
        return own_kernel(ctx, str(ctx.inputs[0].dtype))
    fn, dense = kernel.fn, kernel.dense
    outs = [ctx.out(i) for i in range(len(ctx.outputs))]
    dx = outs[0]
    dgamma = outs[1] if kernel.with_scale else dx  # never written without its flag
    dbeta = outs[-1] if kernel.with_offset else dx
    gamma_at = 3 if kernel.with_scale else None
    y_at = len(ctx.inputs) - 2 if kernel.relu else None
    dy_at = len(ctx.inputs) - 1

    def run(*inputs: Any) -> Any:
        x, mean, variance = (dense(i, inputs[i]) for i in range(3))
        dy = dense(dy_at, inputs[dy_at])
        gamma = x if gamma_at is None else dense(gamma_at, inputs[gamma_at])
        y = x if y_at is None else dense(y_at, inputs[y_at])
        fn(kernel.grid, kernel.block, (x, mean, variance, gamma, y, dy, dx, dgamma, dbeta, *kernel.sizes,
                                       *kernel.flags))
        return tuple(outs) if len(outs) > 1 else dx

    return run


OVERRIDES: dict[str, tuple[str, dict[str, str]]] = {
    BATCH_NORM_TRAIN.name: (FAMILY, FORWARD),
    BATCH_NORM_TRAIN_GRAD.name: (FAMILY, BACKWARD),
}
"""Entries for ``flowjob_gpu.overrides.OVERRIDES`` (op -> (family, symbol per dtype))."""

KERNEL_BUILDERS: dict[str, Callable[[KernelContext], Any]] = {
    BATCH_NORM_TRAIN.name: batch_norm_train_kernel,
    BATCH_NORM_TRAIN_GRAD.name: batch_norm_train_grad_kernel,
}
"""Entries for ``flowjob_gpu.overrides.KERNEL_BUILDERS``, keyed by the op records' names."""
