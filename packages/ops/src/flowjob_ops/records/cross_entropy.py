"""Cross-entropy losses: with logits, sparse (integer labels), dense (probability labels) and sigmoid; of
probabilities at integer labels (``sparse_cross_entropy``, legacy v0.4).

Sparse labels outside [0, C) add zero loss and zero gradient, with one warning per node
(``kernels/class_labels.py``). Legacy's own gradient kept ``prob * dy`` on such rows; zero is the
derivative of the zero loss, and the gradient check holds.

The softmax losses are fused: one op computes the per-sample loss and keeps the softmax
(its second output) for the backward pass, whose gradient is then ``prob - onehot``.

sparse_cross_entropy: loss = -log(max(prediction[label], 1e-20)): legacy clamps the probability (its
``SafeLog``), so a zero probability gives a large finite loss rather than inf; the gradient
-dy / max(prediction[label], 1e-20) reaches only the labelled class.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from flowjob_core import BlobSpec, Compute, GradContext, KernelContext, OpDef, ShapeError

from flowjob_ops.kernels.class_labels import ClassLabels, of_forward
from flowjob_ops.records.common import require_floating, same_dtype
from flowjob_ops import layout_rules


def _rows(shape: Sequence[int]) -> int:
    count = 1
    for d in shape[:-1]:
        count *= d
    return count


def _require_rows(op: str, what: str, spec: BlobSpec) -> None:
    """Legacy's cross-entropy ops checked rank >= 2 (rows, classes): a loss per row is never 0-d.
    ``flow.nn``'s functions pass rank-1 logits as one row."""
    if len(spec.shape) < 2:
        raise ShapeError(f"{op}: {what} must have rank >= 2 (rows, classes), got {spec.shape}; flow.nn's cross "
                         f"entropies take rank-1 {what} as one sample")


def _with_prob_grad(ctx: GradContext, dlogits: Any) -> Any:
    """Adds the gradient that reaches the kept softmax output (out_1), if any."""
    dprob = ctx.out_grads[1]
    if dprob is None:
        return dlogits
    extra = ctx.apply("softmax_grad", [ctx.outputs[1], dprob], {"axis": -1})
    return extra if dlogits is None else ctx.apply("add", [dlogits, extra])


# sparse softmax cross entropy -------------------------------------------------
def _sparse_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    labels, logits = inputs
    require_floating([logits], "sparse_softmax_cross_entropy_with_logits (logits)")
    if labels.dtype.kind not in "iu":
        raise ShapeError(f"labels must be integers (int32 or int64), got {labels.dtype}")
    _require_rows("sparse_softmax_cross_entropy", "logits", logits)
    if labels.shape != logits.shape[:-1]:
        raise ShapeError(
            f"labels must have the logits' shape without the class axis: logits {logits.shape} needs labels "
            f"{logits.shape[:-1]}, got {labels.shape}")
    return [BlobSpec(labels.shape, logits.dtype), logits]


def sparse_kernel_over_rows(ctx: KernelContext, each_rows: Callable[[Callable[[slice], None]], None]) -> Any:
    """The kernel of ``sparse_softmax_cross_entropy`` with its rows taken in the runs ``each_rows(block)``
    calls ``block`` on: each row's max and sum are its own, so any runs give the whole array's bits (the cpu
    override, ``flowjob_ops.overrides.cpu.cross_entropy_in_blocks``, runs cache-sized runs over the threads)."""
    xp = ctx.xp
    loss, prob = ctx.out(0), ctx.out(1)
    logits_spec = ctx.inputs[1]
    classes = logits_spec.shape[-1]
    m = _rows(logits_spec.shape)
    prob2, loss1 = prob.reshape(m, classes), loss.reshape(m)
    red = ctx.scratch((m, 1), logits_spec.dtype)
    labels = ClassLabels(ctx, m, classes, warn=True).publish(ctx)
    rows = xp.arange(m)

    def run(labels_in: Any, logits: Any) -> tuple[Any, Any]:
        lab, valid = labels.split(labels_in)
        logits2 = logits.reshape(m, classes)

        def block(b: slice) -> None:
            p, r = prob2[b], red[b]
            n = p.shape[0]
            xp.max(logits2[b], axis=1, keepdims=True, out=r)
            xp.subtract(logits2[b], r, out=p)
            # picked before exp: log(sum) - (x - max)[label] stays finite where prob underflows
            picked = p[rows[:n], lab[b]]
            xp.exp(p, out=p)
            xp.sum(p, axis=1, keepdims=True, out=r)
            xp.divide(p, r, out=p)
            xp.log(r.reshape(n), out=loss1[b])
            xp.subtract(loss1[b], picked, out=loss1[b])

        each_rows(block)
        if valid is not None:  # a label outside [0, C) adds no loss
            xp.multiply(loss1, valid, out=loss1)
        return loss, prob

    return run


