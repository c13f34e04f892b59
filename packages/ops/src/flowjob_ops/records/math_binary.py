"""Binary math beyond the four arithmetic ops, and logical ops: legacy ``flow.math.mod``, ``floordiv``,
``atan2``, ``pow`` of two blobs, ``xdivy``, ``xlogy``, ``logical_and`` & co.

All broadcast like numpy (legacy's ``atan2``/``pow``/``floordiv``/``xdivy``/``xlogy`` wanted equal
shapes; equal shapes give the same values here). Legacy facts kept:

- ``mod`` is a floor modulo (the result takes the divisor's sign, as Python's ``%``), for integer
  and floating blobs; legacy registered no gradient for it, so it carries the not-differentiable mark.
- ``floordiv`` is ``floor(x / y)`` on floating blobs; legacy's gradient is zero for both inputs.
- ``xdivy``/``xlogy`` are 0 wherever x == 0 (whatever y is), and so are their x-gradients; an
  x-gradient is also 0 where dy is 0 (no 0 * inf).
- ``pow``'s gradient with respect to the exponent is 0 where the base is not positive.
- logical ops give int8 (1 true, 0 false) like the comparisons; any nonzero element is true.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from flowjob_core import BlobSpec, Compute, Elementwise, GradContext, KernelContext, LegacyFace, OpDef, ShapeError

from flowjob_ops.records.common import broadcast_shape, require_floating, same_dtype

LOGICAL_DTYPE = np.dtype(np.int8)


def _binary_infer(op: str, kinds: str) -> Callable[[Sequence[BlobSpec], dict], list[BlobSpec]]:
    """Two blobs of one dtype whose kind is in ``kinds`` ('f' floating, 'iu' integers); the result
    has their dtype and the broadcast shape."""

    def infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
        dtype = same_dtype(inputs, op)
        if kinds == "f":
            require_floating(inputs, op)
        elif dtype.kind not in kinds:
            raise ShapeError(f"{op} needs numeric inputs, got {dtype}")
        return [BlobSpec(broadcast_shape(inputs[0].shape, inputs[1].shape, f"{op} operands"), dtype)]

    return infer


def _logical_infer(op: str) -> Callable[[Sequence[BlobSpec], dict], list[BlobSpec]]:
    def infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
        dtype = same_dtype(inputs, op)
        if dtype.kind not in "fiub":
            raise ShapeError(f"{op} needs numeric or bool inputs, got {dtype}")
        shape = inputs[0].shape
        if len(inputs) == 2:
            shape = broadcast_shape(inputs[0].shape, inputs[1].shape, f"{op} operands")
        return [BlobSpec(shape, LOGICAL_DTYPE)]

    return infer


# kernels that are more than one ufunc call --------------------------------------------
def _floordiv_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)

    def run(x: Any, y: Any) -> Any:
        # floor(x / y) as legacy computes it; numpy's floor_divide rounds differently near integers
        # (1.0 // 0.1 is 9.0 there, floor(1.0 / 0.1) is 10.0)
        xp.divide(x, y, out=out)
        return xp.floor(out, out=out)

    return run


def _zero_where_x_is_zero(ctx: KernelContext) -> Callable[[Any], Any]:
    """``out[x == 0] = 0`` with a mask buffer of x's shape (it broadcasts to the output)."""
    xp, out = ctx.xp, ctx.out(0)
    mask = ctx.scratch(ctx.inputs[0].shape, dtype=bool)
    zero = ctx.outputs[0].dtype.type(0)

    def fix(x: Any) -> Any:
        xp.equal(x, zero, out=mask)
        xp.copyto(out, zero, where=mask)
        return out

    return fix


def _xdivy_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    fix = _zero_where_x_is_zero(ctx)

    def run(x: Any, y: Any) -> Any:
        with np.errstate(invalid="ignore"):  # 0 / 0 where x == 0: overwritten with 0 next
            xp.divide(x, y, out=out)
        return fix(x)

    return run


def _xlogy_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    log_y = ctx.scratch(ctx.inputs[1].shape, dtype=ctx.inputs[1].dtype)
    fix = _zero_where_x_is_zero(ctx)

    def run(x: Any, y: Any) -> Any:
        # log(0) and 0 * -inf where x == 0 are overwritten with 0 next; elsewhere -inf / nan stand
        with np.errstate(divide="ignore", invalid="ignore"):
            xp.log(y, out=log_y)
            xp.multiply(x, log_y, out=out)
        return fix(x)

    return run


# gradient rules (graph nodes) -----------------------------------------------------------
def _nonzero_mask(ctx: GradContext, x: Any) -> Any:
    """1 where x != 0, else 0, in x's dtype."""
    return ctx.apply("cast", [ctx.apply("not_equal", [x, ctx.apply("zeros_like", [x])])], {"dtype": x.dtype})


def _zero_gradients(ctx: GradContext) -> list[Any]:
    """Piecewise constant (floordiv): legacy's rule gives both inputs a zero gradient, which reaches them (a
    watch_diff of an input sees zeros, as in legacy, not "no gradient")."""
    return [ctx.apply("zeros_like", [x]) if need else None for x, need in zip(ctx.inputs, ctx.needs)]


def _atan2_grad(ctx: GradContext) -> list[Any]:
    # d atan2(x, y) = (y dx - x dy) / (x^2 + y^2)
    x, y = ctx.inputs
    radius2 = ctx.apply("add", [ctx.apply("square", [x]), ctx.apply("square", [y])])
    dx = ctx.apply("divide", [ctx.apply("multiply", [ctx.dy, y]), radius2]) if ctx.needs[0] else None
    dy = None
    if ctx.needs[1]:
        dy = ctx.apply("negative", [ctx.apply("divide", [ctx.apply("multiply", [ctx.dy, x]), radius2])])
    return [dx, dy]


