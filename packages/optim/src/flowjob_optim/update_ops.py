"""The optimizer's ops: the learning rate, the clipping factor, one fused update per variable, the step counter.

Update ops write the variable and its slots in place (``OpDef.effects.mutates``), so the planner
runs them after every other reader of those values in the step: returns and watches see
the value from before the update. Kernels use ``out=`` calls on buffers made once per
node; nothing is allocated per step.

Inputs of an update op: ``(variable, *slots, gradient, learning_rate[, clip_factor])``.
Attributes: the rule's hyper-parameters, ``weight_decay``, ``l1``/``l2`` (regularizer) and
``clipped``. The gradient a rule uses is ``g = grad * clip_factor + l1 * sign(w) + l2 * w``.

Under gradient accumulation the update ops, the clipping factor and the step increment carry
``accumulation_steps`` and take the micro-step counter as an extra last input; they then run on
the last micro-batch of a cycle only (``flowjob_optim.accumulation``).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from flowjob_core import (
    BlobSpec, Compute, Effects, FlowjobError, Kernel, KernelContext, LegacyFace, OpDef, ShapeError)

from flowjob_optim.accumulation import gated, split_counter

Step = Callable[[Any, Sequence[Any], Any, Any], None]
"""``step(w, slots, g, lr)``: one rule's in-place update; ``lr`` is a scalar of the learning rate."""

STEP_DTYPE = np.dtype(np.int64)
LR_DTYPE = np.dtype(np.float32)


