"""The gpu backend's 2-D max pooling, forward and backward: flowjob-kernels' ``cuda/pooling.cu``, one launch each
where the reference kernels take a pass (or four) per window tap.

Semantics are the op records' (``flowjob_ops.records.pool``, reference kernels ``flowjob_ops.kernels.pool``):
NCHW or NHWC (``data_format``, "channels_first" / "channels_last" too), ksize, strides and every padding the
records accept ("SAME" = "SAME_LOWER", "SAME_UPPER", "VALID", explicit pads: the records' own geometry resolves
them, and the kernels take the window's sizes, strides and leading pads); padding reads -inf; y is numpy's
maximum folded over the taps in row-major order; each window's dy goes to its first tap equal to y (none where y
is NaN; a padding tap when the real values are all -inf, and then the gradient is dropped), summed in tap order
where windows overlap, dy * 0 (NaN for an inf dy) for the other taps, as the reference computes it.
``max_pool2d_relu_grad`` (the fusion pass's) is the same backward with dy masked by y > 0.

Forward (``max_pool2d``): one thread per output element (grid-stride, ``BLOCK`` threads, at most ``MAX_BLOCKS``
blocks); in a train job it also writes the window's first maximal tap (``th * kw + tw``, -1 for none) into an
int32 buffer of y's shape, kept in ``ctx.shared[(SHARED, node_name)]`` with where x and y lay when it ran.
Backward (``max_pool2d_grad``, ``max_pool2d_relu_grad``): one thread per input element gathering the dy of the
windows that cover it, so no atomics and the reference's order. The gradient ops carry no attribute naming their
forward, so the gradient node finds the forward's taps by its inputs: the last forward node of the plan to write
the y it is given (``ctx.shared[WRITERS]``, keyed by y's address, shape, strides and dtype), with the same
geometry and dtype, having run on the x it is given (a ``forward`` attribute, if the records ever add one, names
the node directly). Otherwise (an eval plan, a hand-made gradient op) the kernel finds each window's first
maximum from x and y itself, in the same single launch: an element equal to its window's y scans only the taps
before it.

Inputs that are not C-contiguous are copied into a buffer the node allocates on the first such call.
Dtypes the source has no entry point for (float16) run the record's own kernel.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from flowjob_core import KernelContext
from flowjob_ops.records import pool as pool_records  # the records' own window resolution

from flowjob_gpu.record_kernels import BLOCK, ContiguousInputs, launch_grid, own_kernel
from flowjob_gpu.sources import compiled_module

FAMILY = "pooling"
FORWARD = {"float32": "max_pool2d_forward_f32", "float64": "max_pool2d_forward_f64"}
BACKWARD = {"float32": "max_pool2d_backward_f32", "float64": "max_pool2d_backward_f64"}
SHARED = "max_pool2d-argmax"  # ctx.shared[(SHARED, forward node)]: its _Saved taps
WRITERS = "max_pool2d-argmax-writers"  # ctx.shared[WRITERS][where y lies]: the forward node that last wrote it


def where(a: Any) -> tuple[int, tuple[int, ...], tuple[int, ...], str]:
    """An array's memory as a key: address, shape, strides, dtype (CuPy's ``data.ptr``, numpy's ``ctypes.data``)."""
    data = a.data
    address = data.ptr if hasattr(data, "ptr") else a.ctypes.data
    return address, tuple(a.shape), tuple(a.strides), a.dtype.str


@dataclass
class _Saved:
    """A forward node's first-maximum taps, the geometry they are for and where its last run's x and y lay."""

    argmax: Any
    signature: tuple
    x: Any = None
    y: Any = None


class _Window:
    """The entry point, the kernels' geometry arguments and the launch shape of one node."""

    def __init__(self, ctx: KernelContext, symbol: str, elements: int) -> None:
        cp = self.cp = ctx.xp
        self.fn = compiled_module(cp, FAMILY, cp.cuda.Device().id).get_function(symbol)
        x = ctx.inputs[0]
        geom = pool_records.geometry(ctx.op, x.shape, ctx.attrs, 2)
        win, last = geom.window, geom.channels_last
        batch, channels = x.shape[0], x.shape[-1] if last else x.shape[1]
        height, width = win.in_size
        dims = (batch, channels, height, width, *win.out_size)
        window = (*win.ksize, *win.strides, win.pads[0][0], win.pads[1][0], int(last))
        self.dims = (*(cp.int64(v) for v in dims), *(cp.int32(v) for v in window))
        self.signature = (tuple(x.shape), x.dtype.str, dims, window)
        self.overwrite = cp.int32(win.non_overlapping)
        self.grid, self.block = launch_grid(elements), (BLOCK,)
        self.dense = ContiguousInputs(ctx)

    @classmethod
    def of(cls, ctx: KernelContext, symbols: dict[str, str], elements: int) -> "_Window | None":
        symbol = symbols.get(ctx.inputs[0].dtype.name)
        return None if symbol is None else cls(ctx, symbol, elements)


