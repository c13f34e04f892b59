"""Activations: relu, sigmoid, tanh, gelu, the legacy piecewise and exponential ones (leaky_relu,
hardtanh, relu6, hardsigmoid, hardswish, elu, selu), mish and swish, and their fused gradient ops.

The kernels here are the whole-array math; on the cpu backend ``relu_grad``, ``gelu`` and ``gelu_grad`` run
block by block over the host threads (``flowjob_ops.overrides.cpu.activations_in_blocks``)."""
from __future__ import annotations

import math
import numbers
from typing import Any, Sequence

from flowjob_core import BlobSpec, Compute, Elementwise, GradContext, KernelContext, LegacyFace, OpDef, ShapeError

from flowjob_ops.records.common import grad_like_second, require_floating, unary_float
from flowjob_ops.kernels.normal_cdf import NormalCdf
from flowjob_ops import layout_rules


# relu ---------------------------------------------------------------------
def _relu_grad(ctx: GradContext) -> list[Any]:
    # from the output: y > 0 exactly where x > 0, and y is often kept alive anyway
    return [ctx.apply("relu_grad", [ctx.outputs[0], ctx.dy])]


def _relu_grad_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    mask = ctx.scratch(ctx.outputs[0].shape, dtype=bool)  # a per-step bool temporary would be mmap'd for conv maps

    def run(y: Any, dy: Any) -> Any:
        xp.greater(y, 0, out=mask)
        return xp.multiply(dy, mask, out=out)

    return run


RELU = OpDef("relu", unary_float, grad=_relu_grad, elementwise=Elementwise("maximum", fixed=0), doc="max(x, 0)",
             compute=Compute(amp="clear"))
RELU_GRAD = OpDef("relu_grad", grad_like_second, kernel=_relu_grad_kernel, not_differentiable=True,
                  doc="dy where y > 0, else 0", compute=Compute(layouts=layout_rules.same_shape_elementwise))


# sigmoid ------------------------------------------------------------------
def _sigmoid_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    half = ctx.outputs[0].dtype.type(0.5)

    def run(x: Any) -> Any:
        # 1/2 + tanh(x/2)/2: the same function as 1/(1+exp(-x)), without exp overflow for x << 0
        xp.multiply(x, half, out=out)
        xp.tanh(out, out=out)
        xp.multiply(out, half, out=out)
        return xp.add(out, half, out=out)

    return run


def _sigmoid_grad(ctx: GradContext) -> list[Any]:
    return [ctx.apply("sigmoid_grad", [ctx.outputs[0], ctx.dy])]


def _sigmoid_grad_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    one = ctx.outputs[0].dtype.type(1)

    def run(y: Any, dy: Any) -> Any:  # dy * y * (1 - y)
        xp.subtract(one, y, out=out)
        xp.multiply(out, y, out=out)
        return xp.multiply(out, dy, out=out)

    return run


SIGMOID = OpDef("sigmoid", unary_float, kernel=_sigmoid_kernel, grad=_sigmoid_grad, doc="1 / (1 + exp(-x))",
                compute=Compute(layouts=layout_rules.same_shape_elementwise, amp="gray"))
SIGMOID_GRAD = OpDef("sigmoid_grad", grad_like_second, kernel=_sigmoid_grad_kernel, not_differentiable=True,
                     doc="dy * y * (1 - y) from the sigmoid output y",
                     compute=Compute(layouts=layout_rules.same_shape_elementwise))


# tanh ---------------------------------------------------------------------
def _tanh_grad(ctx: GradContext) -> list[Any]:
    return [ctx.apply("tanh_grad", [ctx.outputs[0], ctx.dy])]


def _tanh_grad_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    one = ctx.outputs[0].dtype.type(1)

    def run(y: Any, dy: Any) -> Any:  # dy * (1 - y^2)
        xp.multiply(y, y, out=out)
        xp.subtract(one, out, out=out)
        return xp.multiply(out, dy, out=out)

    return run