def _all_rows(block: Callable[[slice], None]) -> None:
    block(slice(None))


def _sparse_kernel(ctx: KernelContext) -> Any:
    return sparse_kernel_over_rows(ctx, _all_rows)


def _sparse_grad(ctx: GradContext) -> list[Any]:
    labels = ctx.inputs[0]
    dlogits = None
    if ctx.out_grads[0] is not None:
        dlogits = ctx.apply("sparse_softmax_cross_entropy_grad", [labels, ctx.outputs[1], ctx.out_grads[0]],
                            {"forward": ctx.node.name})  # reuses the forward's label split
    return [None, _with_prob_grad(ctx, dlogits)]


def _sparse_grad_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    labels, prob, dy = inputs
    if dy.shape != labels.shape or prob.shape[:-1] != labels.shape:
        raise ShapeError(f"sparse_softmax_cross_entropy_grad: labels {labels.shape}, prob {prob.shape}, dy {dy.shape}")
    return [prob]


def _sparse_grad_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    spec = ctx.outputs[0]
    classes = spec.shape[-1]
    m = _rows(spec.shape)
    out2 = out.reshape(m, classes)
    rows = xp.arange(m)
    forward = of_forward(ctx)
    own = ClassLabels(ctx, m, classes, warn=False) if forward is None else None  # the forward node warns
    dy_valid = ctx.scratch((m,), spec.dtype)

    def run(labels_in: Any, prob: Any, dy: Any) -> Any:  # (prob - onehot(labels)) * dy, 0 for labels out of range
        lab, valid = own.split(labels_in) if own is not None else forward.last
        dy1 = dy.reshape(m)
        if valid is not None:
            dy1 = xp.multiply(dy1, valid, out=dy_valid)
        xp.multiply(prob.reshape(m, classes), dy1.reshape(m, 1), out=out2)
        out2[rows, lab] -= dy1
        return out

    return run


SPARSE_SOFTMAX_CROSS_ENTROPY = OpDef(
    "sparse_softmax_cross_entropy", _sparse_infer, kernel=_sparse_kernel, grad=_sparse_grad,
    doc="inputs (labels, logits): out_0 per-sample loss -log softmax(logits)[label] (0 for a label outside "
        "[0, C)), out_1 the softmax", compute=Compute(layouts=layout_rules.per_label, amp="gray"))
SPARSE_SOFTMAX_CROSS_ENTROPY_GRAD = OpDef(
    "sparse_softmax_cross_entropy_grad", _sparse_grad_infer, kernel=_sparse_grad_kernel, not_differentiable=True,
    doc="(prob - onehot(labels)) * dy; 0 rows for labels outside [0, C)",
    compute=Compute(layouts=layout_rules.per_label))


# softmax cross entropy with probability labels ---------------------------------
def _dense_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    labels, logits = inputs
    require_floating(inputs, "softmax_cross_entropy_with_logits")
    same_dtype(inputs, "softmax_cross_entropy_with_logits")
    _require_rows("softmax_cross_entropy", "logits", logits)
    if labels.shape != logits.shape:
        raise ShapeError(f"labels and logits must have one shape, got labels {labels.shape} and logits {logits.shape}")
    return [BlobSpec(logits.shape[:-1], logits.dtype), logits]


def _dense_kernel(ctx: KernelContext) -> Any:
    xp = ctx.xp
    loss, prob = ctx.out(0), ctx.out(1)
    spec = ctx.inputs[1]
    red = ctx.scratch(spec.shape[:-1] + (1,), spec.dtype)
    log_prob = ctx.scratch(spec.shape, spec.dtype)

    def run(labels: Any, logits: Any) -> tuple[Any, Any]:  # -sum(labels * log_softmax(logits))
        xp.max(logits, axis=-1, keepdims=True, out=red)
        xp.subtract(logits, red, out=log_prob)
        xp.exp(log_prob, out=prob)
        xp.sum(prob, axis=-1, keepdims=True, out=red)
        xp.divide(prob, red, out=prob)
        xp.log(red, out=red)
        xp.subtract(log_prob, red, out=log_prob)
        xp.multiply(log_prob, labels, out=log_prob)
        xp.sum(log_prob, axis=-1, out=loss)
        return xp.negative(loss, out=loss), prob

    return run


