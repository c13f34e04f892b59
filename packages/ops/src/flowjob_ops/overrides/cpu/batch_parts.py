"""A convolution's data gradient in parts over the batch, the parts shared out over the host threads.

Each image's dx comes from its own rows of dy alone, so the batch splits into contiguous parts with
nothing to combine: every part is the reference kernel (``kernels.conv2d_grad_data.Conv2dBackwardData``) built for
its rows, writing its slice of dx, and the parts run over the backend's host threads (``Backend.parallel``;
inside a lane of the plan they run one after another on its thread). The im2col/col2im copies and the
zeroing, which run on one core in the whole-batch kernel, are split with the GEMMs.

How many parts depends on the shapes only (``MAX_PARTS``, never the thread count): BLAS may round a
GEMM cut into row blocks differently from the whole one in the last bit, so the parts are the same
whatever ``FLOWJOB_HOST_THREADS`` says, and a step gives the same bits on one thread as on many. Against
the whole-batch kernel (the reference record's) the values agree to float32 rounding (the tests use
rtol 1e-5). Below ``SPLIT_FLOPS`` the hand-off costs more than it saves, and the whole batch is one part.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from flowjob_core import KernelContext

from flowjob_ops.kernels.conv2d_geometry import ConvGeometry
from flowjob_ops.kernels.conv2d_grad_data import Conv2dBackwardData
from flowjob_core.backends.host_blocks import host_parallel
from flowjob_ops.records import conv as conv_records

SPLIT_FLOPS = 4e6
"""A data gradient this small (multiply-adds, twice) stays one part."""
MAX_PARTS = 8
"""Parts of a large batch: enough for eight threads, each part's GEMMs still large."""


def parts(batch: int, count: int = MAX_PARTS) -> list[tuple[int, int]]:
    """Contiguous [start, stop) row ranges of ``batch``, at most ``count`` of them, sizes within one."""
    count = max(1, min(batch, count))
    bounds = [batch * i // count for i in range(count + 1)]
    return [(bounds[i], bounds[i + 1]) for i in range(count)]


class BatchPartsDataGradient:
    """dx = conv2d data gradient(dy, w), computed per part of the batch over ``split`` into ``out``."""

    def __init__(self, xp: Any, geom: ConvGeometry, dtype: Any, ranges: Sequence[tuple[int, int]],
                 split: Callable[[Callable[[int, int], None], int], None], out: Any, scratch: Any = None) -> None:
        self._out = out
        self._split = split
        self._parts = [(start, stop, Conv2dBackwardData(xp, geom.with_batch(stop - start), dtype, out=out[start:stop],
                                                        scratch=scratch))
                       for start, stop in ranges]

    def __call__(self, dy: Any, w: Any) -> Any:
        def run(lo: int, hi: int) -> None:
            for start, stop, kernel in self._parts[lo:hi]:
                kernel(dy[start:stop], w)

        self._split(run, len(self._parts))
        return self._out


def data_gradient(ctx: KernelContext) -> Any | None:
    """The batch-split data gradient for this node, or None where one part is all it should be."""
    dy, w = ctx.inputs
    x_shape = tuple(ctx.attrs["x_shape"])
    split = host_parallel(ctx)
    flops = conv_records.conv_grad_data_flops(ctx.inputs, ctx.outputs, ctx.attrs)
    if split is None or x_shape[0] < 2 or flops < SPLIT_FLOPS:
        return None
    return BatchPartsDataGradient(ctx.xp, conv_records.geometry(x_shape, w.shape, ctx.attrs), dy.dtype,
                                  parts(x_shape[0]), split, ctx.out(0), ctx.scratch)