TANH = OpDef("tanh", unary_float, grad=_tanh_grad, elementwise=Elementwise("tanh"), doc="the hyperbolic tangent of x",
             compute=Compute(amp="gray"))
TANH_GRAD = OpDef("tanh_grad", grad_like_second, kernel=_tanh_grad_kernel, not_differentiable=True,
                  doc="dy * (1 - y^2) from the tanh output y",
                  compute=Compute(layouts=layout_rules.same_shape_elementwise))


# gelu ---------------------------------------------------------------------
def _gelu_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    spec = ctx.outputs[0]
    size = math.prod(spec.shape)
    cdf = NormalCdf(xp, (size,), spec.dtype)
    flat_out = out.reshape(-1)

    def run(x: Any) -> Any:  # x * Phi(x), the erf form
        flat_x = x.reshape(-1)
        cdf.cdf(flat_x, flat_out)
        xp.multiply(flat_out, flat_x, out=flat_out)
        return out

    return run


def _gelu_grad(ctx: GradContext) -> list[Any]:
    return [ctx.apply("gelu_grad", [ctx.inputs[0], ctx.dy])]


def _gelu_grad_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    spec = ctx.outputs[0]
    size = math.prod(spec.shape)
    cdf = NormalCdf(xp, (size,), spec.dtype)
    pdf = ctx.scratch((size,), spec.dtype)
    flat_out = out.reshape(-1)

    def run(x: Any, dy: Any) -> Any:  # dy * (Phi(x) + x phi(x))
        flat_x = x.reshape(-1)
        cdf.pdf(flat_x, pdf)
        xp.multiply(pdf, flat_x, out=pdf)
        cdf.cdf(flat_x, flat_out)
        xp.add(flat_out, pdf, out=flat_out)
        xp.multiply(flat_out, dy.reshape(-1), out=flat_out)
        return out

    return run


GELU = OpDef("gelu", unary_float, kernel=_gelu_kernel, grad=_gelu_grad,
             doc="x * Phi(x), Phi the standard normal CDF: x/2 * (1 + erf(x / sqrt(2))), the exact (erf) form",
             compute=Compute(layouts=layout_rules.same_shape_elementwise, amp="gray"))
GELU_GRAD = OpDef("gelu_grad", grad_like_second, kernel=_gelu_grad_kernel, not_differentiable=True,
                  doc="dy * (Phi(x) + x phi(x))", compute=Compute(layouts=layout_rules.same_shape_elementwise))

# attributes ---------------------------------------------------------------
SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


def _number(attrs: dict, key: str, op: str) -> float:
    """A finite real attribute; bad values name the op and the argument."""
    value = attrs.get(key)
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ShapeError(f"{op}: {key} must be a finite number, got {value!r}")
    return float(value)


def _unary_with(op: str, *keys: str) -> Any:
    """Inference of a floating unary op whose listed attributes are finite numbers."""
    def infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
        for key in keys:
            _number(attrs, key, op)
        return unary_float(inputs, attrs)

    return infer


def _grad_with(op: str, *keys: str) -> Any:
    """Inference of a fused ``op_grad(saved, dy)`` whose listed attributes are finite numbers."""
    def infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
        for key in keys:
            _number(attrs, key, op)
        require_floating(inputs, op)
        if inputs[0].dtype != inputs[1].dtype or inputs[0].shape != inputs[1].shape:
            raise ShapeError(f"{op}: the saved value {inputs[0]} and dy {inputs[1]} must have one shape and dtype")
        return grad_like_second(inputs, attrs)

    return infer


def _hardtanh_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    lo, hi = _number(attrs, "min_val", "hardtanh"), _number(attrs, "max_val", "hardtanh")
    if not lo < hi:
        raise ShapeError(f"hardtanh: min_val must be below max_val, got min_val={lo}, max_val={hi}")
    return unary_float(inputs, attrs)


def _scalars(ctx: KernelContext, *keys: str) -> list[Any]:
    """Attributes as numpy scalars of the output dtype, so float32 stays float32."""
    t = ctx.outputs[0].dtype.type
    return [t(ctx.attrs[k]) for k in keys]