def _dense_grad(ctx: GradContext) -> list[Any]:
    labels, logits = ctx.inputs
    dy = ctx.out_grads[0]
    dlabels = dlogits = None
    if dy is not None:
        if ctx.needs[1]:
            dlogits = ctx.apply("softmax_cross_entropy_grad", [labels, ctx.outputs[1], dy])
        if ctx.needs[0]:  # d/dlabels = -log_softmax(logits) * dy
            column = ctx.apply("reshape", [dy], {"shape": dy.shape + (1,)})
            log_prob = ctx.apply("log_softmax", [logits], {"axis": -1})
            dlabels = ctx.apply("negative", [ctx.apply("multiply", [log_prob, column])])
    return [dlabels, _with_prob_grad(ctx, dlogits) if ctx.needs[1] else None]


def _dense_grad_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    labels, prob, dy = inputs
    if labels.shape != prob.shape or dy.shape != prob.shape[:-1]:
        raise ShapeError(f"softmax_cross_entropy_grad: labels {labels.shape}, prob {prob.shape}, dy {dy.shape}")
    return [prob]


def _dense_grad_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    column = ctx.outputs[0].shape[:-1] + (1,)

    def run(labels: Any, prob: Any, dy: Any) -> Any:
        # legacy's (and TensorFlow's) rule, (prob - labels) * dy: the gradient when each row of labels sums to
        # 1, as the op's labels are meant to; other labels get the same formula as there, not the exact
        # (prob * sum(labels) - labels) * dy
        xp.subtract(prob, labels, out=out)
        return xp.multiply(out, dy.reshape(column), out=out)

    return run


SOFTMAX_CROSS_ENTROPY = OpDef(
    "softmax_cross_entropy", _dense_infer, kernel=_dense_kernel, grad=_dense_grad,
    doc="inputs (labels, logits) of one shape: out_0 -sum(labels * log_softmax(logits)), out_1 the softmax",
    compute=Compute(layouts=layout_rules.dense_per_row, amp="black"))
SOFTMAX_CROSS_ENTROPY_GRAD = OpDef(
    "softmax_cross_entropy_grad", _dense_grad_infer, kernel=_dense_grad_kernel, not_differentiable=True,
    doc="(prob - labels) * dy, legacy's and TensorFlow's rule", compute=Compute(layouts=layout_rules.dense_per_row))


# sigmoid cross entropy --------------------------------------------------------
def _sigmoid_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    labels, logits = inputs
    require_floating([logits], "sigmoid_cross_entropy_with_logits (logits)")
    # legacy kernels take int8/int32 labels too (Wide&Deep feeds its int32 click labels as they are)
    if labels.dtype.kind not in "iu":
        same_dtype(inputs, "sigmoid_cross_entropy_with_logits")
    if labels.shape != logits.shape:
        raise ShapeError(f"labels and logits must have one shape, got labels {labels.shape} and logits {logits.shape}")
    return [logits]


def _sigmoid_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    spec = ctx.outputs[0]
    tmp = ctx.scratch(spec.shape, spec.dtype)

    def run(labels: Any, x: Any) -> Any:  # max(x, 0) - x z + log(1 + exp(-|x|)), stable for any x
        xp.abs(x, out=tmp)
        xp.negative(tmp, out=tmp)
        xp.exp(tmp, out=tmp)
        xp.log1p(tmp, out=tmp)
        xp.maximum(x, 0, out=out)
        xp.add(out, tmp, out=out)
        xp.multiply(x, labels, out=tmp)
        return xp.subtract(out, tmp, out=out)

    return run


def _sigmoid_grad(ctx: GradContext) -> list[Any]:
    labels, logits = ctx.inputs
    dlogits = dlabels = None
    if ctx.needs[1]:
        dlogits = ctx.apply("sigmoid_cross_entropy_grad", [labels, logits, ctx.dy])
    if ctx.needs[0]:
        dlabels = ctx.apply("negative", [ctx.apply("multiply", [logits, ctx.dy])])
    return [dlabels, dlogits]


