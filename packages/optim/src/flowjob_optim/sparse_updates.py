"""Indexed-slices (sparse) updates: legacy ``func_config.indexed_slices_optimizer_conf``.

Layout, as legacy's ``IndexedSlicesOptimizerConf``:
``{"enable": True, "include_op_names": {"op_name": ["embedding", ...]}}`` (``enable`` defaults to
true; the names are variable op names, i.e. the names given to ``flow.get_variable``).

For a listed variable whose gradient is one ``gather`` along axis 0 (an embedding lookup), legacy's
``IndexedSlicesOptimizerRewritePass`` replaced the dense update by ``indexed_slices_{sgd,momentum,adam}
_update``: the looked-up rows' gradients, duplicates summed, scaled by the loss-elements factor,
update those rows of the variable and of its slots; other rows and their slots keep their values
(Adam's moments of an untouched row do not decay: the "lazy" Adam). Adam's bias-correction scalars
advance every step, as in the dense update. Weight decay (SGDW, AdamW) decays the looked-up rows only,
as legacy's indexed-slices kernels did (they ran the dense update's functor on those rows). As legacy's
pass, the match goes through ``scalar_mul`` nodes between the gather's gradient and the update (a
table scaled before the lookup, ``flow.gather(table * 2.0, ids)``): their factors scale the values.

Legacy silently kept the dense update where its pass did not match (another optimizer, an L1/L2
regularizer, clipping, a variable also read elsewhere, a name the job lacks). flowjob refuses
the settings with a ``ConfigError`` naming the job, the variable and the reason, so a listed variable
never trains differently from what the program asked without a word; another optimizer (RMSProp, LAMB,
LARS) and a gradient that is not one gather's (the variable also read elsewhere) keep the dense update,
and a name the job lacks is ignored, each with a warning, because legacy programs rely on them (the v0.4
Wide&Deep benchmark's wdl_train_eval_test.py lists its embeddings and trains with LARS; its
hybrid-embedding script lists tables it does not have). LazyAdam
(Adam with bias correction here) gets the sparse Adam update: sparse rows are what "lazy" stands for.
"""
from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from flowjob_core import BlobSpec, ConfigError, Effects, Job, KernelContext, LegacyFace, OpDef, ShapeError

from flowjob_optim.update_ops import ADAM_BC_UPDATE, ADAM_UPDATE, MOMENTUM_UPDATE, SGD_UPDATE

OPTION = "indexed_slices_optimizer_conf"

SparseStep = Callable[[Any, Sequence[Any], Any, Any, Any], None]
"""``step(w, slots, rows, g, lr)``: update ``rows`` (unique, 1-d) of ``w`` and its row-shaped slots from
``g`` (one summed gradient row per entry of ``rows``); ``lr`` is a scalar."""


def requested(job: Job) -> list[str]:
    """The variable names the job's config lists (none when the option is unset or disabled)."""
    conf = job.config.get(OPTION)
    if not conf or not conf.get("enable", True):
        return []
    return list(dict.fromkeys(conf["include_op_names"]["op_name"]))


def refuse(job: Job, name: str, why: str) -> ConfigError:
    return ConfigError(f"function_config.{OPTION} of job {job.name!r}, variable {name!r}: {why}")


def gathered_gradient(job: Job, ctx: Any, name: str) -> tuple[str, str, float] | None:
    """``(indices, values, scale)`` of a listed variable: the lbns its one ``gather`` along axis 0 took
    and got as output gradient, and the factor autodiff scales its gradient by (1/loss elements)
    (``ctx``: the pass context holding autodiff's gradients). ``None``, with a warning naming the variable,
    when its gradient is not one such gather's: legacy's rewrite did not match it and the variable was
    updated densely."""
    vdef = job.variables.get(name)
    if vdef is None:
        raise refuse(job, name, f"no variable of that name in this job (its variables: {sorted(job.variables)})")
    raw = ctx.grads.get(vdef.lbn)
    if raw is None or name not in ctx.variable_grads:
        raise refuse(job, name, "it gets no gradient (not trainable, or the loss does not depend on it)")
    producers = {out: node for node in job.nodes for out in node.outputs}
    node = producers[raw]
    factor = 1.0
    while node.op == "scalar_mul" and node.inputs[0] in producers:  # legacy's pass applied them to the values
        factor *= float(node.attrs["scalar"])
        node = producers[node.inputs[0]]
    axis = node.attrs.get("axis", 0)
    if node.op != "gather_grad" or axis not in (0, -len(vdef.spec.shape)):
        what = node.op if node.op != "gather_grad" else f"a gather along axis {axis}"
        warnings.warn(f"{OPTION} of job {job.name!r}, variable {name!r}: a sparse update needs a gradient from "
                      f"one flow.gather along axis 0 (an embedding lookup) and nothing else, this one comes from "
                      f"{what} ({node.name!r}); the variable is updated densely, as legacy did", stacklevel=4)
        return None
    indices, values = node.inputs
    scaled = producers.get(ctx.variable_grads[name])
    scale = factor
    if scaled is not None and scaled.op == "scalar_mul" and scaled.inputs == (raw,):
        scale *= float(scaled.attrs["scalar"])
    return indices, values, scale