# leaky_relu ---------------------------------------------------------------
def _leaky_relu_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    (alpha,) = _scalars(ctx, "alpha")
    pos = ctx.scratch(ctx.outputs[0].shape, dtype=bool)

    def run(x: Any) -> Any:  # x where x > 0, alpha * x elsewhere (max(x, alpha x) only holds for alpha <= 1)
        xp.greater(x, 0, out=pos)
        xp.multiply(x, alpha, out=out)
        xp.copyto(out, x, where=pos)
        return out

    return run


def _leaky_relu_grad(ctx: GradContext) -> list[Any]:
    return [ctx.apply("leaky_relu_grad", [ctx.inputs[0], ctx.dy], {"alpha": ctx.attrs["alpha"]})]


def _leaky_relu_grad_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    (alpha,) = _scalars(ctx, "alpha")
    pos = ctx.scratch(ctx.outputs[0].shape, dtype=bool)

    def run(x: Any, dy: Any) -> Any:
        xp.greater(x, 0, out=pos)
        xp.multiply(dy, alpha, out=out)
        xp.copyto(out, dy, where=pos)
        return out

    return run


LEAKY_RELU = OpDef("leaky_relu", _unary_with("leaky_relu", "alpha"), kernel=_leaky_relu_kernel, grad=_leaky_relu_grad,
                   doc="x where x > 0, alpha * x elsewhere",
                   compute=Compute(layouts=layout_rules.same_shape_elementwise, amp="black"))
LEAKY_RELU_GRAD = OpDef("leaky_relu_grad", _grad_with("leaky_relu_grad", "alpha"), kernel=_leaky_relu_grad_kernel,
                        not_differentiable=True, doc="dy where x > 0, alpha * dy elsewhere",
                        compute=Compute(layouts=layout_rules.same_shape_elementwise))


# hardtanh and relu6: a clip whose gradient passes inside the open interval ---------------
def _clip_kernel(lo_key: str | None, hi_key: str | None, lo: float = 0.0, hi: float = 0.0) -> Any:
    def build(ctx: KernelContext) -> Any:
        xp, out, t = ctx.xp, ctx.out(0), ctx.outputs[0].dtype.type
        low = t(ctx.attrs[lo_key] if lo_key else lo)
        high = t(ctx.attrs[hi_key] if hi_key else hi)
        return lambda x: xp.clip(x, low, high, out=out)

    return build


def _hardtanh_grad_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    low, high = _scalars(ctx, "min_val", "max_val")
    inside, above = (ctx.scratch(ctx.outputs[0].shape, dtype=bool) for _ in range(2))

    def run(y: Any, dy: Any) -> Any:  # dy where min_val < y < max_val: from the output, which is clipped
        xp.greater(y, low, out=inside)
        xp.less(y, high, out=above)
        xp.logical_and(inside, above, out=inside)
        return xp.multiply(dy, inside, out=out)

    return run


def _hardtanh_grad(ctx: GradContext) -> list[Any]:
    attrs = {"min_val": ctx.attrs["min_val"], "max_val": ctx.attrs["max_val"]}
    return [ctx.apply("hardtanh_grad", [ctx.outputs[0], ctx.dy], attrs)]


def _relu6_grad(ctx: GradContext) -> list[Any]:
    return [ctx.apply("hardtanh_grad", [ctx.outputs[0], ctx.dy], {"min_val": 0.0, "max_val": 6.0})]


HARDTANH = OpDef("hardtanh", _hardtanh_infer, kernel=_clip_kernel("min_val", "max_val"), grad=_hardtanh_grad,
                 doc="clip(x, min_val, max_val)", compute=Compute(amp="black"))
HARDTANH_GRAD = OpDef("hardtanh_grad", _grad_with("hardtanh_grad", "min_val", "max_val"), kernel=_hardtanh_grad_kernel,
                      not_differentiable=True, doc="dy where min_val < y < max_val, from the output y")
