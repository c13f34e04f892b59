"""Quantization-aware training ops of legacy v0.3/v0.4 (``flow.quantization.*``), with legacy's CPU rules.

``min_max_observer(in)`` -> (scale, zero_point) from the input's range, per layer (shape (1,)) or per
channel (axis 0, shape (C,)). ``moving_average_min_max_observer(in, current_train_step, moving_max,
moving_min)`` keeps a moving range in its two state variables (written in place while training) and gives
scale and zero_point of shape (1,). ``fake_quantization(in, scale, zero_point)`` quantizes and
dequantizes; its gradient passes the output gradient straight through to ``in``.

Schemes (``quantization_formula="google"``), with ``b = quantization_bit`` in [2, 8]:

- symmetric: scale = max(|max|, |min|) / (2^(b-1) - 1), zero_point 0; values round to
  [-2^(b-1), 2^(b-1) - 1];
- affine: scale = (max - min) / (2^b - 1), zero_point = -round(min / scale); values round to [0, 2^b - 1].

``"cambricon"`` (per layer only) gives a power-of-two shift as "scale": floor(log2(max|x|)) - (b - 2); the
fake quantization then uses 2^shift. Rounding is to nearest even (legacy set FE_TONEAREST around
``nearbyint``), except the zero point's ``round`` (half away from zero). A range of width 0, which gave legacy
NaN or Inf, keeps its values exact here (see :func:`scale_and_zero_point`). An affine range that does not
reach 0 gives a zero point outside [0, 2^b - 1]; fake quantization uses it as it is (legacy's GPU kernel and
its tests' formula; the CPU kernel's cast of it to uint8 was undefined there).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from flowjob_core import BlobSpec, Compute, Effects, GradContext, KernelContext, LegacyFace, OpDef, ShapeError
from flowjob_core.ir import dtypes

from flowjob_ops.records.common import require_floating

SCHEMES = ("symmetric", "affine")
FORMULAS = ("google", "cambricon")


def _check_attrs(attrs: dict, op: str) -> tuple[int, str, str]:
    bit = attrs.get("quantization_bit", 8)
    if isinstance(bit, bool) or not isinstance(bit, (int, np.integer)) or not 2 <= bit <= 8:
        raise ShapeError(f"{op}: quantization_bit must be an int in [2, 8], got {bit!r}")
    scheme = attrs.get("quantization_scheme", "symmetric")
    if scheme not in SCHEMES:
        raise ShapeError(f"{op}: quantization_scheme must be one of {SCHEMES}, got {scheme!r}")
    formula = attrs.get("quantization_formula", "google")
    if formula not in FORMULAS:
        raise ShapeError(f"{op}: quantization_formula must be one of {FORMULAS}, got {formula!r}")
    return int(bit), scheme, formula


def _round_half_away(xp: Any, x: Any) -> Any:
    """C's ``round``: halves away from zero (numpy's ``round`` goes to even)."""
    return xp.copysign(xp.floor(xp.abs(x) + 0.5), x)


def scale_and_zero_point(xp: Any, low: Any, high: Any, bit: int, scheme: str, formula: str) -> tuple[Any, Any]:
    """Legacy's formulas from a range (arrays of one value per channel).

    Where legacy divided by a range of width 0 (every value equal: a constant input, a zero weight) and gave
    NaN or Inf, Google's formula here keeps values exact instead: an affine range of one value is widened
    to reach 0, and a range holding only 0 takes scale 1 (zero point 0)."""
    if formula == "cambricon":
        top = xp.maximum(xp.abs(high), xp.abs(low))
        return xp.floor(xp.log2(top)) - (bit - 2), xp.zeros_like(top)
    if scheme == "symmetric":
        top = xp.maximum(xp.abs(high), xp.abs(low))
        scale = top / (2.0 ** (bit - 1) - 1)
        return xp.where(scale == 0, 1.0, scale).astype(scale.dtype), xp.zeros_like(top)
    flat = high == low
    low, high = xp.where(flat, xp.minimum(low, 0), low), xp.where(flat, xp.maximum(high, 0), high)
    scale = (high - low) / (2.0 ** bit - 1)
    scale = xp.where(scale == 0, 1.0, scale).astype(scale.dtype)
    return scale, -_round_half_away(xp, low / scale)


# min_max_observer -------------------------------------------------------------------------
def _min_max_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    if len(inputs) != 1:
        raise ShapeError(f"min_max_observer takes one input 'in', got {len(inputs)}")
    (x,) = inputs
    require_floating(inputs, "min_max_observer")
    _, _, formula = _check_attrs(attrs, "min_max_observer")
    per_layer = attrs.get("per_layer_quantization", True)
    if not isinstance(per_layer, bool):
        raise ShapeError(f"min_max_observer: per_layer_quantization must be a bool, got {per_layer!r}")
    if not per_layer and formula == "cambricon":
        raise ShapeError("min_max_observer: per-channel quantization is not supported with the cambricon formula")
    if not per_layer and not x.shape:
        raise ShapeError("min_max_observer: per-channel quantization needs an input of rank >= 1 (channels on axis 0)")
    channels = 1 if per_layer else x.shape[0]
    return [BlobSpec((channels,), x.dtype), BlobSpec((channels,), x.dtype)]


def _min_max_kernel(ctx: KernelContext) -> Any:
    xp = ctx.xp
    bit, scheme, formula = _check_attrs(ctx.attrs, "min_max_observer")
    channels = ctx.outputs[0].shape[0]
    scale_out, zero_out = ctx.out(0), ctx.out(1)

    def run(x: Any) -> tuple[Any, Any]:
        rows = x.reshape(channels, -1)
        scale, zero = scale_and_zero_point(xp, rows.min(axis=1), rows.max(axis=1), bit, scheme, formula)
        scale_out[...] = scale
        zero_out[...] = zero
        return scale_out, zero_out

    return run


# moving_average_min_max_observer -----------------------------------------------------------
def _moving_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    op = "moving_average_min_max_observer"
    if len(inputs) != 4:
        raise ShapeError(f"{op} takes in, current_train_step, moving_max and moving_min, got {len(inputs)} inputs")
    x, step, moving_max, moving_min = inputs
    require_floating([x], op)
    _check_attrs(attrs, op)
    for name, spec in (("moving_max", moving_max), ("moving_min", moving_min)):
        if spec != BlobSpec((1,), x.dtype):
            raise ShapeError(f"{op}: {name} must be of shape (1,) and the input's dtype {x.dtype}, got {spec}")
    if step.shape != (1,) or step.dtype != dtypes.int64:
        raise ShapeError(f"{op}: current_train_step must be an int64 blob of shape (1,), got {step}")
    stop = attrs.get("stop_update_after_iters", 1)
    if isinstance(stop, bool) or not isinstance(stop, (int, np.integer)) or stop < 1:
        raise ShapeError(f"{op}: stop_update_after_iters must be an int >= 1, got {stop!r}")
    momentum = attrs.get("momentum", 0.95)
    if isinstance(momentum, bool) or not isinstance(momentum, (int, float)) or not 0 <= momentum <= 1:
        raise ShapeError(f"{op}: momentum must be a number in [0, 1], got {momentum!r}")
    return [BlobSpec((1,), x.dtype), BlobSpec((1,), x.dtype)]


def _moving_kernel(ctx: KernelContext) -> Any:
    xp = ctx.xp
    bit, scheme, formula = _check_attrs(ctx.attrs, "moving_average_min_max_observer")
    training = ctx.attrs.get("training")
    training = ctx.training if training is None else bool(training)
    stop = int(ctx.attrs.get("stop_update_after_iters", 1))
    dtype = ctx.inputs[0].dtype
    keep, take = dtype.type(ctx.attrs.get("momentum", 0.95)), dtype.type(1.0 - ctx.attrs.get("momentum", 0.95))
    scale_out, zero_out = ctx.out(0), ctx.out(1)
    affine = scheme == "affine" and formula == "google"

    def _blend(state: Any, value: Any) -> None:
        # the first batch (state still 0) sets the range; later ones move it by momentum
        state[...] = xp.where(state == 0, value, state * keep + value * take)

    def run(x: Any, step: Any, moving_max: Any, moving_min: Any) -> tuple[Any, Any]:
        if training and int(step[0]) <= stop:
            high, low = x.max(), x.min()
            if affine:
                _blend(moving_max, high)
                _blend(moving_min, low)
            else:  # symmetric ranges (and cambricon's) keep max |x| in both
                _blend(moving_max, xp.maximum(xp.abs(high), xp.abs(low)))
                moving_min[...] = moving_max
        scale, zero = scale_and_zero_point(xp, moving_min, moving_max, bit, scheme, formula)
        scale_out[...] = scale
        zero_out[...] = zero
        return scale_out, zero_out

    return run


# fake_quantization ------------------------------------------------------------------------
def _fake_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    if len(inputs) != 3:
        raise ShapeError(f"fake_quantization takes in, scale and zero_point, got {len(inputs)} inputs")
    x, scale, zero = inputs
    require_floating(inputs, "fake_quantization")
    _, _, formula = _check_attrs(attrs, "fake_quantization")
    count = int(np.prod(scale.shape))
    if count > 1:
        if formula == "cambricon":
            raise ShapeError("fake_quantization: the cambricon formula takes one shift (per-layer), "
                             f"got scale {scale}")
        if not x.shape or count != x.shape[0] or int(np.prod(zero.shape)) != x.shape[0]:
            raise ShapeError(f"fake_quantization: per-channel scale and zero_point need one value per channel of "
                             f"axis 0 of the input {x}, got scale {scale}, zero_point {zero}")
    return [x]


def fake_quantize(xp: Any, x: Any, scale: Any, zero: Any, bit: int, scheme: str, formula: str) -> Any:
    """Quantize and dequantize ``x`` (``scale``/``zero`` broadcast over it), legacy's rules."""
    if formula == "cambricon":
        step = 2.0 ** scale.astype(np.int32).astype(x.dtype)
        top = 2.0 ** (bit - 1) - 1
        return xp.clip(xp.rint(x / step), -top - 1, top) * step
    if scheme == "symmetric":
        top = 2.0 ** (bit - 1) - 1
        return xp.clip(xp.rint(x / scale), -top - 1, top) * scale
    # not wrapped to uint8 as legacy's CPU kernel cast it: a range that does not reach 0 needs it as it is
    zero = _round_half_away(xp, zero).astype(x.dtype)
    return (xp.clip(xp.rint(x / scale + zero), 0, 2.0 ** bit - 1) - zero) * scale