# scalar nodes -------------------------------------------------------------
def _scalar_out(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    return [BlobSpec((1,), LR_DTYPE)]


def _learning_rate_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    if inputs[0] != BlobSpec((1,), STEP_DTYPE):
        raise ShapeError(f"the train step must be int64 of shape (1,), got {inputs[0]}")
    if not isinstance(attrs.get("schedule"), str):
        raise ShapeError(f"attribute 'schedule' must be the key of a schedule in the global function's bindings, "
                         f"got {attrs.get('schedule')!r}")
    return _scalar_out(inputs, attrs)


def _learning_rate_kernel(ctx: KernelContext) -> Any:
    if ctx.bindings is None:
        raise FlowjobError(f"op {ctx.node_name!r}: its schedule {ctx.attrs['schedule']!r} is a key of the global "
                           f"function's bindings, and this kernel was built without them")
    out, schedule = ctx.out(0), ctx.bindings.consumer(ctx.attrs["schedule"], f"op {ctx.node_name!r}")
    records_steps = getattr(ctx.backend, "step_recorder", None) is not None
    if records_steps and getattr(schedule, "has_device_form", lambda: False)():
        # a backend recording its steps: the rate computed on the device from the counter there, inside the
        # recorded step (no read back of the counter, no live node)
        xp = ctx.xp

        def run_on_device(step: Any) -> Any:
            xp.copyto(out, schedule.rate_on_device(xp, step), casting="same_kind")
            return out

        return Kernel(run_on_device, host_state=False)

    def run(step: Any) -> Any:
        out[0] = schedule(int(step[0]))
        return out

    return run


LEARNING_RATE = OpDef("optim_learning_rate", _learning_rate_infer, kernel=_learning_rate_kernel,
                      not_differentiable=True,
                      doc="The learning rate for the step in the counter (float32, shape (1,)) of the schedule "
                          "that the attribute 'schedule' names by its key in the global function's bindings.",
                      effects=Effects(host_state=True), legacy=LegacyFace(name_prefix="LearningRate"))


def _clip_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    inputs, _ = split_counter(inputs, attrs)
    if not inputs:
        raise ShapeError("clipping needs at least one gradient")
    if not attrs.get("clip_norm", 0) > 0:
        raise ShapeError(f"clip_norm must be positive, got {attrs.get('clip_norm')!r}")
    return _scalar_out(inputs, attrs)


def _clip_kernel(ctx: KernelContext) -> Any:
    xp, out, clip_norm = ctx.xp, ctx.out(0), float(ctx.attrs["clip_norm"])
    total = ctx.scratch((1,), np.float64)  # stays on the device: no host round trip per step

    def run(*grads: Any) -> Any:
        total[...] = 0.0
        for g in grads:
            flat = g.reshape(-1)
            xp.add(total, xp.dot(flat, flat), out=total)
        xp.sqrt(total, out=total)
        xp.maximum(total, clip_norm, out=total)
        xp.divide(clip_norm, total, out=out)
        return out

    return gated(run, ctx.attrs)


CLIP_FACTOR = OpDef("optim_clip_by_global_norm", _clip_infer, kernel=_clip_kernel, not_differentiable=True,
                    doc="clip_norm / max(global L2 norm of the gradients, clip_norm)",
                    legacy=LegacyFace(name_prefix="ClipByGlobalNorm"))


def _increment_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    inputs, _ = split_counter(inputs, attrs)
    if len(inputs) != 1 or inputs[0] != BlobSpec((1,), STEP_DTYPE):
        raise ShapeError(f"the train step must be int64 of shape (1,), got {inputs[0]}")
    return []


def _increment_kernel(ctx: KernelContext) -> Any:
    xp = ctx.xp
    one = np.int64(1)

    def run(counter: Any) -> None:
        xp.add(counter, one, out=counter)

    return gated(run, ctx.attrs)


STEP_INCREMENT = OpDef("optim_train_step_increment", _increment_infer, kernel=_increment_kernel,
                       not_differentiable=True, doc="Adds 1 to the train step counter, after every reader of it.",
                       effects=Effects(mutates=(0,)), legacy=LegacyFace(name_prefix="TrainStepIncrement"))


# update ops ---------------------------------------------------------------
def _update_infer(n_slots: int) -> Callable[[Sequence[BlobSpec], dict], list[BlobSpec]]:
    def infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
        inputs, _ = split_counter(inputs, attrs)  # gradient accumulation's gate, when there is one
        clipped = bool(attrs.get("clipped"))
        want = n_slots + 3 + (1 if clipped else 0)
        if len(inputs) != want:
            raise ShapeError(f"expected {want} inputs (variable, {n_slots} slot(s), gradient, learning rate"
                             f"{', clip factor' if clipped else ''}), got {len(inputs)}")
        var = inputs[0]
        if var.dtype.kind != "f":
            raise ShapeError(f"only floating variables can be trained, this one is {var.dtype}")
        grad = inputs[n_slots + 1]
        if grad != var:
            raise ShapeError(f"the gradient {grad} does not match the variable {var}")
        for i, spec in enumerate(inputs[1:n_slots + 1]):
            if spec.dtype != var.dtype or spec.shape not in (var.shape, (1,)):
                raise ShapeError(f"slot {i} is {spec}, the variable is {var}")
        for spec in inputs[n_slots + 2:]:
            if spec.shape != (1,) or spec.dtype.kind != "f":
                raise ShapeError(f"learning rate and clip factor must be floating of shape (1,), got {spec}")
        return []

    return infer


def _gradient_prep(ctx: KernelContext, scale: float = 1.0) -> Callable[[Any, Any, Any], Any]:
    """``prep(w, g, clip)``: the gradient the rule uses; ``g`` itself when nothing modifies it.

    ``scale`` (the ``grad_scale`` a pass folded in from a ``scalar_mul`` of the gradient, e.g. the
    1/N of the loss elements) multiplies ``g`` first, exactly as the folded node did."""
    xp, spec = ctx.xp, ctx.inputs[0]
    clipped = bool(ctx.attrs.get("clipped"))
    dt = spec.dtype.type
    l1, l2 = dt(ctx.attrs.get("l1", 0.0)), dt(ctx.attrs.get("l2", 0.0))
    s = dt(scale)
    if not clipped and not l1 and not l2 and scale == 1.0:
        return lambda w, g, clip: g
    buf = ctx.scratch(spec.shape, spec.dtype)
    term = ctx.scratch(spec.shape, spec.dtype) if (l1 or l2) else None

    def prep(w: Any, g: Any, clip: Any) -> Any:
        if scale != 1.0:
            xp.multiply(g, s, out=buf)
            if clipped:
                xp.multiply(buf, clip[0], out=buf)
        elif clipped:
            xp.multiply(g, clip[0], out=buf)
        else:
            xp.copyto(buf, g)
        if l1:
            xp.sign(w, out=term)
            xp.multiply(term, l1, out=term)
            xp.add(buf, term, out=buf)
        if l2:
            xp.multiply(w, l2, out=term)
            xp.add(buf, term, out=buf)
        return buf

    return prep


@dataclass(frozen=True)
class StepRule:
    """An update rule: ``build(ctx) -> step``, the step ``step(w, slots, g, lr)`` updating one variable in place,
    with what the update kernels know of it before building it.

    ``elementwise``: the step updates each element from the same elements of the variable, its slots and the
    gradient (SGD, momentum, Adam, RMSProp), so it may run block by block (``flowjob_optim.cpu_update_blocks``).
    ``lr_times_grad``: the step reads the gradient only as ``lr * g``, so a gradient scale folds into the rate.
    """

    build: Callable[[KernelContext], Step]
    elementwise: bool = False
    lr_times_grad: bool = False

    def __call__(self, ctx: KernelContext) -> Step:
        return self.build(ctx)


InParts = Callable[[KernelContext, StepRule, int, Any], Any]
"""``in_parts(ctx, rule, end, scale)``: the plain update (no clipping, no regularizer; ``scale`` a gradient scale
folded into the rate, or None) as a backend's tuned variant runs it (the cpu override's blocks over the host
threads, ``flowjob_optim.cpu_update_blocks``), or None where the variant does not apply."""


class UpdateKernel:
    """The kernel builder of an update op made by ``_update_op``: the rule's step on the whole variable. A
    backend's override runs the same builder with its own way of running the plain update (``build``)."""

    def __init__(self, n_slots: int, rule: StepRule | Callable[[KernelContext], Step]) -> None:
        self.n_slots = n_slots
        self.rule = rule if isinstance(rule, StepRule) else StepRule(rule)

    def __call__(self, ctx: KernelContext) -> Any:
        return self.build(ctx)

    def build(self, ctx: KernelContext, in_parts: InParts | None = None) -> Any:
        # under gradient accumulation the node runs on the last micro-batch of a cycle only
        return gated(self._build_ungated(ctx, in_parts), ctx.attrs)

    def _build_ungated(self, ctx: KernelContext, in_parts: InParts | None) -> Any:
        rule, n_slots = self.rule, self.n_slots
        step = rule(ctx)
        clipped = bool(ctx.attrs.get("clipped"))
        scale = float(ctx.attrs.get("grad_scale", 1.0))
        dt = ctx.inputs[0].dtype.type
        l1, l2 = dt(ctx.attrs.get("l1", 0.0)), dt(ctx.attrs.get("l2", 0.0))
        # a rule that uses the gradient only as ``lr * g`` (and no decay term, which lr also scales) takes
        # the gradient's scale in its learning rate: no pass over the gradient (float32 rounding aside)
        fold = (scale != 1.0 and rule.lr_times_grad and not clipped and not l1 and not l2
                and not float(ctx.attrs.get("weight_decay", 0.0) or 0.0))
        prep = _gradient_prep(ctx, 1.0 if fold else scale)
        end = n_slots + 1
        plain = not clipped and prep is not None and scale == 1.0 and not l1 and not l2
        if (fold or plain) and in_parts is not None:
            variant = in_parts(ctx, rule, end, dt(scale) if fold else None)
            if variant is not None:
                return variant
        if fold:
            s = dt(scale)

            def run_folded(*args: Any) -> None:
                step(args[0], args[1:end], args[end], args[end + 1][0] * s)

            return run_folded
        if plain:
            def run_plain(*args: Any) -> None:
                step(args[0], args[1:end], args[end], args[end + 1][0])

            return run_plain

        def run(*args: Any) -> None:
            w = args[0]
            step(w, args[1:end], prep(w, args[end], args[end + 2] if clipped else None), args[end + 1][0])

        return run


def _consts(ctx: KernelContext, *names: str) -> list[Any]:
    """Hyper-parameters as scalars of the variable's dtype (legacy computed them in float)."""
    dt = ctx.inputs[0].dtype.type
    return [dt(ctx.attrs[n]) for n in names]


def _scratch(ctx: KernelContext, count: int = 1) -> list[Any]:
    spec = ctx.inputs[0]
    return [ctx.scratch(spec.shape, spec.dtype) for _ in range(count)]


def _average_into(xp: Any, avg: Any, decay: Any, value: Any, weight: Any, tmp: Any, square: bool = False) -> None:
    """``avg = decay * avg + weight * value`` (``value**2`` with ``square``), in place: the running
    averages of Adam, LAMB and RMSProp."""
    xp.multiply(avg, decay, out=avg)
    xp.multiply(value, weight, out=tmp)
    if square:
        xp.multiply(tmp, value, out=tmp)
    xp.add(avg, tmp, out=avg)


def _sgd(ctx: KernelContext) -> Step:
    """``w -= lr * (g + wd * w)``."""
    xp, (wd,), (tmp,) = ctx.xp, _consts(ctx, "weight_decay"), _scratch(ctx)

    def step(w: Any, slots: Sequence[Any], g: Any, lr: Any) -> None:
        if wd:
            xp.multiply(w, wd, out=tmp)
            xp.add(g, tmp, out=tmp)
            xp.multiply(tmp, lr, out=tmp)
        else:
            xp.multiply(g, lr, out=tmp)
        xp.subtract(w, tmp, out=w)

    return step


def _momentum(ctx: KernelContext) -> Step:
    """``m = beta * m - lr * g; w = w + m - lr * wd * w``."""
    xp, (beta, wd), (tmp, decay) = ctx.xp, _consts(ctx, "beta", "weight_decay"), _scratch(ctx, 2)

    def step(w: Any, slots: Sequence[Any], g: Any, lr: Any) -> None:
        (m,) = slots
        xp.multiply(m, beta, out=m)
        xp.multiply(g, lr, out=tmp)
        xp.subtract(m, tmp, out=m)
        if wd:
            xp.multiply(w, lr * wd, out=decay)
        xp.add(w, m, out=w)
        if wd:
            xp.subtract(w, decay, out=w)

    return step


def _adam_step(ctx: KernelContext, bias_correction: bool) -> Step:
    """``m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; w -= lr_t (m / (sqrt(v) + eps) + wd w)``,
    ``lr_t = lr sqrt(1 - b2_t) / (1 - b1_t)`` with bias correction (then ``b1_t *= b1; b2_t *= b2``)."""
    xp = ctx.xp
    b1, b2, eps, wd = _consts(ctx, "beta1", "beta2", "epsilon", "weight_decay")
    one = ctx.inputs[0].dtype.type(1)
    omb1, omb2 = one - b1, one - b2
    tmp, decay = _scratch(ctx, 2)

    def step(w: Any, slots: Sequence[Any], g: Any, lr: Any) -> None:
        m, v = slots[0], slots[1]
        if bias_correction:
            b1t, b2t = slots[2], slots[3]
            lr = lr * xp.sqrt(one - b2t[0]) / (one - b1t[0])
            xp.multiply(b1t, b1, out=b1t)
            xp.multiply(b2t, b2, out=b2t)
        _average_into(xp, m, b1, g, omb1, tmp)
        _average_into(xp, v, b2, g, omb2, tmp, square=True)
        xp.sqrt(v, out=tmp)
        xp.add(tmp, eps, out=tmp)
        xp.divide(m, tmp, out=tmp)
        if wd:
            xp.multiply(w, wd, out=decay)
            xp.add(tmp, decay, out=tmp)
        xp.multiply(tmp, lr, out=tmp)
        xp.subtract(w, tmp, out=w)

    return step


def _adam(ctx: KernelContext) -> Step:
    return _adam_step(ctx, bias_correction=False)


def _adam_bias_corrected(ctx: KernelContext) -> Step:
    return _adam_step(ctx, bias_correction=True)


# (bias-corrected Adam advances its beta powers once per step: not elementwise, it stays whole)


def _rmsprop_step(ctx: KernelContext, centered: bool) -> Step:
    """``ms = (1-d) g^2 + d ms``; centered: ``mg = (1-d) g + d mg``, ``den = ms - mg^2``, else ``den = ms``;
    ``w -= lr g / sqrt(den + eps) + lr wd w``."""
    xp = ctx.xp
    d, eps, wd = _consts(ctx, "decay_rate", "epsilon", "weight_decay")
    omd = ctx.inputs[0].dtype.type(1) - d
    tmp, den = _scratch(ctx, 2)

    def step(w: Any, slots: Sequence[Any], g: Any, lr: Any) -> None:
        ms = slots[0]
        _average_into(xp, ms, d, g, omd, tmp, square=True)
        if centered:
            mg = slots[1]
            _average_into(xp, mg, d, g, omd, tmp)
            xp.multiply(mg, mg, out=den)
            xp.subtract(ms, den, out=den)
            xp.add(den, eps, out=den)
        else:
            xp.add(ms, eps, out=den)
        xp.sqrt(den, out=den)
        xp.multiply(g, lr, out=tmp)
        xp.divide(tmp, den, out=tmp)
        if wd:
            xp.multiply(w, lr * wd, out=den)
            xp.add(tmp, den, out=tmp)
        xp.subtract(w, tmp, out=w)

    return step


def _rmsprop(ctx: KernelContext) -> Step:
    return _rmsprop_step(ctx, centered=False)


def _rmsprop_centered(ctx: KernelContext) -> Step:
    return _rmsprop_step(ctx, centered=True)


def _lars(ctx: KernelContext) -> Step:
    """``trust = coeff * ||w|| / (eps + ||g|| + wd ||w||)``, 1 when either norm is 0 (legacy v0.4);
    ``local_lr = lr * trust``; ``m = beta m - local_lr g``; ``w = w + m - local_lr wd w``."""
    xp = ctx.xp
    beta, eps, coeff, wd = _consts(ctx, "momentum_beta", "epsilon", "lars_coefficient", "weight_decay")
    one = ctx.inputs[0].dtype.type(1)
    tmp, decay = _scratch(ctx, 2)

    def step(w: Any, slots: Sequence[Any], g: Any, lr: Any) -> None:
        (m,) = slots
        flat_w, flat_g = w.reshape(-1), g.reshape(-1)
        w_norm = xp.sqrt(xp.dot(flat_w, flat_w))
        g_norm = xp.sqrt(xp.dot(flat_g, flat_g))
        both = (w_norm > 0) & (g_norm > 0)
        # a zero weight (fresh zero-initialized variable) or gradient falls back to the plain rate;
        # where() keeps the choice on the device (no host round trip under CuPy)
        trust = xp.where(both, coeff * w_norm / (eps + g_norm + wd * w_norm), one)
        local_lr = lr * trust
        xp.multiply(m, beta, out=m)
        xp.multiply(g, local_lr, out=tmp)
        xp.subtract(m, tmp, out=m)
        if wd:
            xp.multiply(w, local_lr * wd, out=decay)
        xp.add(w, m, out=w)
        if wd:
            xp.subtract(w, decay, out=w)

    return step


def _lamb(ctx: KernelContext) -> Step:
    """``b1_t *= b1; b2_t *= b2`` (they start at 1: the textbook ``1 - b^t``); ``m, v`` as Adam;
    ``u = (m / (1 - b1_t)) / (sqrt(v / (1 - b2_t)) + eps)`` (epsilon after the root, legacy v0.4);
    ``r = ||w|| / ||u||`` (1 when either is 0); ``w -= lr r (u + wd w)``."""
    xp = ctx.xp
    b1, b2, eps, wd = _consts(ctx, "beta1", "beta2", "epsilon", "weight_decay")
    one = ctx.inputs[0].dtype.type(1)
    omb1, omb2 = one - b1, one - b2
    tmp, upd = _scratch(ctx, 2)

    def step(w: Any, slots: Sequence[Any], g: Any, lr: Any) -> None:
        m, v, b1t, b2t = slots
        xp.multiply(b1t, b1, out=b1t)
        xp.multiply(b2t, b2, out=b2t)
        _average_into(xp, m, b1, g, omb1, tmp)
        _average_into(xp, v, b2, g, omb2, tmp, square=True)
        xp.divide(v, one - b2t[0], out=tmp)
        xp.sqrt(tmp, out=tmp)
        xp.add(tmp, eps, out=tmp)
        xp.divide(m, one - b1t[0], out=upd)
        xp.divide(upd, tmp, out=upd)
        flat_w, flat_u = w.reshape(-1), upd.reshape(-1)
        w_norm = xp.sqrt(xp.dot(flat_w, flat_w))
        u_norm = xp.sqrt(xp.dot(flat_u, flat_u))
        both = (w_norm > 0) & (u_norm > 0)
        trust = xp.where(both, w_norm, one) / xp.where(both, u_norm, one)  # 1 when either norm is 0
        if wd:
            xp.multiply(w, wd, out=tmp)
            xp.add(upd, tmp, out=upd)
        xp.multiply(upd, lr * trust, out=upd)
        xp.subtract(w, upd, out=w)

    return step


def _update_op(name: str, n_slots: int, rule: StepRule, doc: str) -> OpDef:
    return OpDef(name, _update_infer(n_slots), kernel=UpdateKernel(n_slots, rule), not_differentiable=True, doc=doc,
                 effects=Effects(mutates=tuple(range(n_slots + 1))), legacy=LegacyFace(name_prefix="ModelUpdate"))


SGD_UPDATE = _update_op("optim_sgd_update", 0, StepRule(_sgd, elementwise=True, lr_times_grad=True),
                        _sgd.__doc__ or "")
MOMENTUM_UPDATE = _update_op("optim_momentum_update", 1, StepRule(_momentum, elementwise=True, lr_times_grad=True),
                             _momentum.__doc__ or "")
ADAM_UPDATE = _update_op("optim_adam_update", 2, StepRule(_adam, elementwise=True), _adam_step.__doc__ or "")
ADAM_BC_UPDATE = _update_op("optim_adam_bias_corrected_update", 4, StepRule(_adam_bias_corrected),
                            _adam_step.__doc__ or "")
RMSPROP_UPDATE = _update_op("optim_rmsprop_update", 1, StepRule(_rmsprop, elementwise=True),
                             _rmsprop_step.__doc__ or "")
RMSPROP_CENTERED_UPDATE = _update_op("optim_rmsprop_centered_update", 2,
                                     StepRule(_rmsprop_centered, elementwise=True),
                                     _rmsprop_step.__doc__ or "")
LARS_UPDATE = _update_op("optim_lars_update", 1, StepRule(_lars), _lars.__doc__ or "")
LAMB_UPDATE = _update_op("optim_lamb_update", 4, StepRule(_lamb), _lamb.__doc__ or "")

# SGD fused with the matmul that produces its gradient ------------------------------
def fused_sgd_available(registries: Any, backend: Any, dtype: np.dtype) -> bool:
    """Whether ``optim_sgd_matmul_update`` runs as one call on ``backend``: its kernel there is an
    override whose ``fuses(dtype)`` says so (``flowjob_optim.cpu``'s BLAS gemm on numpy). The
    record's own kernel (matmul, then the update) would only add a node, so nothing is fused then."""
    if registries is None or backend is None or SGD_MATMUL_UPDATE.name not in registries.ops:
        return False
    fuses = getattr(registries.kernels.lookup(registries.ops[SGD_MATMUL_UPDATE.name], backend.tag), "fuses", None)
    return fuses is not None and bool(fuses(dtype))


def _sgd_matmul_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    if len(inputs) != 4:
        raise ShapeError(f"expected 4 inputs (variable, a, b, learning rate), got {len(inputs)}")
    w, a, b, lr = inputs
    if w.dtype.kind != "f" or a.dtype != w.dtype or b.dtype != w.dtype:
        raise ShapeError(f"variable and matmul operands must share one floating dtype, got {w}, {a}, {b}")
    if len(a.shape) != 2 or len(b.shape) != 2 or len(w.shape) != 2:
        raise ShapeError(f"the fused update takes 2-d operands, got {a.shape} and {b.shape} for {w.shape}")
    ta, tb = bool(attrs.get("transpose_a")), bool(attrs.get("transpose_b"))
    m, k = (a.shape[1], a.shape[0]) if ta else a.shape
    k2, n = (b.shape[1], b.shape[0]) if tb else b.shape
    if k != k2 or (m, n) != w.shape:
        raise ShapeError(f"op(a) @ op(b) of {a.shape}, {b.shape} (transposes {ta}, {tb}) does not give {w.shape}")
    if lr.shape != (1,) or lr.dtype.kind != "f":
        raise ShapeError(f"learning rate must be floating of shape (1,), got {lr}")
    return []


def _sgd_matmul_kernel(ctx: KernelContext) -> Any:
    """``w -= lr * grad_scale * op(a) @ op(b)``: ``matmul`` into a gradient buffer, then the update (the
    reference; on numpy the cpu override ``flowjob_optim.cpu`` is one BLAS ``?gemm``)."""
    xp = ctx.xp
    spec = ctx.inputs[0]
    ta, tb = bool(ctx.attrs.get("transpose_a")), bool(ctx.attrs.get("transpose_b"))
    s = spec.dtype.type(ctx.attrs.get("grad_scale", 1.0))
    grad = ctx.scratch(spec.shape, spec.dtype)

    def run_generic(w: Any, a: Any, b: Any, lr: Any) -> None:
        xp.matmul(a.T if ta else a, b.T if tb else b, out=grad)
        xp.multiply(grad, lr[0] * s, out=grad)
        xp.subtract(w, grad, out=w)

    return run_generic


def _sgd_matmul_flops(inputs: Sequence[BlobSpec], outputs: Sequence[BlobSpec], attrs: dict) -> float:
    """The GEMM's multiply-adds, twice (``OpDef.compute.flops``): one inner sum per element of the variable."""
    w, a = inputs[0], inputs[1]
    inner = a.shape[-2] if attrs.get("transpose_a") else a.shape[-1]
    return 2.0 * float(np.prod(w.shape, dtype=np.float64)) * inner


SGD_MATMUL_UPDATE = OpDef(
    "optim_sgd_matmul_update", _sgd_matmul_infer, kernel=_sgd_matmul_kernel, not_differentiable=True,
    doc="inputs (variable, a, b, learning rate): w -= lr * grad_scale * op(a) @ op(b); the plain SGD update "
        "fused with the matmul that produced its gradient (``flowjob_optim.fusion``)",
    compute=Compute(flops=_sgd_matmul_flops), effects=Effects(mutates=(0,)),
    legacy=LegacyFace(name_prefix="ModelUpdate"))

OPS = (LEARNING_RATE, CLIP_FACTOR, STEP_INCREMENT, SGD_UPDATE, MOMENTUM_UPDATE, ADAM_UPDATE, ADAM_BC_UPDATE,
       RMSPROP_UPDATE, RMSPROP_CENTERED_UPDATE, LARS_UPDATE, LAMB_UPDATE, SGD_MATMUL_UPDATE)

UPDATE_OPS = {op.name: op for op in OPS if op.name.startswith("optim_") and op.effects.mutates and op.name not in (
    STEP_INCREMENT.name, SGD_MATMUL_UPDATE.name)}
"""The ops built by ``_update_op``: inputs ``(variable, *slots, gradient, lr[, clip])``; they take ``grad_scale``."""