RELU6 = OpDef("relu6", unary_float, kernel=_clip_kernel(None, None, 0.0, 6.0), grad=_relu6_grad,
              doc="min(max(x, 0), 6)", compute=Compute(amp="black"))


# hardsigmoid and hardswish ------------------------------------------------------------
def _hardsigmoid_kernel(ctx: KernelContext) -> Any:
    xp, out, t = ctx.xp, ctx.out(0), ctx.outputs[0].dtype.type
    sixth, half, zero, one = t(1 / 6), t(0.5), t(0), t(1)

    def run(x: Any) -> Any:  # clip(x / 6 + 1/2, 0, 1) = relu6(x + 3) / 6
        xp.multiply(x, sixth, out=out)
        xp.add(out, half, out=out)
        return xp.clip(out, zero, one, out=out)

    return run


def _hard_window(xp: Any, x: Any, mask: Any, scratch: Any, low: Any, high: Any) -> Any:
    """mask = low < x < high."""
    xp.greater(x, low, out=mask)
    xp.less(x, high, out=scratch)
    return xp.logical_and(mask, scratch, out=mask)


def _hardsigmoid_grad_kernel(ctx: KernelContext) -> Any:
    xp, out, t = ctx.xp, ctx.out(0), ctx.outputs[0].dtype.type
    sixth, three = t(1 / 6), t(3)
    mask, scratch = (ctx.scratch(ctx.outputs[0].shape, dtype=bool) for _ in range(2))

    def run(x: Any, dy: Any) -> Any:  # dy / 6 where -3 < x < 3
        _hard_window(xp, x, mask, scratch, -three, three)
        xp.multiply(dy, sixth, out=out)
        return xp.multiply(out, mask, out=out)

    return run


def _hardswish_kernel(ctx: KernelContext) -> Any:
    xp, out, t = ctx.xp, ctx.out(0), ctx.outputs[0].dtype.type
    sixth, half, zero, one = t(1 / 6), t(0.5), t(0), t(1)

    def run(x: Any) -> Any:  # x * hardsigmoid(x)
        xp.multiply(x, sixth, out=out)
        xp.add(out, half, out=out)
        xp.clip(out, zero, one, out=out)
        return xp.multiply(out, x, out=out)

    return run


def _hardswish_grad_kernel(ctx: KernelContext) -> Any:
    xp, out, t = ctx.xp, ctx.out(0), ctx.outputs[0].dtype.type
    third, half, three, zero, one = t(1 / 3), t(0.5), t(3), t(0), t(1)
    mask, scratch = (ctx.scratch(ctx.outputs[0].shape, dtype=bool) for _ in range(2))

    def run(x: Any, dy: Any) -> Any:  # dy * (0 below -3, x/3 + 1/2 inside, 1 above 3)
        xp.multiply(x, third, out=out)
        xp.add(out, half, out=out)
        xp.greater_equal(x, three, out=mask)
        xp.copyto(out, one, where=mask)
        xp.less_equal(x, -three, out=mask)
        xp.copyto(out, zero, where=mask)
        return xp.multiply(out, dy, out=out)

    return run


def _grad_from_input(op: str) -> Any:
    def rule(ctx: GradContext) -> list[Any]:
        return [ctx.apply(op, [ctx.inputs[0], ctx.dy])]

    return rule


HARDSIGMOID = OpDef("hardsigmoid", unary_float, kernel=_hardsigmoid_kernel, grad=_grad_from_input("hardsigmoid_grad"),
                    doc="relu6(x + 3) / 6, a piecewise-linear sigmoid", compute=Compute(amp="black"),
                    legacy=LegacyFace(name_prefix="HardSigmoid"))
HARDSIGMOID_GRAD = OpDef("hardsigmoid_grad", _grad_with("hardsigmoid_grad"), kernel=_hardsigmoid_grad_kernel,
                         not_differentiable=True, doc="dy / 6 where -3 < x < 3",
                         legacy=LegacyFace(name_prefix="HardSigmoidGrad"))
