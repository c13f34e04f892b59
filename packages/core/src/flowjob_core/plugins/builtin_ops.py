"""Ops core needs for its own passes: inputs, variables, returns, fetches and gradient plumbing.

Registered through ``flowjob_add_ops`` like any plugin's ops.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from flowjob_core.errors import ShapeError
from flowjob_core.ir.job import BlobSpec
from flowjob_core.ir.layout import PARTIAL_SUM, Signature, elementwise_signatures, split
from flowjob_core.ir.opdef import Compute, Effects, Elementwise, KernelContext, LegacyFace, OpDef, ShapeTraits
from flowjob_core.plugins.host import hookimpl


def _same(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    return [inputs[0]]


def _from_attrs(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    return [BlobSpec(attrs["shape"], attrs["dtype"])]


# sources ------------------------------------------------------------------
def _variable_kernel(ctx: KernelContext) -> Any:
    if ctx.variable is None:
        raise ValueError(f"node {ctx.node_name!r}: a variable kernel needs the session's variable store")
    array = ctx.variable(ctx.attrs["name"])  # the session's array itself: updates happen in place
    return lambda: array


INPUT = OpDef("input", _from_attrs, kernel=None, not_differentiable=True,
              doc="A job placeholder; the planner feeds it.", legacy=LegacyFace(output_names=("out",)))
VARIABLE = OpDef("variable", _from_attrs, kernel=_variable_kernel, not_differentiable=True,
                 doc="A session variable, read by reference.", legacy=LegacyFace(output_names=("out",)))


# results ------------------------------------------------------------------
def _fresh_copy_kernel(ctx: KernelContext) -> Any:
    xp = ctx.xp

    def run(x: Any) -> Any:
        if isinstance(x, list):  # a tensor list (flowjob_core.plan.mirrored.TensorList): each item copied
            return type(x)(xp.array(item, copy=True) for item in x)
        return xp.array(x, copy=True)  # a fresh array: the caller may keep it while the next step runs

    return run


RETURN = OpDef("return", _same, kernel=_fresh_copy_kernel, not_differentiable=True,
               doc="Copies a returned value out of the step.", effects=Effects(effect=True))
FETCH = OpDef("fetch", _same, kernel=_fresh_copy_kernel, not_differentiable=True,
              doc="Copies a watched value out of the step.")


# gradient plumbing --------------------------------------------------------
def _ones_like_kernel(ctx: KernelContext) -> Any:
    spec = ctx.outputs[0]
    ones = ctx.xp.ones(spec.shape, dtype=spec.dtype)  # constant: kernels never write their inputs
    return lambda x: ones


def _constant_grad(ctx: Any) -> list[Any]:
    return [None]  # the value does not depend on the input's values: no gradient flows


ONES_LIKE = OpDef("ones_like", _same, kernel=_ones_like_kernel, grad=_constant_grad,
                  doc="Ones of the input's shape (also the loss gradient seed).", compute=Compute(amp="black"))


def _add_n_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    if not inputs:
        raise ShapeError("add_n needs at least one input")
    for spec in inputs[1:]:
        if spec != inputs[0]:
            raise ShapeError(f"add_n inputs differ: {inputs[0]} and {spec}")
    return [inputs[0]]


def _add_n_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)

    def run(first: Any, *rest: Any) -> Any:
        xp.add(first, rest[0], out=out)
        for value in rest[1:]:
            xp.add(out, value, out=out)
        return out

    if len(ctx.inputs) == 1:
        return lambda x: xp.copyto(out, x) or out
    return run


def _add_n_grad(ctx: Any) -> list[Any]:
    return [ctx.dy] * len(ctx.inputs)


def _add_n_layouts(inputs: Sequence[BlobSpec], attrs: dict) -> list[Signature]:
    """Split alike along any axis; partial sums add up to partial sums."""
    return elementwise_signatures(inputs, inputs[0]) + [
        Signature((PARTIAL_SUM,) * len(inputs), (PARTIAL_SUM,))]


ADD_N = OpDef("add_n", _add_n_infer, kernel=_add_n_kernel, grad=_add_n_grad,
              doc="Sum of same-shaped inputs (gradient accumulation).",
              compute=Compute(layouts=_add_n_layouts, amp="gray"))


def _unbroadcast_axes(shape: tuple[int, ...], target: tuple[int, ...]) -> tuple[int, ...]:
    lead = len(shape) - len(target)
    if lead < 0:
        raise ShapeError(f"cannot reduce {shape} to the larger shape {target}")
    axes = list(range(lead))
    for i, t in enumerate(target):
        if t == 1 and shape[lead + i] != 1:
            axes.append(lead + i)
        elif t != shape[lead + i] and t != 1:
            raise ShapeError(f"shape {shape} does not broadcast from {target}")
    return tuple(axes)


def _unbroadcast_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    _unbroadcast_axes(inputs[0].shape, tuple(attrs["shape"]))
    return [BlobSpec(attrs["shape"], inputs[0].dtype)]


def _unbroadcast_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    target = ctx.outputs[0].shape
    axes = _unbroadcast_axes(ctx.inputs[0].shape, target)
    lead = len(ctx.inputs[0].shape) - len(target)
    kept = {a - lead for a in axes if a >= lead}
    # summing over ``axes`` drops the size-1 target dims too; write through a view without them
    squeezed = out.reshape(tuple(d for i, d in enumerate(target) if i not in kept))

    def run(x: Any) -> Any:
        xp.sum(x, axis=axes, out=squeezed)
        return out

    return run


def _unbroadcast_grad(ctx: Any) -> list[Any]:
    return [ctx.apply("broadcast_to", [ctx.dy], {"shape": ctx.inputs[0].shape})]


def _unbroadcast_layouts(inputs: Sequence[BlobSpec], attrs: dict) -> list[Signature]:
    """A split axis summed away (or to size 1) gives partial sums; one the target keeps stays split (the target
    ``shape`` then that of this rank's piece); partial sums stay so."""
    (x,) = inputs
    target = tuple(attrs["shape"])
    lead = len(x.shape) - len(target)
    found = []
    for k, size in enumerate(x.shape):
        if size == 1:
            continue
        t = k - lead
        if t < 0 or target[t] == 1:
            found.append(Signature((split(k),), (PARTIAL_SUM,)))
        else:
            found.append(Signature((split(k),), (split(t),), shape_attrs=(("shape", 0),)))
    return found + [Signature((PARTIAL_SUM,), (PARTIAL_SUM,))]


UNBROADCAST = OpDef("unbroadcast", _unbroadcast_infer, kernel=_unbroadcast_kernel, grad=_unbroadcast_grad,
                    doc="Sums a broadcast gradient back to its input's shape.",
                    compute=Compute(layouts=_unbroadcast_layouts, amp="black"), shape=ShapeTraits(fixed_shape=True))


def _broadcast_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    shape = tuple(attrs["shape"])
    try:
        reached = np.broadcast_shapes(inputs[0].shape, shape)
    except ValueError:
        reached = None
    if reached != shape:  # the input must broadcast to the target itself, not to something larger
        raise ShapeError(f"cannot broadcast {inputs[0].shape} to {shape}")
    return [BlobSpec(shape, inputs[0].dtype)]


def _broadcast_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)

    def run(x: Any) -> Any:
        xp.copyto(out, x)  # copyto broadcasts
        return out

    return run


