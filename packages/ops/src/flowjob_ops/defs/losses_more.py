"""sparse_cross_entropy: the cross entropy of probabilities (not logits) at integer labels, as legacy v0.4.

loss = -log(max(prediction[label], 1e-20)): legacy clamps the probability (its ``SafeLog``), so a zero
probability gives a large finite loss rather than inf; the gradient -dy / max(prediction[label], 1e-20)
reaches only the labelled class. A label outside [0, C) adds zero loss and zero gradient, with one
warning per node (``defs/class_labels.py``), as legacy's split-class kernels.
"""
from __future__ import annotations

from typing import Any, Sequence

from flowjob_core import BlobSpec, GradContext, KernelContext, OpDef, ShapeError

from flowjob_ops.defs.class_labels import ClassLabels, of_forward
from flowjob_ops.defs.common import require_floating

LOG_THRESHOLD = 1e-20  # legacy's lower bound on a probability before its log


def _rows(shape: Sequence[int]) -> int:
    count = 1
    for d in shape[:-1]:
        count *= d
    return count


def _check_labels(op: str, labels: BlobSpec, prediction: BlobSpec) -> None:
    if labels.dtype.kind not in "iu":
        raise ShapeError(f"{op}: labels must be integers (int32 or int64), got {labels.dtype}")
    if len(prediction.shape) < 1 or labels.shape != prediction.shape[:-1]:
        raise ShapeError(
            f"{op}: labels must have the prediction's shape without the class axis: prediction {prediction.shape} "
            f"needs labels {prediction.shape[:-1]}, got {labels.shape}")


def _infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    labels, prediction = inputs
    require_floating([prediction], "sparse_cross_entropy (prediction)")
    _check_labels("sparse_cross_entropy", labels, prediction)
    return [BlobSpec(labels.shape, prediction.dtype)]


def _kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    spec = ctx.inputs[1]
    classes, m = spec.shape[-1], _rows(spec.shape)
    rows = xp.arange(m)
    out1 = out.reshape(m)
    floor = spec.dtype.type(LOG_THRESHOLD)
    labels = ClassLabels(ctx, m, classes, warn=True).publish(ctx)

    def run(labels_in: Any, prediction: Any) -> Any:
        lab, valid = labels.split(labels_in)
        out1[...] = prediction.reshape(m, classes)[rows, lab]
        xp.maximum(out1, floor, out=out1)
        xp.log(out1, out=out1)
        xp.negative(out1, out=out1)
        if valid is not None:  # a label outside [0, C) adds no loss
            xp.multiply(out1, valid, out=out1)
        return out

    return run


def _grad(ctx: GradContext) -> list[Any]:
    labels, prediction = ctx.inputs
    return [None, ctx.apply("sparse_cross_entropy_grad", [labels, prediction, ctx.dy],
                            {"forward": ctx.node.name})]  # reuses the forward's label split


def _grad_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    labels, prediction, dy = inputs
    _check_labels("sparse_cross_entropy_grad", labels, prediction)
    if dy.shape != labels.shape or dy.dtype != prediction.dtype:
        raise ShapeError(
            f"sparse_cross_entropy_grad: dy {dy.shape}:{dy.dtype} must be {labels.shape}:{prediction.dtype}")
    return [prediction]


def _grad_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    spec = ctx.outputs[0]
    classes, m = spec.shape[-1], _rows(spec.shape)
    rows = xp.arange(m)
    out2 = out.reshape(m, classes)
    picked = ctx.scratch((m,), spec.dtype)
    floor = spec.dtype.type(LOG_THRESHOLD)
    forward = of_forward(ctx)
    own = ClassLabels(ctx, m, classes, warn=False) if forward is None else None  # the forward node warns

    def run(labels_in: Any, prediction: Any, dy: Any) -> Any:  # -dy / p at the label, 0 elsewhere
        lab, valid = own.split(labels_in) if own is not None else forward.last
        picked[...] = prediction.reshape(m, classes)[rows, lab]
        xp.maximum(picked, floor, out=picked)
        xp.divide(dy.reshape(m), picked, out=picked)
        xp.negative(picked, out=picked)
        if valid is not None:  # nothing for a label outside [0, C)
            xp.multiply(picked, valid, out=picked)
        out2.fill(0)
        out2[rows, lab] = picked
        return out

    return run


SPARSE_CROSS_ENTROPY = OpDef(
    "sparse_cross_entropy", _infer, kernel=_kernel, grad=_grad, name_prefix="SparseCrossEntropy",
    doc="inputs (labels, prediction): per-sample -log(prediction[label]) of probabilities")
SPARSE_CROSS_ENTROPY_GRAD = OpDef(
    "sparse_cross_entropy_grad", _grad_infer, kernel=_grad_kernel, not_differentiable=True,
    name_prefix="SparseCrossEntropyGrad", doc="-dy / prediction[label] at the label, 0 elsewhere")

OPS = (SPARSE_CROSS_ENTROPY, SPARSE_CROSS_ENTROPY_GRAD)