HARDSWISH = OpDef("hardswish", unary_float, kernel=_hardswish_kernel, grad=_grad_from_input("hardswish_grad"),
                  doc="x * relu6(x + 3) / 6", compute=Compute(amp="black"), legacy=LegacyFace(name_prefix="HardSwish"))
HARDSWISH_GRAD = OpDef("hardswish_grad", _grad_with("hardswish_grad"), kernel=_hardswish_grad_kernel,
                       not_differentiable=True, doc="dy * (0 below -3, x/3 + 1/2 between, 1 above 3)",
                       legacy=LegacyFace(name_prefix="HardSwishGrad"))


# elu and selu: scale * (x where x > 0, alpha * (exp(x) - 1) elsewhere) -----------------------
def _elu_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    alpha, scale = _scalars(ctx, "alpha", "scale")
    pos = ctx.scratch(ctx.outputs[0].shape, dtype=bool)

    def run(x: Any) -> Any:
        xp.greater(x, 0, out=pos)
        xp.minimum(x, 0, out=out)  # expm1 of the clamped value: no overflow for large positive x
        xp.expm1(out, out=out)
        xp.multiply(out, alpha, out=out)
        xp.copyto(out, x, where=pos)
        return xp.multiply(out, scale, out=out)

    return run


def _elu_grad_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    alpha, scale = _scalars(ctx, "alpha", "scale")
    one = ctx.outputs[0].dtype.type(1)
    pos = ctx.scratch(ctx.outputs[0].shape, dtype=bool)

    def run(x: Any, dy: Any) -> Any:  # dy * scale * (1 where x > 0, alpha * exp(x) elsewhere)
        xp.greater(x, 0, out=pos)
        xp.minimum(x, 0, out=out)
        xp.exp(out, out=out)
        xp.multiply(out, alpha, out=out)
        xp.copyto(out, one, where=pos)
        xp.multiply(out, scale, out=out)
        return xp.multiply(out, dy, out=out)

    return run


def _elu_grad(ctx: GradContext) -> list[Any]:
    attrs = {"alpha": ctx.attrs["alpha"], "scale": ctx.attrs["scale"]}
    return [ctx.apply("elu_grad", [ctx.inputs[0], ctx.dy], attrs)]


ELU = OpDef("elu", _unary_with("elu", "alpha", "scale"), kernel=_elu_kernel, grad=_elu_grad,
            doc="scale * (x where x > 0, alpha * (exp(x) - 1) elsewhere); flow.nn.elu fixes scale = 1",
            compute=Compute(amp="black"))
SELU = OpDef("selu", _unary_with("selu", "alpha", "scale"), kernel=_elu_kernel, grad=_elu_grad,
             doc="elu scaled: scale * (x where x > 0, alpha * (exp(x) - 1) elsewhere)", compute=Compute(amp="black"))
ELU_GRAD = OpDef("elu_grad", _grad_with("elu_grad", "alpha", "scale"), kernel=_elu_grad_kernel, not_differentiable=True,
                 doc="dy * scale * (1 where x > 0, alpha * exp(x) elsewhere)")


# mish ---------------------------------------------------------------------
def _softplus_into(xp: Any, x: Any, out: Any, scratch: Any) -> Any:
    """log(1 + exp(x)) = max(x, 0) + log1p(exp(-|x|)), which never overflows."""
    xp.abs(x, out=scratch)
    xp.negative(scratch, out=scratch)
    xp.exp(scratch, out=scratch)
    xp.log1p(scratch, out=scratch)
    xp.maximum(x, 0, out=out)
    return xp.add(out, scratch, out=out)


def _mish_kernel(ctx: KernelContext) -> Any:
    xp, out, spec = ctx.xp, ctx.out(0), ctx.outputs[0]
    scratch = ctx.scratch(spec.shape, spec.dtype)

    def run(x: Any) -> Any:  # x * tanh(softplus(x))
        _softplus_into(xp, x, out, scratch)
        xp.tanh(out, out=out)
        return xp.multiply(out, x, out=out)

    return run


