"""Kernel overrides for the gpu backend: one fused launch where the xp kernel needs several."""
from __future__ import annotations

from typing import Any

from flowjob_gpu import batch_norm_kernels, cross_entropy_kernels, pool_kernels, update_kernels
from flowjob_gpu.chain_kernels import elementwise_chain_kernel
from flowjob_gpu.sources import compiled_module

# (op, CUDA family, symbol per dtype): a CPU-only test checks each symbol is an entry point of flowjob-kernels'
# cuda/<family>.cu, whose own tests check, where nvcc is present, the entry points of the compiled PTX
OVERRIDES: dict[str, tuple[str, dict[str, str]]] = {
    "relu_grad": ("elementwise", {"float32": "relu_backward_f32", "float64": "relu_backward_f64"}),
    **cross_entropy_kernels.OVERRIDES,
    **batch_norm_kernels.OVERRIDES,
    **pool_kernels.OVERRIDES,
    **update_kernels.OVERRIDES,
}


def relu_grad_kernel(ctx: Any) -> Any:
    cp, out = ctx.xp, ctx.out(0)
    family, symbols = OVERRIDES["relu_grad"]
    symbol = symbols.get(ctx.outputs[0].dtype.name)
    if symbol is None:  # other dtypes: the generic kernel's formula
        return lambda y, dy: cp.multiply(dy, y > 0, out=out)
    fn = compiled_module(cp, family, cp.cuda.Device().id).get_function(symbol)
    n = out.size
    block = 256
    grid = max(1, min((n + block - 1) // block, 4096))
    size = cp.int64(n)

    def run(y: Any, dy: Any) -> Any:
        # the CUDA kernel walks flat memory: a transposed or sliced input (a fused conv's relu, say) is
        # made contiguous first, else its elements would be read out of order
        fn((grid,), (block,), (cp.ascontiguousarray(y), cp.ascontiguousarray(dy), out, size))
        return out

    return run


KERNEL_BUILDERS = {
    "relu_grad": relu_grad_kernel,
    "elementwise_chain": elementwise_chain_kernel,
    **cross_entropy_kernels.KERNEL_BUILDERS,
    **batch_norm_kernels.KERNEL_BUILDERS,
    **pool_kernels.KERNEL_BUILDERS,
    **update_kernels.KERNEL_BUILDERS,
}
