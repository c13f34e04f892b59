"""Cache-blocked train-mode batch normalization: the cpu backend's overrides of ``batch_norm_train`` and
``batch_norm_train_grad`` (registered by ``flowjob_ops.overrides.cpu``), the same math as the records'
whole-array kernels (``flowjob_ops.records.batch_norm_train``), to float rounding.

x is viewed as (outer, channels, inner) with the channel on ``axis`` and cut into cache-sized blocks of
channel rows: the elementwise passes and the per-channel dot products run on one block while it is in
cache, spread over the host's threads, and the one sum needed before any block can start (the forward's
mean) is a matrix-vector product over contiguous rows (BLAS). The centred values go into the output
buffer, which the affine step then overwrites in place, so the forward needs no scratch of x's size.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from flowjob_core import KernelContext
from flowjob_core.ir.opdef import KernelBuilder

from flowjob_core.backends.host_blocks import PerThread, copy_along_memory, each_item, host_parallel
from flowjob_ops.records.batch_norm_train import BATCH_NORM_TRAIN, BATCH_NORM_TRAIN_GRAD
from flowjob_ops.records.common import normalize_axis


BLOCK_ITEMS = 1 << 18  # values per block: large enough that threads overlap well, small enough for the L3
PARALLEL_ITEMS = 1 << 17  # below this, splitting over host threads costs more than it saves


@dataclass(frozen=True)
class _Block:
    """One block: ``at`` indexes the (outer, channels, inner) view of x (a 2-d block), ``chan`` the
    per-channel coefficients in their broadcast form (``_Blocks.column``), ``part`` the partial sums."""

    at: tuple
    chan: tuple
    part: tuple
    lead: int  # the block's first dimension


class _Blocks:
    """x's shape seen as (outer, channels, inner), cut into cache-sized blocks.

    Channel rows (inner > 1, e.g. NCHW): a block is x3[o, c0:c1], whole rows each ``inner`` long,
    with the per-channel coefficients coef[c0:c1, None]. Channels last (inner == 1: NHWC, or a
    (batch, features) blob): a block is the rows x3[r0:r1, :, 0] of every channel, with coef[None, :];
    rows of one channel would be single values there. The elementwise passes run block by block,
    several ufunc calls on one cached block, instead of each pass streaming the whole activation
    through memory; the blocks are shared out over the backend's host threads (``Backend.parallel``).
    Reductions accumulate in float32 at least (float16 blobs are widened block by block).
    """

    def __init__(self, ctx: KernelContext, shape: Sequence[int], axis: int, dtype: np.dtype) -> None:
        xp = self.xp = ctx.xp
        self.outer, self.channels, self.inner = math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1:])
        self.count = self.outer * self.inner
        self.dtype = dtype
        self.acc = dtype if dtype.itemsize >= 4 else np.dtype(np.float32)
        host = getattr(ctx.backend, "host_arrays", True)
        outer, channels = self.outer, self.channels
        self.channels_last = self.inner == 1
        if self.channels_last:
            per_block = max(1, min(outer, BLOCK_ITEMS // max(1, channels))) if host else max(outer, 1)
            self.blocks = [_Block((slice(r, min(r + per_block, outer)), slice(None), 0), (slice(None),),
                                  (k, slice(None)), min(r + per_block, outer) - r)
                           for k, r in enumerate(range(0, outer, per_block))]
            parts, self.block_width = len(self.blocks), channels
        else:
            per_block = max(1, min(channels, BLOCK_ITEMS // max(1, self.inner)))
            if not host:
                per_block = channels  # a device backend: fewer, larger launches, no cache to fit
            ranges = [slice(c, min(c + per_block, channels)) for c in range(0, channels, per_block)]
            self.blocks = [_Block((o, r), (r,), (o, r), r.stop - r.start) for o in range(outer) for r in ranges]
            parts, self.block_width = outer, self.inner
        size = self.count * self.channels
        self._split = host_parallel(ctx) if size >= PARALLEL_ITEMS else None
        # per-(part, channel) partial sums, reduced over the parts after a pass
        self.partial = xp.empty((parts, channels), dtype=self.acc)
        self.partial2 = xp.empty((parts, channels), dtype=self.acc)
        self.ones_inner = xp.ones(self.inner, dtype=self.acc)
        self.ones_outer = xp.ones(outer, dtype=self.acc) if self.channels_last else None
        self._gathered: dict[str, Any] = {}  # contiguous copies of strided inputs, made on first need
        self._sources: dict[str, Any] = {}  # the array each copy was last made from
        self._temporaries = PerThread()
        self.max_rows = per_block

    def column(self, v: Any) -> Any:
        """A per-channel vector (channels,) in the form that broadcasts over a block."""
        return v[None, :] if self.channels_last else v[:, None]

    def view(self, a: Any) -> Any:
        return a.reshape(self.outer, self.channels, self.inner)

    def contiguous(self, a: Any, slot: str) -> Any:
        """``a`` as a C-contiguous (outer, channels, inner) array: itself when it is one, else a
        copy in a buffer of this node's own (``slot`` names it), kept for later steps.

        The blocked passes need contiguous channel rows; a strided view walks a cache line per
        value (ResNet-50's first batch norm took 90 ms on its convolution's channels-last view
        against 18 ms on a contiguous copy). A channels-last input (a convolution's NHWC result
        seen as NCHW) is transposed tile by tile, each tile small enough for the cache."""
        if self.channels_last and not a.flags.c_contiguous:
            return self._gather_in_memory_order(a, slot)
        a3 = self.view(a)
        if a3.flags.c_contiguous:
            return a3
        out = self._gathered_buffer(a, slot)
        item = a3.itemsize
        if self.inner > 1 and a3.strides[1] == item and a3.strides[2] == self.channels * item:
            tile = max(1, BLOCK_ITEMS // self.channels)
            tiles = [(o, p, min(p + tile, self.inner)) for o in range(self.outer) for p in range(0, self.inner, tile)]

            def transpose(lo: int, hi: int) -> None:
                for o, p0, p1 in tiles[lo:hi]:
                    out[o, :, p0:p1] = a3[o, :, p0:p1]

            if self._split is None:
                transpose(0, len(tiles))
            else:
                self._split(transpose, len(tiles))
        else:
            out[...] = a3
        return out

    def _gathered_buffer(self, a: Any, slot: str) -> Any:
        if slot not in self._gathered:
            self._gathered[slot] = self.xp.empty((self.outer, self.channels, self.inner), dtype=a.dtype)
        self._sources[slot] = a
        return self._gathered[slot]

    def _gather_in_memory_order(self, a: Any, slot: str) -> Any:
        """A strided channels-last ``a`` (an NHWC convolution result lies as (H, W, N, C) in memory)
        copied into this node's buffer, chunk by chunk along a's outermost memory axis and over the
        host threads: read along memory, written in whole channel rows. (Reshaping it would copy
        too, into a new array on every call.)"""
        out = self._gathered_buffer(a, slot)
        copy_along_memory(self.xp, a, out.reshape(a.shape), BLOCK_ITEMS * a.itemsize, self._split)
        return out

    def temporary(self, name: str, block: _Block, dtype: Any) -> Any:
        """A scratch array of the block's shape, the calling thread's own (blocks run on several threads)."""
        buffer = self._temporaries.get(name, lambda: self.xp.empty((self.max_rows, self.block_width), dtype=dtype))
        return buffer[:block.lead]

    def copy_of(self, a: Any, slot: str) -> Any:
        """This node's contiguous copy of ``a`` if its last copy in ``slot`` was made from that very
        array (the gradient node reuses its forward node's copy of x), else None."""
        return self._gathered[slot] if self._sources.get(slot) is a else None

    def each_block(self, body: Any) -> None:
        """``body(block)`` for every block, over the host threads when the blob is large."""
        each_item(self.blocks, body, self._split)

    def sums(self, a3: Any) -> Any:
        """sum over outer and inner of a (outer, channels, inner) array, shape (channels,): a
        matrix-vector product over contiguous rows (BLAS, on all cores), then a sum over outer
        (channels last: ones times the (outer, channels) matrix)."""
        wide = a3 if a3.dtype == self.acc else a3.astype(self.acc)
        if self.channels_last:  # a row of ones times the (outer, channels) matrix: one pass
            return self.ones_outer @ wide.reshape(self.outer, self.channels)
        rows = wide.reshape(self.outer * self.channels, self.inner) @ self.ones_inner
        return rows.reshape(self.outer, self.channels).sum(axis=0)

    def row_dot(self, a: Any, b: Any, out: Any) -> None:
        """out[c] = the sum of a * b over the block's values of channel c."""
        if a.dtype != self.acc:
            a, b = a.astype(self.acc), b.astype(self.acc)
        spec = "rc,rc->c" if self.channels_last else "ci,ci->c"
        out[...] = self.xp.einsum(spec, a, b)  # (CuPy's einsum takes no out=)

    def row_sum(self, a: Any, out: Any) -> None:
        if self.channels_last:  # ones times the block's (rows, channels): BLAS, ~5x numpy's column sum
            out[...] = self.ones_outer[:a.shape[0]] @ (a if a.dtype == self.acc else a.astype(self.acc))
        else:
            out[...] = self.xp.sum(a, axis=1, dtype=self.acc)


def _settings(ctx: KernelContext) -> tuple[Any, np.dtype, _Blocks, float, bool, bool, bool]:
    """What both kernels read from their node: xp, dtype, the blocks, epsilon and the three flags."""
    x_spec = ctx.inputs[0]
    blocks = _Blocks(ctx, x_spec.shape, normalize_axis(ctx.attrs["axis"], len(x_spec.shape)), x_spec.dtype)
    return (ctx.xp, x_spec.dtype, blocks, float(ctx.attrs["epsilon"]), bool(ctx.attrs.get("with_scale")),
            bool(ctx.attrs.get("with_offset")), ctx.attrs.get("activation") == "relu")


def _kernel(ctx: KernelContext) -> Any:
    xp, dtype, blocks, eps, with_scale, with_offset, relu = _settings(ctx)
    y, mean, variance = ctx.out(0), ctx.out(1), ctx.out(2)
    inv_n = 1.0 / blocks.count
    squares = blocks.partial
    if ctx.training:  # the gradient node reuses a contiguous copy this node made of a strided x
        ctx.shared[("batch_norm_train", ctx.node_name)] = blocks

    def run(x: Any, *params: Any) -> tuple[Any, Any, Any]:
        x3, y3 = blocks.contiguous(x, "x"), blocks.view(y)
        mean[...] = blocks.sums(x3) * inv_n
        centre = blocks.column(mean)

        def centre_and_square(b: _Block) -> None:
            block = y3[b.at]                                      # y holds x - mean for now
            xp.subtract(x3[b.at], centre[b.chan], out=block)
            blocks.row_dot(block, block, squares[b.part])

        blocks.each_block(centre_and_square)
        variance[...] = squares.sum(axis=0) * inv_n
        scale = 1.0 / xp.sqrt(variance.astype(blocks.acc) + eps)
        if with_scale:
            scale = scale * params[0]
        gain = blocks.column(scale.astype(dtype))
        shift = blocks.column(params[-1]) if with_offset else None

        def affine(b: _Block) -> None:
            block = y3[b.at]
            xp.multiply(block, gain[b.chan], out=block)
            if shift is not None:
                xp.add(block, shift[b.chan], out=block)
            if relu:
                xp.maximum(block, 0, out=block)

        blocks.each_block(affine)
        return y, mean, variance

    return run


def _grad_kernel(ctx: KernelContext) -> Any:
    xp, dtype, blocks, eps, with_scale, with_offset, relu = _settings(ctx)
    outs = [ctx.out(i) for i in range(len(ctx.outputs))]
    inv_n = 1.0 / blocks.count
    dots, sums = blocks.partial, blocks.partial2
    forward = ctx.shared.get(("batch_norm_train", ctx.attrs.get("forward")))
    if not isinstance(forward, _Blocks) or (forward.outer, forward.channels, forward.inner) != (
            blocks.outer, blocks.channels, blocks.inner) or forward.dtype != dtype:
        forward = None

    def run(x: Any, mean: Any, variance: Any, *rest: Any) -> Any:
        dy, dx = rest[-1], outs[0]
        x3 = forward.copy_of(x, "x") if forward is not None else None
        if x3 is None:
            x3 = blocks.contiguous(x, "x")
        dy3, dx3 = blocks.contiguous(dy, "dy"), blocks.view(dx)
        y3 = blocks.contiguous(rest[-2], "y") if relu else None
        centre = blocks.column(mean)

        def centre_and_reduce(b: _Block) -> None:
            block, dy_block = dx3[b.at], dy3[b.at]                # dx holds x - mean for now
            xp.subtract(x3[b.at], centre[b.chan], out=block)
            blocks.row_dot(dy_block, block, dots[b.part])
            blocks.row_sum(dy_block, sums[b.part])

        def mask_centre_and_reduce(b: _Block) -> None:
            # the gradient reaching the normalization: dy where the ReLU's output is positive
            block, centred = dx3[b.at], blocks.temporary("centred", b, dtype)
            positive = blocks.temporary("positive", b, bool)
            xp.greater(y3[b.at], 0, out=positive)
            xp.multiply(dy3[b.at], positive, out=block)          # dx holds the masked dy for now
            xp.subtract(x3[b.at], centre[b.chan], out=centred)
            blocks.row_dot(block, centred, dots[b.part])
            blocks.row_sum(block, sums[b.part])

        blocks.each_block(mask_centre_and_reduce if relu else centre_and_reduce)
        sum_dy_centred, sum_dy = dots.sum(axis=0), sums.sum(axis=0)
        inv_sigma = 1.0 / xp.sqrt(variance.astype(blocks.acc) + eps)
        if with_scale:
            outs[1][...] = sum_dy_centred * inv_sigma           # dgamma = sum(dy * xhat)
        if with_offset:
            outs[-1][...] = sum_dy                              # dbeta = sum(dy)
        gain = blocks.column((inv_sigma * rest[0] if with_scale else inv_sigma).astype(dtype))
        # dx = gain * (dy - mean(dy) - (x - mean) * inv_sigma^2 * mean(dy * (x - mean)))
        along = blocks.column((-inv_sigma * inv_sigma * sum_dy_centred * inv_n).astype(dtype))
        mean_dy = blocks.column((sum_dy * inv_n).astype(dtype))

        def combine(b: _Block) -> None:
            block = dx3[b.at]
            xp.multiply(block, along[b.chan], out=block)
            xp.add(block, dy3[b.at], out=block)
            xp.subtract(block, mean_dy[b.chan], out=block)
            xp.multiply(block, gain[b.chan], out=block)

        def combine_masked(b: _Block) -> None:
            block, centred = dx3[b.at], blocks.temporary("centred", b, dtype)
            xp.subtract(x3[b.at], centre[b.chan], out=centred)
            xp.multiply(centred, along[b.chan], out=centred)
            xp.add(block, centred, out=block)
            xp.subtract(block, mean_dy[b.chan], out=block)
            xp.multiply(block, gain[b.chan], out=block)

        blocks.each_block(combine_masked if relu else combine)
        return tuple(outs) if len(outs) > 1 else dx

    return run


KERNEL_BUILDERS: dict[str, KernelBuilder] = {BATCH_NORM_TRAIN.name: _kernel, BATCH_NORM_TRAIN_GRAD.name: _grad_kernel}