def _pow_grad(ctx: GradContext) -> list[Any]:
    x, y = ctx.inputs
    z = ctx.outputs[0]
    dx = dy = None
    if ctx.needs[0]:  # y * x^(y-1): a power of x, not z / x, so x == 0 stays finite
        slope = ctx.apply("multiply", [y, ctx.apply("pow", [x, ctx.apply("scalar_add", [y], {"scalar": -1})])])
        dx = ctx.apply("multiply", [ctx.dy, slope])
    if ctx.needs[1]:  # z * log(x) where x > 0, else 0 (legacy); log of 1 elsewhere keeps it finite
        positive = ctx.apply("greater", [x, ctx.apply("zeros_like", [x])])
        safe_x = ctx.apply("where", [positive, x, ctx.apply("ones_like", [x])])
        full = ctx.apply("multiply", [ctx.dy, ctx.apply("multiply", [z, ctx.apply("log", [safe_x])])])
        dy = ctx.apply("where", [positive, full, ctx.apply("zeros_like", [full])])
    return [dx, dy]


def _xdivy_grad(ctx: GradContext) -> list[Any]:
    x, y = ctx.inputs
    dx = dy = None
    if ctx.needs[0]:  # dy / y, 0 where x == 0 or dy == 0: xdivy of the masked dy
        dx = ctx.apply("xdivy", [ctx.apply("multiply", [ctx.dy, _nonzero_mask(ctx, x)]), y])
    if ctx.needs[1]:  # -x / y^2, 0 where x == 0
        dy = ctx.apply("multiply", [ctx.dy, ctx.apply("negative", [ctx.apply("xdivy", [x, ctx.apply("square", [y])])])])
    return [dx, dy]


def _xlogy_grad(ctx: GradContext) -> list[Any]:
    x, y = ctx.inputs
    dx = dy = None
    if ctx.needs[0]:  # dy * log(y), 0 where x == 0 or dy == 0: xlogy of the masked dy
        dx = ctx.apply("xlogy", [ctx.apply("multiply", [ctx.dy, _nonzero_mask(ctx, x)]), y])
    if ctx.needs[1]:  # x / y, 0 where x == 0
        dy = ctx.apply("multiply", [ctx.dy, ctx.apply("xdivy", [x, y])])
    return [dx, dy]


MOD = OpDef("mod", _binary_infer("mod", "fiu"), not_differentiable=True, elementwise=Elementwise("remainder", arity=2),
            doc="floor modulo with broadcasting: x - floor(x / y) * y, the sign of y (Python's %)",
            compute=Compute(amp="black"), legacy=LegacyFace(name_prefix="broadcast_floor_mod"))
FLOORDIV = OpDef("floordiv", _binary_infer("floordiv", "f"), kernel=_floordiv_kernel, grad=_zero_gradients,
                 doc="floor(x / y) with broadcasting (floating); zero gradient", compute=Compute(amp="black"),
                 legacy=LegacyFace(name_prefix="floordiv"))
ATAN2 = OpDef("atan2", _binary_infer("atan2", "f"), grad=_atan2_grad, elementwise=Elementwise("arctan2", arity=2),
              doc="the angle of (y, x): arctan(x / y) by quadrant", compute=Compute(amp="black"),
              legacy=LegacyFace(name_prefix="atan2"))
POW = OpDef("pow", _binary_infer("pow", "f"), grad=_pow_grad, elementwise=Elementwise("power", arity=2),
            doc="x ** y, both blobs, with broadcasting (floating)", compute=Compute(amp="black"))
XDIVY = OpDef("xdivy", _binary_infer("xdivy", "f"), kernel=_xdivy_kernel, grad=_xdivy_grad,
              doc="x / y, and 0 where x == 0 (floating, broadcasting)", compute=Compute(amp="black"),
              legacy=LegacyFace(name_prefix="xdivy"))
XLOGY = OpDef("xlogy", _binary_infer("xlogy", "f"), kernel=_xlogy_kernel, grad=_xlogy_grad,
              doc="x * log(y), and 0 where x == 0 (floating, broadcasting)", compute=Compute(amp="black"),
              legacy=LegacyFace(name_prefix="xlogy"))


def _logical(op: str, ufunc: str, arity: int, prefix: str, formula: str) -> OpDef:
    # the ufunc writes its bool result into the int8 output buffer (a safe cast), as the comparisons do
    return OpDef(op, _logical_infer(op), not_differentiable=True, elementwise=Elementwise(ufunc, arity=arity),
                 doc=f"{formula}, as int8 (1 or 0); nonzero is true", compute=Compute(amp="black"),
                 legacy=LegacyFace(name_prefix=prefix))


LOGICAL_AND = _logical("logical_and", "logical_and", 2, "broadcast_logical_and",
                       "x and y, elementwise with broadcasting")
LOGICAL_OR = _logical("logical_or", "logical_or", 2, "broadcast_logical_or", "x or y, elementwise with broadcasting")
LOGICAL_XOR = _logical("logical_xor", "logical_xor", 2, "broadcast_logical_xor",
                       "x xor y, elementwise with broadcasting")
LOGICAL_NOT = _logical("logical_not", "logical_not", 1, "logical_not", "not x, elementwise")

OPS = (MOD, FLOORDIV, ATAN2, POW, XDIVY, XLOGY, LOGICAL_AND, LOGICAL_OR, LOGICAL_XOR, LOGICAL_NOT)