def _mish_grad_kernel(ctx: KernelContext) -> Any:
    xp, out, spec = ctx.xp, ctx.out(0), ctx.outputs[0]
    t, sig, scratch = (ctx.scratch(spec.shape, spec.dtype) for _ in range(3))
    half, one = spec.dtype.type(0.5), spec.dtype.type(1)

    def run(x: Any, dy: Any) -> Any:  # dy * (tanh(sp) + x * sigmoid(x) * (1 - tanh(sp)^2))
        _softplus_into(xp, x, t, scratch)
        xp.tanh(t, out=t)
        xp.multiply(x, half, out=sig)  # sigmoid as 1/2 + tanh(x/2)/2: no exp overflow
        xp.tanh(sig, out=sig)
        xp.multiply(sig, half, out=sig)
        xp.add(sig, half, out=sig)
        xp.multiply(t, t, out=out)
        xp.subtract(one, out, out=out)
        xp.multiply(out, sig, out=out)
        xp.multiply(out, x, out=out)
        xp.add(out, t, out=out)
        return xp.multiply(out, dy, out=out)

    return run


MISH = OpDef("mish", unary_float, kernel=_mish_kernel, grad=_grad_from_input("mish_grad"),
             doc="x * tanh(softplus(x)), softplus(x) = log(1 + exp(x))", compute=Compute(amp="black"))
MISH_GRAD = OpDef("mish_grad", _grad_with("mish_grad"), kernel=_mish_grad_kernel, not_differentiable=True,
                  doc="dy * (tanh(sp) + x sigmoid(x) (1 - tanh(sp)^2)), sp = softplus(x)")


# swish (op type silu: the op name "swish" belongs to the flowjob-swish example plugin) ---------------
def _sigmoid_of_scaled(xp: Any, x: Any, beta: Any, half: Any, out: Any) -> Any:
    """sigmoid(beta * x) as 1/2 + tanh(beta x / 2) / 2."""
    xp.multiply(x, beta * half, out=out)
    xp.tanh(out, out=out)
    xp.multiply(out, half, out=out)
    return xp.add(out, half, out=out)


def _silu_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    (beta,) = _scalars(ctx, "beta")
    half = ctx.outputs[0].dtype.type(0.5)

    def run(x: Any) -> Any:
        _sigmoid_of_scaled(xp, x, beta, half, out)
        return xp.multiply(out, x, out=out)

    return run


def _silu_grad_kernel(ctx: KernelContext) -> Any:
    xp, out, spec = ctx.xp, ctx.out(0), ctx.outputs[0]
    (beta,) = _scalars(ctx, "beta")
    half, one = spec.dtype.type(0.5), spec.dtype.type(1)
    sig = ctx.scratch(spec.shape, spec.dtype)

    def run(x: Any, dy: Any) -> Any:  # dy * s * (1 + beta x (1 - s)), s = sigmoid(beta x)
        _sigmoid_of_scaled(xp, x, beta, half, sig)
        xp.subtract(one, sig, out=out)
        xp.multiply(out, x, out=out)
        xp.multiply(out, beta, out=out)
        xp.add(out, one, out=out)
        xp.multiply(out, sig, out=out)
        return xp.multiply(out, dy, out=out)

    return run


def _silu_grad(ctx: GradContext) -> list[Any]:
    return [ctx.apply("silu_grad", [ctx.inputs[0], ctx.dy], {"beta": ctx.attrs["beta"]})]


SILU = OpDef("silu", _unary_with("silu", "beta"), kernel=_silu_kernel, grad=_silu_grad,
             doc="swish: x * sigmoid(beta * x) (SiLU at beta = 1)", compute=Compute(amp="black"),
             legacy=LegacyFace(name_prefix="Swish"))
SILU_GRAD = OpDef("silu_grad", _grad_with("silu_grad", "beta"), kernel=_silu_grad_kernel, not_differentiable=True,
                  doc="dy * s * (1 + beta x (1 - s)), s = sigmoid(beta x)", legacy=LegacyFace(name_prefix="SwishGrad"))