def _fake_kernel(ctx: KernelContext) -> Any:
    xp = ctx.xp
    bit, scheme, formula = _check_attrs(ctx.attrs, "fake_quantization")
    x_spec, scale_spec = ctx.inputs[0], ctx.inputs[1]
    # per-channel: one scale per slice of axis 0
    per_channel = int(np.prod(scale_spec.shape)) > 1
    shape = (x_spec.shape[0],) + (1,) * (len(x_spec.shape) - 1) if per_channel else (1,) * len(x_spec.shape)
    out = ctx.out(0)

    def run(x: Any, scale: Any, zero: Any) -> Any:
        scale = scale.reshape(-1)[:1].reshape(shape) if not per_channel else scale.reshape(shape)
        zero = zero.reshape(-1)[:1].reshape(shape) if not per_channel else zero.reshape(shape)
        out[...] = fake_quantize(xp, x, scale, zero, bit, scheme, formula)
        return out

    return run


def _fake_grad(ctx: GradContext) -> list[Any]:
    # straight-through estimator, as legacy: dx = dy (an identity op); scale and zero_point get none
    return [ctx.apply("identity", [ctx.dy]), None, None]


MIN_MAX_OBSERVER = OpDef(
    "min_max_observer", _min_max_infer, kernel=_min_max_kernel, not_differentiable=True,
    doc="scale and zero_point of the input's range, per layer or per channel (axis 0)", compute=Compute(amp="black"),
    legacy=LegacyFace(output_names=("scale", "zero_point"), input_names=("in",),
                      attr_names=("quantization_bit", "quantization_scheme", "quantization_formula",
                                  "per_layer_quantization")))
