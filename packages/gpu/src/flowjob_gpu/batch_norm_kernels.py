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
grid of one block per channel group (at most ``MAX_BLOCKS``, the blocks then stride). Where those groups are
enough to fill the device (``BLOCKS_PER_SM`` blocks on each of its multiprocessors), a channel's statistics and
its normalization are all one block's: one launch each way. Where they are not (64 channels of a ResNet-50
stem fill 64 of an H200's 132 multiprocessors), ``splits`` blocks share each channel (``split``: enough to fill
the device, each summing at least ``MIN_SLICE_ROWS`` values a thread), writing partial sums in float64 to a
workspace of the node, and the split kernels add them in slice order: three launches forward, two backward.
Either way there are no atomics, and the reduction order is fixed by the launch shape.

Inputs that are not C-contiguous (a transposed view) are copied into a buffer this node allocates on the first
such call and reuses after. Dtypes the source has no entry point for (float16) run the record's own kernel.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from flowjob_core import BlobSpec, KernelContext
from flowjob_ops.records.batch_norm_train import BATCH_NORM_TRAIN, BATCH_NORM_TRAIN_GRAD

from flowjob_gpu.record_kernels import ContiguousInputs, launch_grid, own_kernel
from flowjob_gpu.sources import compiled_module

FAMILY = "batch_norm"
FORWARD = {"float32": "batch_norm_forward_f32", "float64": "batch_norm_forward_f64"}
BACKWARD = {"float32": "batch_norm_backward_f32", "float64": "batch_norm_backward_f64"}
SPLIT_FORWARD = {name: {"float32": f"batch_norm_split_{name}_f32", "float64": f"batch_norm_split_{name}_f64"}
                 for name in ("moment", "normalize")}
SPLIT_BACKWARD = {name: {"float32": f"batch_norm_split_{name}_f32", "float64": f"batch_norm_split_{name}_f64"}
                  for name in ("grad_sums", "grad_apply")}
THREADS = 512  # per block; the kernels' shared memory holds 1024 doubles, so at most 1024
WARP = 32
MAX_BLOCKS = 65535
BLOCKS_PER_SM = 4  # blocks of THREADS a multiprocessor holds at once (2048 threads)
MIN_SLICE_ROWS = 8  # values each thread of a split block sums at least
MAX_SPLITS = 64