# prelu (legacy v0.4 flow.layers.prelu) --------------------------------------
def _prelu_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    x, alpha = inputs[0], inputs[1]
    require_floating(inputs, "prelu")
    if alpha.dtype != x.dtype:
        raise ShapeError(f"prelu alpha must have x's dtype {x.dtype}, got {alpha.dtype}")
    # legacy: alpha covers every axis of x but the first (the batch), each extent x's or 1
    if len(alpha.shape) != len(x.shape) - 1 or any(a not in (1, d) for a, d in zip(alpha.shape, x.shape[1:])):
        raise ShapeError(f"prelu alpha must have shape x.shape[1:] = {x.shape[1:]} with shared axes 1, "
                         f"got {alpha.shape}")
    return [x]


def _prelu_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    positive = ctx.scratch(ctx.outputs[0].shape, dtype=bool)

    def run(x: Any, alpha: Any) -> Any:
        # legacy: x where x > 0, else alpha * x (x == 0 takes the alpha side, giving 0 either way)
        xp.greater(x, 0, out=positive)
        xp.multiply(x, alpha, out=out)
        xp.copyto(out, x, where=positive)
        return out

    return run


def _prelu_grad(ctx: GradContext) -> list[Any]:
    # one node gives both: dx, and alpha's gradient at x's shape (the central unbroadcast sums it to alpha's)
    dx, dalpha = ctx.apply("prelu_grad", [ctx.inputs[0], ctx.inputs[1], ctx.dy])
    return [dx if ctx.needs[0] else None, dalpha if ctx.needs[1] else None]


def _prelu_grad_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    x, _alpha, dy = inputs
    _prelu_infer(inputs[:2], attrs)
    if dy.shape != x.shape or dy.dtype != x.dtype:
        raise ShapeError(f"prelu_grad dy must be like x {x.shape}:{x.dtype}, got {dy.shape}:{dy.dtype}")
    return [x, x]


def _prelu_grad_kernel(ctx: KernelContext) -> Any:
    xp, dx, dalpha = ctx.xp, ctx.out(0), ctx.out(1)
    positive = ctx.scratch(ctx.outputs[0].shape, dtype=bool)
    zero = ctx.outputs[0].dtype.type(0)

    def run(x: Any, alpha: Any, dy: Any) -> tuple[Any, Any]:
        xp.greater(x, 0, out=positive)
        xp.multiply(dy, alpha, out=dx)
        xp.copyto(dx, dy, where=positive)
        xp.multiply(dy, x, out=dalpha)
        xp.copyto(dalpha, zero, where=positive)
        return dx, dalpha

    return run


PRELU = OpDef("prelu", _prelu_infer, kernel=_prelu_kernel, grad=_prelu_grad,
              doc="x where x > 0, else alpha * x; alpha shaped x.shape[1:] (1 on shared axes)",
              compute=Compute(amp="black"), legacy=LegacyFace(name_prefix="PRelu"))
PRELU_GRAD = OpDef("prelu_grad", _prelu_grad_infer, kernel=_prelu_grad_kernel, not_differentiable=True,
                   doc="(dx, dalpha at x's shape): dy or alpha * dy; 0 or dy * x (the alpha side where x <= 0)",
                   legacy=LegacyFace(name_prefix="PReluGrad"))

OPS = (RELU, RELU_GRAD, SIGMOID, SIGMOID_GRAD, TANH, TANH_GRAD, GELU, GELU_GRAD,
       LEAKY_RELU, LEAKY_RELU_GRAD, HARDTANH, HARDTANH_GRAD, RELU6, HARDSIGMOID, HARDSIGMOID_GRAD,
       HARDSWISH, HARDSWISH_GRAD, ELU, SELU, ELU_GRAD, MISH, MISH_GRAD, SILU, SILU_GRAD,
       PRELU, PRELU_GRAD)
