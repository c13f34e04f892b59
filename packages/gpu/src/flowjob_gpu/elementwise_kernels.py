"""The gpu backend's ``relu_grad``: flowjob-kernels' ``cuda/elementwise.cu``, one grid-stride launch.

Semantics are the op record's (``flowjob_ops.records.activations``): ``dx = dy * (y > 0)``, numpy's product with
the mask, so where ``y <= 0`` (or is NaN) ``dx`` is ``dy * 0``: NaN for an inf or NaN ``dy``, -0 for a negative
one. The kernel selects ``y > 0 ? dy : dy * 0``: the same values, and a ``dy`` that passes is moved, not
multiplied, so the flush of single-precision subnormals CuPy compiles every kernel with (``-ftz=true``) leaves it
as numpy does; it still applies to the comparison, so a positive subnormal ``y`` counts as 0 on the device (the
device tests model that flush).

The kernel walks flat memory: a transposed or sliced input (a fused conv's relu, say) is made contiguous first.
Dtypes the source has no entry point for (float16) run the record's own kernel.
"""
from __future__ import annotations

from typing import Any, Callable

from flowjob_core import KernelContext

from flowjob_gpu.record_kernels import BLOCK, launch_grid, own_kernel
from flowjob_gpu.sources import compiled_module

FAMILY = "elementwise"
RELU_BACKWARD = {"float32": "relu_backward_f32", "float64": "relu_backward_f64"}


def relu_grad_kernel(ctx: KernelContext) -> Any:
    """Inputs (y, dy); output dx."""
    symbol = RELU_BACKWARD.get(ctx.outputs[0].dtype.name)
    if symbol is None:
        return own_kernel(ctx, str(ctx.outputs[0].dtype))
    cp, out = ctx.xp, ctx.out(0)
    fn = compiled_module(cp, FAMILY, cp.cuda.Device().id).get_function(symbol)
    grid, block = launch_grid(out.size), (BLOCK,)
    size = cp.int64(out.size)

    def run(y: Any, dy: Any) -> Any:
        fn(grid, block, (cp.ascontiguousarray(y), cp.ascontiguousarray(dy), out, size))
        return out

    return run


OVERRIDES: dict[str, tuple[str, dict[str, str]]] = {"relu_grad": (FAMILY, RELU_BACKWARD)}
"""Entries for ``flowjob_gpu.overrides.OVERRIDES`` (op -> (family, symbol per dtype))."""

KERNEL_BUILDERS: dict[str, Callable[[KernelContext], Any]] = {"relu_grad": relu_grad_kernel}
"""Entries for ``flowjob_gpu.overrides.KERNEL_BUILDERS``, keyed by the op records' names."""