MOVING_AVERAGE_MIN_MAX_OBSERVER = OpDef(
    "moving_average_min_max_observer", _moving_infer, kernel=_moving_kernel, not_differentiable=True,
    doc="scale and zero_point of a moving range kept in moving_max / moving_min (updated in place while "
        "training)", compute=Compute(amp="black"), effects=Effects(mutates=(2, 3), effect=True),
    legacy=LegacyFace(output_names=("scale", "zero_point"),
                      input_names=("in", "current_train_step", "moving_max", "moving_min"),
                      attr_names=("training", "stop_update_after_iters", "quantization_bit", "quantization_scheme",
                                  "quantization_formula", "momentum")))
FAKE_QUANTIZATION = OpDef(
    "fake_quantization", _fake_infer, kernel=_fake_kernel, grad=_fake_grad,
    doc="quantize then dequantize with scale and zero_point; the gradient passes straight through",
    compute=Compute(amp="black"),
    legacy=LegacyFace(name_prefix="Fake_Quantization", input_names=("in", "scale", "zero_point"),
                      attr_names=("quantization_bit", "quantization_scheme", "quantization_formula")))

OPS = (MIN_MAX_OBSERVER, MOVING_AVERAGE_MIN_MAX_OBSERVER, FAKE_QUANTIZATION)