def listed_gradients(job: Job, ctx: Any, optimizer: Any,
                     accumulation_steps: int) -> dict[str, tuple[str, str, float]]:
    """``{variable: gathered_gradient(...)}`` for the listed variables; errors name what does not fit."""
    listed = requested(job)
    for name in listed:
        if name not in job.variables:
            # legacy's rewrite matched nothing for such a name; the v0.4 hybrid-embedding Wide&Deep script
            # keeps listing its plain script's tables, which it splits into hf_/lf_ ones: warn, go on
            warnings.warn(f"{OPTION} of job {job.name!r}, variable {name!r}: no variable of that name in this "
                          f"job (its variables: {sorted(job.variables)}); the name is ignored", stacklevel=3)
    gathered = {name: gathered_gradient(job, ctx, name) for name in listed if name in job.variables}
    found = {name: slices for name, slices in gathered.items() if slices is not None}
    for name in found:
        if not optimizer.updates(name):
            raise refuse(job, name, "the optimizer does not update it (its variables= list leaves it out)")
        if accumulation_steps > 1:
            raise refuse(job, name, f"sparse updates do not combine with num_gradient_accumulation_steps "
                                    f"({accumulation_steps}); legacy updated accumulated gradients densely")
    return found


def check_update(job: Job, name: str, optimizer: Any, rule_op: str, attrs: dict, clipped: bool) -> str | None:
    """The sparse op for the dense ``rule_op``, ``None`` for a dense update; a ``ConfigError`` for the
    settings that contradict the listing."""
    sparse = SPARSE_OF.get(rule_op)
    if sparse is None:
        # legacy's rewrite left other optimizers' updates dense without a word, and programs rely on it
        # (the v0.4 Wide&Deep benchmark lists its embeddings and trains with LARS): dense, with a warning
        warnings.warn(f"{OPTION} of job {job.name!r}, variable {name!r}: sparse updates exist for SGD (with or "
                      f"without momentum), Adam and LazyAdam; {type(optimizer).__name__} updates it densely, "
                      f"as legacy did", stacklevel=2)
        return None
    if float(attrs.get("l1", 0.0) or 0.0) or float(attrs.get("l2", 0.0) or 0.0):
        raise refuse(job, name, "an L1/L2 regularizer has no sparse update")
    if clipped:
        raise refuse(job, name, "gradient clipping has no sparse update")
    return sparse


# the ops ---------------------------------------------------------------------
def _infer(n_slots: int) -> Callable[[Sequence[BlobSpec], dict], list[BlobSpec]]:
    def infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
        if len(inputs) != n_slots + 4:
            raise ShapeError(f"expected {n_slots + 4} inputs (variable, {n_slots} slot(s), indices, values, "
                             f"learning rate), got {len(inputs)}")
        var, indices, values, lr = inputs[0], *inputs[n_slots + 1:]
        if var.dtype.kind != "f" or not var.shape:
            raise ShapeError(f"only floating variables of rank >= 1 can be trained by rows, this one is {var}")
        for i, spec in enumerate(inputs[1:n_slots + 1]):
            if spec.dtype != var.dtype or spec.shape not in (var.shape, (1,)):
                raise ShapeError(f"slot {i} is {spec}, the variable is {var}")
        if indices.dtype.kind not in "iu":
            raise ShapeError(f"indices must be integers, got {indices.dtype}")
        if values.dtype != var.dtype or values.shape != indices.shape + var.shape[1:]:
            raise ShapeError(f"values {values} must be indices.shape + the variable's row shape "
                             f"{indices.shape + var.shape[1:]} of {var.dtype}")
        if lr.shape != (1,) or lr.dtype.kind != "f":
            raise ShapeError(f"learning rate must be floating of shape (1,), got {lr}")
        return []

    return infer


def _kernel(n_slots: int, rule: Callable[[KernelContext], SparseStep]) -> Callable[[KernelContext], Any]:
    def build(ctx: KernelContext) -> Any:
        xp, var = ctx.xp, ctx.inputs[0]
        n_rows, row_shape = var.shape[0], var.shape[1:]
        scale = var.dtype.type(ctx.attrs.get("scale", 1.0))
        step = rule(ctx)
        end = n_slots + 1

        def run(*args: Any) -> None:
            w, slots = args[0], args[1:end]
            indices, values, lr = args[end:]
            flat = indices.reshape(-1).astype(np.int64)
            flat = xp.where(flat < 0, flat + n_rows, flat)  # gather took negative indices from the end
            # the rows looked up, each once, and their gradients with duplicates summed (legacy's
            # indexed_slices_reduce_sum); the sizes follow the indices, so these are per-call arrays
            rows, inverse = xp.unique(flat, return_inverse=True)
            grad = xp.zeros((rows.shape[0],) + row_shape, dtype=var.dtype)
            xp.add.at(grad, inverse.reshape(-1), values.reshape((-1,) + row_shape))
            if scale != 1:
                xp.multiply(grad, scale, out=grad)
            step(w, slots, rows, grad, lr[0])

        return run

    return build


