"""Losses other than cross entropy: ``smooth_l1_loss``, ``combined_margin_loss`` and ``ctc_loss`` (legacy v0.4),
with their gradient ops.

* smooth_l1_loss(prediction, label, beta): elementwise 0.5 d^2 / beta where |d| < beta, else |d| - beta / 2
  (d = prediction - label); legacy differentiated the prediction only (the label input had no gradient).
* combined_margin_loss(x, label, m1, m2, m3): x (N, C) cosines; at each row's label column
  y = cos(m1 * acos(x) + m2) - m3, elsewhere y = x. Legacy's second output theta = acos(x) at the label,
  which only its gradient read, is recomputed from x by the gradient op (one output, all of it differentiable).
* ctc_loss(log_probs (T, N, C), targets (N, S), input_lengths (N,), target_lengths (N,)): the negative
  log-likelihood of each target under the CTC alignment lattice (Graves et al. 2006), with legacy's
  forward recursion (blank-interleaved targets, skips between distinct labels). Legacy's second output
  alpha (which only its gradient read, -inf off the lattice) is recomputed by the gradient op instead, so
  every output of the op is finite for a feasible target. The gradient is the true derivative with respect to
  log_probs. Legacy's (PyTorch's) added exp(log_probs) * dy, assuming a log_softmax in front: through that
  log_softmax both give the same gradient of its input, so training is the same; only a watch_diff of
  log_probs itself shows the difference (legacy's own test_ctc_loss compares that raw gradient).
"""
from __future__ import annotations

import numbers
from typing import Any, Sequence

import numpy as np

from flowjob_core import BlobSpec, Compute, GradContext, KernelContext, LegacyFace, OpDef, ShapeError

from flowjob_ops.records.common import require_floating