def max_pool2d_kernel(ctx: KernelContext) -> Any:
    """Input x; output y (and, in a train job, the taps its gradient node reads)."""
    y = ctx.out(0)
    kernel = _Window.of(ctx, FORWARD, y.size)
    if kernel is None:
        return own_kernel(ctx, str(ctx.inputs[0].dtype))
    cp, fn, dense = kernel.cp, kernel.fn, kernel.dense
    save = ctx.training
    argmax = ctx.workspace(ctx.outputs[0].shape, np.int32) if save else ctx.workspace((1,), np.int32)
    saved = _Saved(argmax, kernel.signature, y=where(y))
    if save:
        ctx.shared[(SHARED, ctx.node_name)] = saved
    writers = ctx.shared.setdefault(WRITERS, {})
    flag = cp.int32(save)

    def run(x: Any) -> Any:
        at = where(x)
        fn(kernel.grid, kernel.block, (dense(0, x), y, argmax, flag, *kernel.dims))
        if save:
            saved.x = at
            writers[saved.y] = ctx.node_name
        return y

    return run


def max_pool2d_grad_kernel(ctx: KernelContext) -> Any:
    """Inputs (x, y, dy); output dx (``max_pool2d_relu_grad`` too: dy masked by y > 0)."""
    dx = ctx.out(0)
    kernel = _Window.of(ctx, BACKWARD, dx.size)
    if kernel is None:
        return own_kernel(ctx, str(ctx.inputs[0].dtype))
    cp, fn, dense = kernel.cp, kernel.fn, kernel.dense
    relu = cp.int32(ctx.op == pool_records.MAX_POOL2D_RELU_GRAD.name)
    unused = ctx.workspace((1,), np.int32)  # the taps argument when the kernel finds them itself
    named = ctx.attrs.get("forward")
    writers = ctx.shared.setdefault(WRITERS, {})
    yes, no = cp.int32(1), cp.int32(0)

    def forward_taps(x: Any, y: Any) -> Any:
        """The forward's taps if it last wrote this y from this x with this geometry; None otherwise."""
        at_y = where(y)
        found = ctx.shared.get((SHARED, named if named is not None else writers.get(at_y)))
        if not isinstance(found, _Saved) or found.signature != kernel.signature or found.y != at_y:
            return None
        return found.argmax if found.x == where(x) else None

    def run(x: Any, y: Any, dy: Any) -> Any:
        taps = forward_taps(x, y)
        fn(kernel.grid, kernel.block, (dense(0, x), dense(1, y), dense(2, dy), unused if taps is None else taps, dx,
                                       no if taps is None else yes, relu, kernel.overwrite, *kernel.dims))
        return dx

    return run


OVERRIDES: dict[str, tuple[str, dict[str, str]]] = {
    pool_records.MAX_POOL2D.name: (FAMILY, FORWARD),
    pool_records.MAX_POOL2D_GRAD.name: (FAMILY, BACKWARD),
    pool_records.MAX_POOL2D_RELU_GRAD.name: (FAMILY, BACKWARD),
}
"""Entries for ``flowjob_gpu.overrides.OVERRIDES`` (op -> (family, symbol per dtype))."""

KERNEL_BUILDERS: dict[str, Callable[[KernelContext], Any]] = {
    pool_records.MAX_POOL2D.name: max_pool2d_kernel,
    pool_records.MAX_POOL2D_GRAD.name: max_pool2d_grad_kernel,
    pool_records.MAX_POOL2D_RELU_GRAD.name: max_pool2d_grad_kernel,
}
"""Entries for ``flowjob_gpu.overrides.KERNEL_BUILDERS``, keyed by the op records' names."""