def split(groups: int, values: int, threads_y: int, multiprocessors: int) -> tuple[int, int]:
    """``(splits, per_slice)``: how many blocks share each of ``groups`` channel groups of ``values`` values each,
    and the values of each one's slice, so that ``groups * splits`` blocks fill ``multiprocessors`` (1: the groups
    do, or the channels are too short to share)."""
    fill = BLOCKS_PER_SM * multiprocessors
    if groups >= fill:
        return 1, values
    splits = max(1, min(-(-fill // groups), values // (MIN_SLICE_ROWS * threads_y), MAX_SPLITS))
    per_slice = -(-values // splits)
    return -(-values // per_slice), per_slice


def multiprocessors(cp: Any) -> int:
    """The current device's multiprocessor count."""
    return int(cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)["multiProcessorCount"])


def _axis(spec: BlobSpec, attrs: dict) -> int:
    """The channel axis, non-negative (the record's infer has checked it is an int in range)."""
    return int(attrs["axis"]) % len(spec.shape)


class _Channels:
    """What both kernels share: the entry point, x seen as (outer, channels, inner) and the launch shape."""

    def __init__(self, ctx: KernelContext, symbol: str, split_symbols: dict[str, dict[str, str]]) -> None:
        cp = self.cp = ctx.xp
        module = compiled_module(cp, FAMILY, cp.cuda.Device().id)
        x = ctx.inputs[0]
        axis = _axis(x, ctx.attrs)
        self.outer, self.channels, self.inner = (math.prod(x.shape[:axis]), x.shape[axis],
                                                 math.prod(x.shape[axis + 1:]))
        per_block = 1 if self.inner > 1 else min(WARP, 1 << max(0, self.channels - 1).bit_length())
        self.block = (per_block, THREADS // per_block)
        groups = launch_grid(self.channels, per_block, MAX_BLOCKS)
        values = self.outer * self.inner
        self.splits, per_slice = split(groups[0], values, self.block[1], multiprocessors(cp))
        inv_n, epsilon = cp.float64(1.0 / values), cp.float64(float(ctx.attrs["epsilon"]))
        dims = (cp.int64(self.outer), cp.int64(self.channels), cp.int64(self.inner))
        if self.splits == 1:
            self.fn = module.get_function(symbol)
            self.grid: tuple[int, ...] = groups
            self.sizes = (*dims, inv_n, epsilon)
        else:
            dtype = x.dtype.name
            self.split_fns = {name: module.get_function(symbols[dtype]) for name, symbols in split_symbols.items()}
            self.grid = (groups[0], self.splits)
            self.sizes = (*dims, cp.int64(per_slice), inv_n, epsilon)
            # float64 partial sums: two per channel and slice
            self.partials = ctx.workspace((2 * self.splits * self.channels,), np.float64)
        self.with_scale = bool(ctx.attrs.get("with_scale"))
        self.with_offset = bool(ctx.attrs.get("with_offset"))
        self.relu = ctx.attrs.get("activation") == "relu"
        self.flags = (cp.int32(self.with_scale), cp.int32(self.with_offset), cp.int32(self.relu))
        self.dense = ContiguousInputs(ctx)

    @classmethod
    def of(cls, ctx: KernelContext, symbols: dict[str, str], split_symbols: dict[str, dict[str, str]]
           ) -> "_Channels | None":
        """For the entry point of x's dtype; None where the source has none (the record's kernel runs)."""
        symbol = symbols.get(ctx.inputs[0].dtype.name)
        return None if symbol is None else cls(ctx, symbol, split_symbols)


def batch_norm_train_kernel(ctx: KernelContext) -> Any:
    """Inputs (x[, gamma][, beta]); outputs (y, mean, variance)."""
    kernel = _Channels.of(ctx, FORWARD, SPLIT_FORWARD)
    if kernel is None:
        return own_kernel(ctx, str(ctx.inputs[0].dtype))
    dense = kernel.dense
    y, mean, variance = ctx.out(0), ctx.out(1), ctx.out(2)
    scale_at = 1 if kernel.with_scale else None
    offset_at = 1 + kernel.with_scale if kernel.with_offset else None
    if kernel.splits > 1:  # the partial sums of x, then of the centred squares; which moment a launch sums
        half = kernel.partials.size // 2
        sums, squares = kernel.partials[:half], kernel.partials[half:]
        first, second = kernel.cp.int32(0), kernel.cp.int32(1)

    def run(x: Any, *params: Any) -> tuple[Any, Any, Any]:
        x = dense(0, x)
        # an absent parameter's pointer is never read: x stands in for it
        gamma = x if scale_at is None else dense(scale_at, params[scale_at - 1])
        beta = x if offset_at is None else dense(offset_at, params[offset_at - 1])
        if kernel.splits == 1:
            kernel.fn(kernel.grid, kernel.block, (x, gamma, beta, y, mean, variance, *kernel.sizes, *kernel.flags))
        else:
            launch, grid, block, sizes = kernel.split_fns, kernel.grid, kernel.block, kernel.sizes
            launch["moment"](grid, block, (x, sums, sums, *sizes[:5], first))  # the sums argument is unread
            launch["moment"](grid, block, (x, squares, sums, *sizes[:5], second))
            launch["normalize"](grid, block, (x, gamma, beta, y, mean, variance, sums, squares, *sizes,
                                              *kernel.flags))
        return y, mean, variance

    return run


def batch_norm_train_grad_kernel(ctx: KernelContext) -> Any:
    """Inputs (x, mean, variance[, gamma][, y], dy); outputs (dx[, dgamma][, dbeta])."""
    kernel = _Channels.of(ctx, BACKWARD, SPLIT_BACKWARD)
    if kernel is None:
        return own_kernel(ctx, str(ctx.inputs[0].dtype))
    dense = kernel.dense
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
        if kernel.splits == 1:
            kernel.fn(kernel.grid, kernel.block, (x, mean, variance, gamma, y, dy, dx, dgamma, dbeta, *kernel.sizes,
                                                  *kernel.flags))
        else:
            launch, grid, block, sizes = kernel.split_fns, kernel.grid, kernel.block, kernel.sizes
            launch["grad_sums"](grid, block, (x, mean, y, dy, kernel.partials, *sizes[:4], kernel.flags[2]))
            launch["grad_apply"](grid, block, (x, mean, variance, gamma, y, dy, dx, dgamma, dbeta, kernel.partials,
                                               *sizes, *kernel.flags))
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
