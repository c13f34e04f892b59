"""The gpu backend's sparse softmax cross entropy, forward and backward: flowjob-kernels' ``cuda/cross_entropy.cu``,
one launch each where the xp kernels take eight (max, subtract, pick, exp, sum, divide, log, subtract).

Semantics are the op records' (``flowjob_ops.records.cross_entropy``): a label outside [0, C) adds zero loss and
zero gradient, and the forward node warns once with the op and the count. The kernel counts such labels on the
device, each step's added to the node's ``DeviceCount`` (``flowjob_ops.kernels.device_counts``), which a recorded
step reads without waiting for the device (``flowjob_gpu.count_reads``): nothing is read back per step, and the
node is recorded with the rest. Dtypes the source has no entry point for (float16) run the record's own kernel
(which counts on the device too).
"""
from __future__ import annotations

import math
import warnings
from typing import Any, Callable

import numpy as np

from flowjob_core import BlobSpec, KernelContext
from flowjob_ops.kernels.class_labels import counted_message
from flowjob_ops.kernels.device_counts import DeviceCount
from flowjob_ops.records.cross_entropy import SPARSE_SOFTMAX_CROSS_ENTROPY, SPARSE_SOFTMAX_CROSS_ENTROPY_GRAD

from flowjob_gpu.record_kernels import BLOCK, launch_grid, own_kernel
from flowjob_gpu.sources import compiled_module

FAMILY = "cross_entropy"
FORWARD = {"float32": "sparse_softmax_xent_f32", "float64": "sparse_softmax_xent_f64"}
BACKWARD = {"float32": "sparse_softmax_xent_backward_f32", "float64": "sparse_softmax_xent_backward_f64"}
MAX_ROW_BLOCKS = 65535  # the forward strides over the rows beyond this (its reductions: BLOCK a multiple of 32)


class _Labelled:
    """What both kernels share: the entry point, the (rows, classes) of the class axis last, and an int64 copy of
    the labels (the kernels read 64-bit labels whatever integer type the job feeds)."""

    def __init__(self, ctx: KernelContext, spec: BlobSpec, symbol: str) -> None:
        cp = self.cp = ctx.xp
        self.fn = compiled_module(cp, FAMILY, cp.cuda.Device().id).get_function(symbol)
        self.classes, self.rows = spec.shape[-1], math.prod(spec.shape[:-1])
        self.size = (cp.int64(self.rows), cp.int64(self.classes))
        self.labels64 = ctx.workspace((self.rows,), np.int64)

    @classmethod
    def of(cls, ctx: KernelContext, spec: BlobSpec, symbols: dict[str, str]) -> "_Labelled | None":
        """For the entry point of ``spec``'s dtype; None where the source has none (the record's kernel runs)."""
        symbol = symbols.get(spec.dtype.name)
        return None if symbol is None else cls(ctx, spec, symbol)

    def labels(self, labels: Any) -> Any:
        # an unsigned label too large for int64 turns negative here: out of range either way
        self.cp.copyto(self.labels64, labels.reshape(self.rows), casting="unsafe")
        return self.labels64


def sparse_softmax_cross_entropy_kernel(ctx: KernelContext) -> Any:
    """Inputs (labels, logits); outputs (per-row loss, softmax)."""
    kernel = _Labelled.of(ctx, ctx.inputs[1], FORWARD)
    if kernel is None:
        return own_kernel(ctx, str(ctx.inputs[1].dtype))
    cp, fn, rows, classes = kernel.cp, kernel.fn, kernel.rows, kernel.classes
    loss, prob = ctx.out(0), ctx.out(1)
    bad = ctx.workspace((1,), np.int32)
    grid, block = launch_grid(rows, 1, MAX_ROW_BLOCKS), (BLOCK,)
    what = f"op {ctx.node_name!r} ({ctx.op})"

    def report(count: int) -> None:
        warnings.warn(counted_message(what, count, rows, classes), RuntimeWarning, stacklevel=2)

    counted = DeviceCount(ctx, report)

    def run(labels: Any, logits: Any) -> tuple[Any, Any]:
        wide = kernel.labels(labels)
        bad.fill(0)
        fn(grid, block, (cp.ascontiguousarray(logits), wide, prob, loss, bad, *kernel.size))
        counted.add_counts(bad)
        counted.check()  # reads back only where no recorded step reads the count
        return loss, prob

    return run


def sparse_softmax_cross_entropy_grad_kernel(ctx: KernelContext) -> Any:
    """Inputs (labels, softmax, dy); output (prob - onehot(labels)) * dy, zero rows for labels out of range."""
    kernel = _Labelled.of(ctx, ctx.outputs[0], BACKWARD)
    if kernel is None:
        return own_kernel(ctx, str(ctx.inputs[1].dtype))
    cp, fn, out = kernel.cp, kernel.fn, ctx.out(0)
    grid, block = launch_grid(kernel.rows * kernel.classes), (BLOCK,)

    def run(labels: Any, prob: Any, dy: Any) -> Any:
        fn(grid, block, (cp.ascontiguousarray(prob), kernel.labels(labels), cp.ascontiguousarray(dy), out,
                         *kernel.size))
        return out

    return run


OVERRIDES: dict[str, tuple[str, dict[str, str]]] = {
    SPARSE_SOFTMAX_CROSS_ENTROPY.name: (FAMILY, FORWARD),
    SPARSE_SOFTMAX_CROSS_ENTROPY_GRAD.name: (FAMILY, BACKWARD),
}
"""Entries for ``flowjob_gpu.overrides.OVERRIDES`` (op -> (family, symbol per dtype))."""

KERNEL_BUILDERS: dict[str, Callable[[KernelContext], Any]] = {
    SPARSE_SOFTMAX_CROSS_ENTROPY.name: sparse_softmax_cross_entropy_kernel,
    SPARSE_SOFTMAX_CROSS_ENTROPY_GRAD.name: sparse_softmax_cross_entropy_grad_kernel,
}
"""Entries for ``flowjob_gpu.overrides.KERNEL_BUILDERS``, keyed by the op records' names."""
