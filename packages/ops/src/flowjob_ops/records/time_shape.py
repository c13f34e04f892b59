"""Legacy time-shape ops ``repeat``/``acc`` and ``unpack``/``pack`` (v0.3/v0.4 ``flow.repeat``, ``flow.acc``,
``flow.unpack``, ``flow.pack``).

Legacy ran the ops downstream of ``repeat(x, n)`` n times per call (its "time shape" gained an axis
of n) and ``acc(y, n)`` summed n ticks of ``y`` into one. Here a value's ticks are a graph fact:
the ``repeat-acc`` pass (``flowjob_ops.passes.repeat_acc``) counts them after autodiff and unrolls each
repeated region, so the planner only sees plain nodes. The records therefore describe one tick:
``repeat`` is its input (a view), ``acc`` of one tick is a copy of it. Their gradients are each
other's, as in legacy: the gradient of a repeated value is accumulated, that of an accumulated one
is repeated. ``unpack(x, n)`` cuts x along axis 0 into n ticks of ``shape[0] / n`` rows and
``pack(y, n)`` joins n consecutive ticks back along axis 0; their gradients too are each other's.
"""
from __future__ import annotations

import numbers
from typing import Any, Sequence

from flowjob_core import BlobSpec, Compute, Effects, GradContext, KernelContext, OpDef, ShapeError


def _count(attrs: dict, key: str) -> int:
    value = attrs.get(key)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ShapeError(f"{key} must be an int >= 1, got {value!r}")
    return int(value)


def _repeat_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    _count(attrs, "repeat_num")
    return [inputs[0]]


def _acc_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    _count(attrs, "max_acc_num")
    return [inputs[0]]


def _unpack_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    n = _count(attrs, "unpack_num")
    (x,) = inputs
    if not x.shape:
        raise ShapeError("unpack needs an input of rank >= 1 (it cuts axis 0)")
    if x.shape[0] % n:
        raise ShapeError(f"unpack_num={n} does not divide axis 0 of the input {x.shape}: every tick needs the "
                         f"same number of rows")
    part = attrs.get("part", 0)
    if isinstance(part, bool) or not isinstance(part, numbers.Integral) or not 0 <= part < n:
        raise ShapeError(f"unpack part must be an int in [0, {n}), got {part!r}")
    return [BlobSpec((x.shape[0] // n,) + tuple(x.shape[1:]), x.dtype)]


def _pack_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    n = _count(attrs, "pack_num")
    (x,) = inputs
    if not x.shape:
        raise ShapeError("pack needs an input of rank >= 1 (it joins ticks along axis 0)")
    return [BlobSpec((x.shape[0] * n,) + tuple(x.shape[1:]), x.dtype)]


def _repeat_kernel(ctx: KernelContext) -> Any:
    # every tick reads the same value: the output is the input itself (the record is a view)
    return lambda x: x


def _acc_kernel(ctx: KernelContext) -> Any:
    # the sum of one tick (the pass turns an acc of n > 1 ticks into an add_n of the n tick values)
    xp, out = ctx.xp, ctx.out(0)

    def run(x: Any) -> Any:
        xp.copyto(out, x)
        return out

    return run


def _unpack_kernel(ctx: KernelContext) -> Any:
    # the rows of one tick, as a view: "part" is the tick within unpack_num (the pass sets it per clone)
    rows = ctx.inputs[0].shape[0] // int(ctx.attrs["unpack_num"])
    start = int(ctx.attrs.get("part", 0)) * rows
    return lambda x: x[start:start + rows]


def _pack_kernel(ctx: KernelContext) -> Any:
    # one tick packed (pack_num 1) is a copy; the pass turns a pack of n > 1 ticks into a concat of them
    xp, out = ctx.xp, ctx.out(0)

    def run(x: Any) -> Any:
        xp.copyto(out, x)
        return out

    return run


def _repeat_grad(ctx: GradContext) -> list[Any]:
    return [ctx.apply("acc", [ctx.dy], {"max_acc_num": ctx.attrs["repeat_num"]})]


def _acc_grad(ctx: GradContext) -> list[Any]:
    return [ctx.apply("repeat", [ctx.dy], {"repeat_num": ctx.attrs["max_acc_num"]})]


def _unpack_grad(ctx: GradContext) -> list[Any]:
    return [ctx.apply("pack", [ctx.dy], {"pack_num": ctx.attrs["unpack_num"]})]


def _pack_grad(ctx: GradContext) -> list[Any]:
    return [ctx.apply("unpack", [ctx.dy], {"unpack_num": ctx.attrs["pack_num"]})]


REPEAT = OpDef("repeat", _repeat_infer, kernel=_repeat_kernel, grad=_repeat_grad,
               doc="the input, once per tick for repeat_num ticks of each input tick (unrolled by the repeat-acc pass)",
               compute=Compute(amp="clear"), effects=Effects(view=True))
ACC = OpDef("acc", _acc_infer, kernel=_acc_kernel, grad=_acc_grad,
            doc="the sum of each max_acc_num consecutive ticks of the input (unrolled by the repeat-acc pass)",
            compute=Compute(amp="gray"))

UNPACK = OpDef("unpack", _unpack_infer, kernel=_unpack_kernel, grad=_unpack_grad,
               doc="rows [part*m, (part+1)*m) of the input, m = shape[0] / unpack_num: one of unpack_num ticks per "
                   "input tick (unrolled by the repeat-acc pass)", compute=Compute(amp="clear"),
               effects=Effects(view=True))
PACK = OpDef("pack", _pack_infer, kernel=_pack_kernel, grad=_pack_grad,
             doc="pack_num consecutive ticks of the input joined along axis 0 (unrolled by the repeat-acc pass)",
             compute=Compute(amp="clear"))

OPS = (REPEAT, ACC, UNPACK, PACK)