def _consts(ctx: KernelContext, *names: str) -> list[Any]:
    dt = ctx.inputs[0].dtype.type
    return [dt(ctx.attrs.get(n, 0.0) if n == "weight_decay" else ctx.attrs[n]) for n in names]


def _sgd(ctx: KernelContext) -> SparseStep:
    """``w[r] -= lr * (g + wd * w[r])``."""
    (wd,) = _consts(ctx, "weight_decay")

    def step(w: Any, slots: Sequence[Any], rows: Any, g: Any, lr: Any) -> None:
        w_rows = w[rows]
        w[rows] = w_rows - (g + w_rows * wd) * lr if wd else w_rows - g * lr

    return step


def _momentum(ctx: KernelContext) -> SparseStep:
    """``m[r] = beta * m[r] - lr * g; w[r] += m[r] - lr * wd * w[r]``."""
    beta, wd = _consts(ctx, "beta", "weight_decay")

    def step(w: Any, slots: Sequence[Any], rows: Any, g: Any, lr: Any) -> None:
        (m,) = slots
        m_rows = m[rows] * beta - g * lr
        m[rows] = m_rows
        w_rows = w[rows]
        w[rows] = w_rows + m_rows - w_rows * (lr * wd) if wd else w_rows + m_rows

    return step


def _adam_step(ctx: KernelContext, bias_correction: bool) -> SparseStep:
    """``m[r] = b1 m[r] + (1-b1) g; v[r] = b2 v[r] + (1-b2) g^2; w[r] -= lr_t (m[r] / (sqrt(v[r]) + eps)
    + wd w[r])``,
    ``lr_t`` as the dense Adam (bias correction: ``lr sqrt(1 - b2_t) / (1 - b1_t)``, then ``b_t *= b``)."""
    xp = ctx.xp
    b1, b2, eps, wd = _consts(ctx, "beta1", "beta2", "epsilon", "weight_decay")
    one = ctx.inputs[0].dtype.type(1)
    omb1, omb2 = one - b1, one - b2

    def step(w: Any, slots: Sequence[Any], rows: Any, g: Any, lr: Any) -> None:
        m, v = slots[0], slots[1]
        if bias_correction:
            b1t, b2t = slots[2], slots[3]
            lr = lr * xp.sqrt(one - b2t[0]) / (one - b1t[0])
            xp.multiply(b1t, b1, out=b1t)
            xp.multiply(b2t, b2, out=b2t)
        m_rows = m[rows] * b1 + g * omb1
        v_rows = v[rows] * b2 + g * omb2 * g
        m[rows] = m_rows
        v[rows] = v_rows
        w_rows = w[rows]
        step_rows = m_rows / (xp.sqrt(v_rows) + eps)
        w[rows] = w_rows - (step_rows + w_rows * wd if wd else step_rows) * lr

    return step


def _adam(ctx: KernelContext) -> SparseStep:
    return _adam_step(ctx, bias_correction=False)


def _adam_bias_corrected(ctx: KernelContext) -> SparseStep:
    return _adam_step(ctx, bias_correction=True)


def _sparse_op(name: str, n_slots: int, rule: Callable[[KernelContext], SparseStep], formula: str | None) -> OpDef:
    return OpDef(name, _infer(n_slots), kernel=_kernel(n_slots, rule), not_differentiable=True,
                 doc=f"inputs (variable, {n_slots} slot(s), indices, values, learning rate): "
                     f"{(formula or '').strip()} on the looked-up rows r only, duplicates summed, values "
                     f"times the attribute scale", effects=Effects(mutates=tuple(range(n_slots + 1))),
                 legacy=LegacyFace(name_prefix="IndexedSlicesModelUpdate"))


SGD = _sparse_op("optim_indexed_slices_sgd_update", 0, _sgd, _sgd.__doc__)
MOMENTUM = _sparse_op("optim_indexed_slices_momentum_update", 1, _momentum, _momentum.__doc__)
ADAM = _sparse_op("optim_indexed_slices_adam_update", 2, _adam, _adam_step.__doc__)
ADAM_BC = _sparse_op("optim_indexed_slices_adam_bias_corrected_update", 4, _adam_bias_corrected,
                     _adam_step.__doc__)

OPS = (SGD, MOMENTUM, ADAM, ADAM_BC)

SPARSE_OF = {
    SGD_UPDATE.name: SGD.name,
    MOMENTUM_UPDATE.name: MOMENTUM.name,
    ADAM_UPDATE.name: ADAM.name,
    ADAM_BC_UPDATE.name: ADAM_BC.name,
}
"""The dense update op of a rule -> its indexed-slices counterpart (legacy had these three)."""