def _sigmoid_grad_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    labels, logits, dy = inputs
    require_floating([logits, dy], "sigmoid_cross_entropy_grad")
    if not labels.shape == logits.shape == dy.shape:
        raise ShapeError(f"sigmoid_cross_entropy_grad: labels {labels.shape}, logits {logits.shape}, dy {dy.shape}")
    return [logits]


def _sigmoid_grad_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    half = ctx.outputs[0].dtype.type(0.5)

    def run(labels: Any, x: Any, dy: Any) -> Any:  # (sigmoid(x) - z) * dy
        xp.multiply(x, half, out=out)
        xp.tanh(out, out=out)
        xp.multiply(out, half, out=out)
        xp.add(out, half, out=out)
        xp.subtract(out, labels, out=out)
        return xp.multiply(out, dy, out=out)

    return run


SIGMOID_CROSS_ENTROPY = OpDef(
    "sigmoid_cross_entropy", _sigmoid_infer, kernel=_sigmoid_kernel, grad=_sigmoid_grad,
    doc="inputs (labels, logits): elementwise -z log sigmoid(x) - (1 - z) log(1 - sigmoid(x))",
    compute=Compute(layouts=layout_rules.same_shape_elementwise, amp="black"))
SIGMOID_CROSS_ENTROPY_GRAD = OpDef(
    "sigmoid_cross_entropy_grad", _sigmoid_grad_infer, kernel=_sigmoid_grad_kernel, not_differentiable=True,
    doc="(sigmoid(logits) - labels) * dy", compute=Compute(layouts=layout_rules.same_shape_elementwise))


# of probabilities at integer labels (legacy v0.4's sparse_cross_entropy) -----------------------------
LOG_THRESHOLD = 1e-20  # legacy's lower bound on a probability before its log


def _check_probability_labels(op: str, labels: BlobSpec, prediction: BlobSpec) -> None:
    if labels.dtype.kind not in "iu":
        raise ShapeError(f"{op}: labels must be integers (int32 or int64), got {labels.dtype}")
    _require_rows(op, "prediction", prediction)
    if labels.shape != prediction.shape[:-1]:
        raise ShapeError(
            f"{op}: labels must have the prediction's shape without the class axis: prediction {prediction.shape} "
            f"needs labels {prediction.shape[:-1]}, got {labels.shape}")


def _sparse_ce_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    labels, prediction = inputs
    require_floating([prediction], "sparse_cross_entropy (prediction)")
    _check_probability_labels("sparse_cross_entropy", labels, prediction)
    return [BlobSpec(labels.shape, prediction.dtype)]


def _sparse_ce_kernel(ctx: KernelContext) -> Any:
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


def _sparse_ce_grad(ctx: GradContext) -> list[Any]:
    labels, prediction = ctx.inputs
    return [None, ctx.apply("sparse_cross_entropy_grad", [labels, prediction, ctx.dy],
                            {"forward": ctx.node.name})]  # reuses the forward's label split


def _sparse_ce_grad_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    labels, prediction, dy = inputs
    _check_probability_labels("sparse_cross_entropy_grad", labels, prediction)
    if dy.shape != labels.shape or dy.dtype != prediction.dtype:
        raise ShapeError(
            f"sparse_cross_entropy_grad: dy {dy.shape}:{dy.dtype} must be {labels.shape}:{prediction.dtype}")
    return [prediction]


def _sparse_ce_grad_kernel(ctx: KernelContext) -> Any:
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
    "sparse_cross_entropy", _sparse_ce_infer, kernel=_sparse_ce_kernel, grad=_sparse_ce_grad,
    doc="inputs (labels, prediction): per-sample -log(prediction[label]) of probabilities",
    compute=Compute(amp="black"))


SPARSE_CROSS_ENTROPY_GRAD = OpDef(
    "sparse_cross_entropy_grad", _sparse_ce_grad_infer, kernel=_sparse_ce_grad_kernel, not_differentiable=True,
    doc="-dy / prediction[label] at the label, 0 elsewhere")

OPS = (SPARSE_SOFTMAX_CROSS_ENTROPY, SPARSE_SOFTMAX_CROSS_ENTROPY_GRAD, SOFTMAX_CROSS_ENTROPY,
       SOFTMAX_CROSS_ENTROPY_GRAD, SIGMOID_CROSS_ENTROPY, SIGMOID_CROSS_ENTROPY_GRAD, SPARSE_CROSS_ENTROPY,
       SPARSE_CROSS_ENTROPY_GRAD)