def _broadcast_grad(ctx: Any) -> list[Any]:
    return [ctx.apply("unbroadcast", [ctx.dy], {"shape": ctx.inputs[0].shape})]


BROADCAST_TO = OpDef("broadcast_to", _broadcast_infer, kernel=_broadcast_kernel, grad=_broadcast_grad,
                     doc="Broadcasts to a fixed shape.", compute=Compute(amp="black"),
                     shape=ShapeTraits(fixed_shape=True))


def _scalar_mul_grad(ctx: Any) -> list[Any]:
    return [ctx.apply("scalar_mul", [ctx.dy], {"scalar": ctx.attrs["scalar"]})]


def _scalar_mul_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    scalar = attrs["scalar"]
    if inputs[0].dtype.kind != "f" and not float(scalar).is_integer():
        raise ShapeError(
            f"scaling a {inputs[0].dtype} blob by {scalar!r} would truncate; cast it to a float type first")
    return [inputs[0]]


SCALAR_MUL = OpDef("scalar_mul", _scalar_mul_infer, grad=_scalar_mul_grad,
                   elementwise=Elementwise("multiply", scalar="scalar"), doc="Multiplies by a Python number.",
                   compute=Compute(amp="gray"))

def _scale_by_loss_count_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)

    def run(grad: Any, *losses: Any) -> Any:
        # the losses' element counts as this step ran them (their rows may be the data's): sizes, never values
        xp.divide(grad, max(1, sum(int(loss.size) for loss in losses)), out=out)
        return out

    return run


SCALE_BY_LOSS_COUNT = OpDef(
    "scale_by_loss_count", _same, kernel=_scale_by_loss_count_kernel, not_differentiable=True,
    doc="A variable's gradient divided by the element count of the losses at this step (at least 1): legacy's "
        "scaling by the step's loss instances where the data decide a loss's rows.")

CORE_OPS = (INPUT, VARIABLE, RETURN, FETCH, ONES_LIKE, ADD_N, UNBROADCAST, BROADCAST_TO, SCALAR_MUL,
            SCALE_BY_LOSS_COUNT)


@hookimpl
def flowjob_add_ops(registry: Any) -> None:
    for op in CORE_OPS:
        registry.add(op)