def _check_real(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ShapeError(f"{what} must be a number, got {value!r}")
    return float(value)


# smooth L1 ------------------------------------------------------------------------------
def _smooth_l1_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    prediction, label = inputs
    require_floating(inputs, "smooth_l1_loss")
    if prediction != label:
        raise ShapeError(f"smooth_l1_loss: label {label} must match prediction {prediction} (shape and dtype)")
    if _check_real(attrs.get("beta"), "smooth_l1_loss beta") < 0:
        raise ShapeError(f"smooth_l1_loss beta must be >= 0, got {attrs.get('beta')!r}")
    return [prediction]


def _smooth_l1_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    spec = ctx.inputs[0]
    beta = spec.dtype.type(ctx.attrs["beta"])
    diff = ctx.scratch(spec.shape, spec.dtype)
    small = ctx.scratch(spec.shape, bool)
    half, safe_beta = spec.dtype.type(0.5), beta if beta > 0 else spec.dtype.type(1)

    def run(prediction: Any, label: Any) -> Any:
        xp.subtract(prediction, label, out=diff)
        xp.abs(diff, out=diff)
        xp.less(diff, beta, out=small)
        xp.subtract(diff, half * beta, out=out)  # |d| - beta/2
        xp.multiply(diff, diff, out=diff)
        xp.multiply(diff, half / safe_beta, out=diff)  # 0.5 d^2 / beta (never taken when beta == 0)
        xp.copyto(out, diff, where=small)
        return out

    return run


def _smooth_l1_grad(ctx: GradContext) -> list[Any]:
    prediction, label = ctx.inputs
    dx = ctx.apply("smooth_l1_loss_grad", [ctx.dy, prediction, label], {"beta": ctx.attrs["beta"]})
    return [dx, None]


def _smooth_l1_grad_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    dy, prediction, label = inputs
    require_floating(inputs, "smooth_l1_loss_grad")
    if not dy == prediction == label:
        raise ShapeError(f"smooth_l1_loss_grad: dy {dy}, prediction {prediction} and label {label} must match")
    return [prediction]


def _smooth_l1_grad_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    spec = ctx.inputs[1]
    beta = spec.dtype.type(ctx.attrs["beta"])
    diff = ctx.scratch(spec.shape, spec.dtype)
    magnitude = ctx.scratch(spec.shape, spec.dtype)
    small = ctx.scratch(spec.shape, bool)
    safe_beta = beta if beta > 0 else spec.dtype.type(1)

    def run(dy: Any, prediction: Any, label: Any) -> Any:  # d / beta inside, sign(d) outside
        xp.subtract(prediction, label, out=diff)
        xp.sign(diff, out=out)
        xp.abs(diff, out=magnitude)
        xp.less(magnitude, beta, out=small)
        xp.divide(diff, safe_beta, out=diff)
        xp.copyto(out, diff, where=small)
        return xp.multiply(out, dy, out=out)

    return run


SMOOTH_L1_LOSS = OpDef("smooth_l1_loss", _smooth_l1_infer, kernel=_smooth_l1_kernel, grad=_smooth_l1_grad,
                       doc="0.5 d^2 / beta where |d| < beta, else |d| - beta/2 (d = prediction - label)",
                       compute=Compute(amp="black"))
SMOOTH_L1_LOSS_GRAD = OpDef("smooth_l1_loss_grad", _smooth_l1_grad_infer, kernel=_smooth_l1_grad_kernel,
                            not_differentiable=True, doc="dy * (d / beta where |d| < beta, else sign(d))")


# combined margin ------------------------------------------------------------------------
def _margin_attrs(attrs: dict) -> tuple[float, float, float]:
    return tuple(_check_real(attrs.get(k), f"combined_margin_loss {k}") for k in ("m1", "m2", "m3"))  # type: ignore


def _check_labels(label: BlobSpec, rows: int, op: str) -> None:
    if label.dtype.kind not in "iu":
        raise ShapeError(f"{op}: label must be an integer blob, got {label.dtype}")
    if label.shape != (rows,):
        raise ShapeError(f"{op}: label must be shaped ({rows},), one class per row of x, got {label.shape}")


def _margin_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    x, label = inputs
    require_floating(inputs[:1], "combined_margin_loss")
    if len(x.shape) < 2:
        raise ShapeError(f"combined_margin_loss: x must be (N, classes...), got shape {x.shape}")
    _check_labels(label, x.shape[0], "combined_margin_loss")
    _margin_attrs(attrs)
    return [x]


def _label_hits(xp: Any, label: Any, classes: int) -> tuple[Any, Any]:
    """(rows whose label is a column of x, those labels as column indices)."""
    label = label.astype(np.int64)
    inside = (label >= 0) & (label < classes)
    return inside, xp.where(inside, label, 0)


def _margin_kernel(ctx: KernelContext) -> Any:
    xp, y_out = ctx.xp, ctx.out(0)
    rows = ctx.inputs[0].shape[0]
    classes = int(np.prod(ctx.inputs[0].shape[1:]))
    m1, m2, m3 = (ctx.inputs[0].dtype.type(v) for v in _margin_attrs(ctx.attrs))
    index = xp.arange(rows)

    def run(x: Any, label: Any) -> Any:
        flat_x, flat_y = x.reshape(rows, classes), y_out.reshape(rows, classes)
        xp.copyto(flat_y, flat_x)
        inside, column = _label_hits(xp, label, classes)
        with np.errstate(invalid="ignore"):  # rows without a label column read column 0, then drop it
            theta = xp.arccos(flat_x[index, column])
            margin = xp.cos(theta * m1 + m2) - m3
        flat_y[index, column] = xp.where(inside, margin, flat_x[index, column])
        return y_out

    return run


def _margin_grad(ctx: GradContext) -> list[Any]:
    x, label = ctx.inputs
    attrs = {k: ctx.attrs[k] for k in ("m1", "m2", "m3")}
    return [ctx.apply("combined_margin_loss_grad", [ctx.dy, label, x], attrs), None]


def _margin_grad_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    dy, label, x = inputs
    require_floating([dy, x], "combined_margin_loss_grad")
    if len(dy.shape) < 2:
        raise ShapeError(f"combined_margin_loss_grad: dy must be (N, classes...), got shape {dy.shape}")
    _check_labels(label, dy.shape[0], "combined_margin_loss_grad")
    if x != dy:
        raise ShapeError(f"combined_margin_loss_grad: x {x} must match dy {dy}")
    _margin_attrs(attrs)
    return [dy]


def _margin_grad_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    rows = ctx.inputs[0].shape[0]
    classes = int(np.prod(ctx.inputs[0].shape[1:]))
    m1, m2, _ = (ctx.inputs[0].dtype.type(v) for v in _margin_attrs(ctx.attrs))
    index = xp.arange(rows)

    def run(dy: Any, label: Any, x: Any) -> Any:  # d cos(m1 acos x + m2)/dx = m1 sin(m1 theta + m2) / sin theta
        flat_dy, flat_dx = dy.reshape(rows, classes), out.reshape(rows, classes)
        xp.copyto(flat_dx, flat_dy)
        inside, column = _label_hits(xp, label, classes)
        with np.errstate(invalid="ignore", divide="ignore"):  # rows without a label column are dropped below
            theta = xp.arccos(x.reshape(rows, classes)[index, column])
            scaled = flat_dy[index, column] * xp.sin(theta * m1 + m2) * m1 / xp.sin(theta)
        flat_dx[index, column] = xp.where(inside, scaled, flat_dy[index, column])
        return out

    return run


COMBINED_MARGIN_LOSS = OpDef(
    "combined_margin_loss", _margin_infer, kernel=_margin_kernel, grad=_margin_grad,
    doc="y = x except cos(m1 * acos(x) + m2) - m3 at each row's label", compute=Compute(amp="black"))
COMBINED_MARGIN_LOSS_GRAD = OpDef(
    "combined_margin_loss_grad", _margin_grad_infer, kernel=_margin_grad_kernel, not_differentiable=True,
    doc="dy, times m1 sin(m1 theta + m2) / sin(theta) at each row's label (theta = acos(x))")


# CTC ------------------------------------------------------------------------------------
def _ctc_specs(inputs: Sequence[BlobSpec], attrs: dict, op: str) -> tuple[int, int, int, int]:
    log_probs, targets, input_lengths, target_lengths = inputs[:4]
    require_floating(inputs[:1], op)
    if len(log_probs.shape) != 3:
        raise ShapeError(f"{op}: log_probs must be (T, N, C), got shape {log_probs.shape}")
    steps, batch, classes = log_probs.shape
    if len(targets.shape) != 2 or targets.shape[0] != batch:
        raise ShapeError(f"{op}: targets must be (N, S) with N = {batch}, got shape {targets.shape}")
    for what, spec in (("targets", targets), ("input_lengths", input_lengths), ("target_lengths", target_lengths)):
        if spec.dtype.kind not in "iu":
            raise ShapeError(f"{op}: {what} must be an integer blob, got {spec.dtype}")
    for what, spec in (("input_lengths", input_lengths), ("target_lengths", target_lengths)):
        if spec.shape != (batch,):
            raise ShapeError(f"{op}: {what} must be shaped ({batch},), got {spec.shape}")
    blank = attrs.get("blank")
    if isinstance(blank, bool) or not isinstance(blank, numbers.Integral) or not 0 <= blank < classes:
        raise ShapeError(f"{op}: blank must be an int in [0, {classes}), got {blank!r}")
    if not isinstance(attrs.get("zero_infinity"), bool):
        raise ShapeError(f"{op}: zero_infinity must be a bool, got {attrs.get('zero_infinity')!r}")
    return steps, batch, classes, targets.shape[1]


def _ctc_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    _, batch, _, _ = _ctc_specs(inputs, attrs, "ctc_loss")
    return [BlobSpec((batch,), inputs[0].dtype)]


class _Lattice:
    """The blank-interleaved targets of one step's batch: labels l'_s, valid positions, allowed skips."""

    def __init__(self, xp: Any, targets: Any, target_lengths: Any, input_lengths: Any, steps: int, blank: int,
                 op: str) -> None:
        batch, longest = targets.shape
        self.lengths = target_lengths.astype(np.int64)
        self.inputs = input_lengths.astype(np.int64)
        # a length outside the blobs' extents is a bad feed: legacy's CHECK aborted the process
        if bool(xp.any(self.inputs < 1)) or bool(xp.any(self.inputs > steps)):
            raise ValueError(f"{op}: input_lengths must lie in [1, {steps}], got {input_lengths.tolist()}")
        if bool(xp.any(self.lengths < 0)) or bool(xp.any(self.lengths > longest)):
            raise ValueError(f"{op}: target_lengths must lie in [0, {longest}], got {target_lengths.tolist()}")
        width = 2 * longest + 1
        self.labels = xp.full((batch, width), blank, dtype=np.int64)
        self.labels[:, 1::2] = targets.astype(np.int64)
        position = xp.arange(width)
        self.valid = position[None, :] < (2 * self.lengths[:, None] + 1)
        skip = xp.zeros((batch, width), dtype=bool)
        skip[:, 2:] = self.labels[:, 2:] != self.labels[:, :-2]
        self.skip = skip  # s may come from s - 2 (a label differing from the one two places back)
        self.rows = xp.arange(batch)

    def emissions(self, xp: Any, log_probs: Any) -> Any:
        """(N, T, 2S+1): log_probs[t, n, l'_s]."""
        per_batch = xp.transpose(log_probs, (1, 0, 2))  # (N, T, C)
        return xp.take_along_axis(per_batch, self.labels[:, None, :], axis=2)


def _logsumexp3(xp: Any, a: Any, b: Any, c: Any) -> Any:
    top = xp.maximum(xp.maximum(a, b), c)
    top = xp.where(top == -np.inf, 0, top)
    return xp.log(xp.exp(a - top) + xp.exp(b - top) + xp.exp(c - top)) + top


def _shift(xp: Any, values: Any, by: int, fill: float) -> Any:
    """values moved ``by`` places along the last axis (positive: toward higher s), ``fill`` entering."""
    out = xp.full(values.shape, fill, dtype=values.dtype)
    if by > 0:
        out[..., by:] = values[..., :-by]
    else:
        out[..., :by] = values[..., -by:]
    return out


def _ctc_alpha(xp: Any, lattice: _Lattice, emit: Any) -> tuple[Any, Any]:
    """Forward variables (N, T, 2S+1) and the loss (N,)."""
    batch, steps, width = emit.shape
    neg = -np.inf
    alpha = xp.full((batch, steps, width), neg, dtype=emit.dtype)
    alpha[:, 0, 0] = emit[:, 0, 0]
    has_label = lattice.lengths > 0
    if width > 1:
        alpha[:, 0, 1] = xp.where(has_label, emit[:, 0, 1], neg)
    for t in range(1, steps):
        prev = alpha[:, t - 1]
        skip = xp.where(lattice.skip, _shift(xp, prev, 2, neg), neg)
        step = _logsumexp3(xp, prev, _shift(xp, prev, 1, neg), skip) + emit[:, t]
        inside = lattice.valid & (t < lattice.inputs)[:, None]  # nothing is reached past an input's length
        alpha[:, t] = xp.where(inside, step, neg)
    last = alpha[lattice.rows, lattice.inputs - 1]  # (N, width)
    end = 2 * lattice.lengths
    final = last[lattice.rows, end]
    before = xp.where(has_label, last[lattice.rows, xp.maximum(end - 1, 0)], neg)
    top = xp.maximum(final, before)
    top = xp.where(top == -np.inf, 0, top)
    loss = -(xp.log(xp.exp(final - top) + xp.exp(before - top)) + top)
    return alpha, loss


def _ctc_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    steps = ctx.inputs[0].shape[0]
    blank = int(ctx.attrs["blank"])

    def run(log_probs: Any, targets: Any, input_lengths: Any, target_lengths: Any) -> Any:
        with np.errstate(divide="ignore", invalid="ignore"):  # log(0) = -inf off the lattice, by design
            lattice = _Lattice(xp, targets, target_lengths, input_lengths, steps, blank, "ctc_loss")
            _, loss = _ctc_alpha(xp, lattice, lattice.emissions(xp, log_probs))
        xp.copyto(out, loss)
        return out

    return run


def _ctc_grad(ctx: GradContext) -> list[Any]:
    attrs = {"blank": ctx.attrs["blank"], "zero_infinity": ctx.attrs["zero_infinity"]}
    dx = ctx.apply("ctc_loss_grad", [*ctx.inputs, ctx.dy, ctx.outputs[0]], attrs)
    return [dx, None, None, None]


def _ctc_grad_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    _, batch, _, _ = _ctc_specs(inputs, attrs, "ctc_loss_grad")
    expected = BlobSpec((batch,), inputs[0].dtype)
    if tuple(inputs[4:]) != (expected, expected):
        raise ShapeError(f"ctc_loss_grad: dy and loss must be {expected}, got {tuple(inputs[4:])}")
    return [inputs[0]]


def _ctc_grad_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    steps, batch, classes = ctx.inputs[0].shape
    blank = int(ctx.attrs["blank"])
    zero_infinity = bool(ctx.attrs["zero_infinity"])
    time = xp.arange(steps)

    def run(log_probs: Any, targets: Any, input_lengths: Any, target_lengths: Any, dy: Any, loss: Any) -> Any:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            lattice = _Lattice(xp, targets, target_lengths, input_lengths, steps, blank, "ctc_loss_grad")
            emit = lattice.emissions(xp, log_probs)
            alpha, _ = _ctc_alpha(xp, lattice, emit)
            beta = _ctc_beta(xp, lattice, emit)
            # occupancy of lattice node (t, s): alpha * beta / (P * emission), as exp of logs
            occupancy = xp.exp(alpha + beta + loss[:, None, None] - emit)
            occupancy = xp.where(xp.isnan(occupancy), 0, occupancy)
            onehot = (lattice.labels[:, :, None] == xp.arange(classes)[None, None, :]).astype(occupancy.dtype)
            # d loss / d log_probs[t, n, c] = -sum over s with l'_s = c of the occupancy
            grad = -xp.einsum("nts,nsc->tnc", occupancy, onehot)
            keep = time[:, None] < lattice.inputs[None, :]  # (T, N): steps past an input's length get 0
            if zero_infinity:  # as legacy: an impossible alignment (loss inf) gets a zero gradient
                keep = keep & (loss != np.inf)[None, :]
            grad = xp.where(keep[:, :, None], grad * dy[None, :, None], 0)
        xp.copyto(out, grad)
        return out

    return run


def _ctc_beta(xp: Any, lattice: _Lattice, emit: Any) -> Any:
    """Backward variables (N, T, 2S+1), each sample started at its own last input step."""
    batch, steps, width = emit.shape
    neg = -np.inf
    beta = xp.full((batch, steps, width), neg, dtype=emit.dtype)
    end = 2 * lattice.lengths
    position = xp.arange(width)[None, :]
    start = (position == end[:, None]) | ((position == end[:, None] - 1) & (lattice.lengths[:, None] > 0))
    # skips run toward lower s: node s reaches s + 2 when l'_{s+2} differs from l'_s
    skip_back = _shift(xp, lattice.skip, -2, False)
    for t in range(steps - 1, -1, -1):
        first = xp.where(start, emit[:, t], neg)
        if t < steps - 1:
            nxt = beta[:, t + 1]
            skip = xp.where(skip_back, _shift(xp, nxt, -2, neg), neg)
            step = _logsumexp3(xp, nxt, _shift(xp, nxt, -1, neg), skip) + emit[:, t]
        else:
            step = xp.full((batch, width), neg, dtype=emit.dtype)
        here = lattice.inputs - 1
        row = xp.where((t == here)[:, None], first, xp.where((t < here)[:, None], step, neg))
        beta[:, t] = xp.where(lattice.valid, row, neg)
    return beta


CTC_LOSS = OpDef("ctc_loss", _ctc_infer, kernel=_ctc_kernel, grad=_ctc_grad,
                 doc="per-sample CTC negative log-likelihood (N,)", compute=Compute(amp="black"),
                 legacy=LegacyFace(name_prefix="CTCLoss"))
CTC_LOSS_GRAD = OpDef("ctc_loss_grad", _ctc_grad_infer, kernel=_ctc_grad_kernel, not_differentiable=True,
                      doc="d loss / d log_probs: -dy * (posterior occupancy of each label) / exp(log_probs)",
                      legacy=LegacyFace(name_prefix="CTCLossGrad"))

OPS = (SMOOTH_L1_LOSS, SMOOTH_L1_LOSS_GRAD, COMBINED_MARGIN_LOSS, COMBINED_MARGIN_LOSS_GRAD, CTC_LOSS, CTC_LOSS_GRAD)
