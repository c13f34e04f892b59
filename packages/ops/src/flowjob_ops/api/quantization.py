"""``flow.quantization``: legacy v0.3/v0.4's quantization-aware training ops (the formulas are in
``flowjob_ops.records.quantization``)."""
from __future__ import annotations

from flowjob_core import Blob, apply, get_variable, maybe_builder
from flowjob_core.ir import dtypes
from flowjob_core.trace import scope

from flowjob_ops.api._common import build_error, op_name
from flowjob_ops.api._initializers import Constant

__all__ = ["fake_quantization", "min_max_observer", "moving_average_min_maxObserver", "moving_average_min_max_observer"]


def _attrs(bit: int, scheme: str, formula: str) -> dict:
    return {"quantization_bit": bit, "quantization_scheme": scheme, "quantization_formula": formula}


def min_max_observer(input: Blob, quantization_bit: int = 8, quantization_scheme: str = "symmetric",
                     quantization_formula: str = "google", per_layer_quantization: bool = True,
                     name: str | None = None) -> tuple[Blob, Blob]:
    """Scale and zero point of ``input``'s range.

    Args:
        input: a floating blob.
        quantization_bit: quantize to X-bit integers, X in [2, 8].
        quantization_scheme: ``"symmetric"`` (signed, zero point 0) or ``"affine"`` (unsigned).
        quantization_formula: ``"google"`` or ``"cambricon"`` (a power-of-two shift; per layer only); a bool
            here is v0.3's fourth argument, ``per_layer_quantization`` (v0.3 had no formula).
        per_layer_quantization: one scale for the whole blob (shape (1,)); False: one per slice of axis 0.
        name: the op name; default ``MinMaxObserver_<n>``.

    Returns:
        ``(scale, zero_point)``.
    """
    if isinstance(quantization_formula, bool):  # v0.3's fourth argument was per_layer_quantization
        quantization_formula, per_layer_quantization = "google", quantization_formula
    if quantization_formula == "cambricon" and not per_layer_quantization:
        raise build_error("flow.quantization.min_max_observer",
                          "per-channel mode is not supported with the cambricon formula")
    attrs = {**_attrs(quantization_bit, quantization_scheme, quantization_formula),
             "per_layer_quantization": per_layer_quantization}
    return tuple(apply("min_max_observer", [input], attrs, name=name))  # type: ignore[return-value]


def moving_average_min_max_observer(input: Blob, quantization_bit: int = 8, quantization_scheme: str = "symmetric",
                                    quantization_formula: str = "google", momentum: float = 0.95,
                                    name: str | None = None) -> tuple[Blob, Blob]:
    """Scale and zero point of a moving average of ``input``'s range, kept in variables
    ``<name>-moving_max``, ``<name>-moving_min`` and ``<name>-current_train_step`` (not trainable).

    In a train job every step moves the range: the first batch sets it, later ones blend in by
    ``momentum``; a predict job reads it. Symmetric ranges keep max |x|.

    Args:
        input: a floating blob.
        quantization_bit, quantization_scheme, quantization_formula: as for :func:`min_max_observer`.
        momentum: the weight of the old range, in [0, 1].
        name: the op name, and the variables' namespace; default ``MovingAverageMinMaxObserver_<n>``.

    Returns:
        ``(scale, zero_point)``, each of shape (1,).
    """
    what = "flow.quantization.moving_average_min_max_observer"
    if not isinstance(input, Blob):
        raise build_error(what, f"input must be a blob, got {type(input).__name__}")
    name = op_name(name, "MovingAverageMinMaxObserver")
    builder = maybe_builder()
    training = builder is not None and builder.job.type == "train"
    with scope.namespace(name):
        moving_max = get_variable("moving_max", shape=(1,), dtype=input.dtype, initializer=Constant(0.0),
                                  trainable=False)
        moving_min = get_variable("moving_min", shape=(1,), dtype=input.dtype, initializer=Constant(0.0),
                                  trainable=False)
        # legacy never advanced it, so with stop_update_after_iters=1 every training step updates the range
        step = get_variable("current_train_step", shape=(1,), dtype=dtypes.int64, initializer=Constant(0),
                            trainable=False)
    attrs = {**_attrs(quantization_bit, quantization_scheme, quantization_formula), "momentum": momentum,
             "training": training, "stop_update_after_iters": 1}
    return tuple(apply("moving_average_min_max_observer", [input, step, moving_max, moving_min], attrs,
                       name=name))  # type: ignore[return-value]


def fake_quantization(input: Blob, scale: Blob, zero_point: Blob, quantization_bit: int = 8,
                      quantization_scheme: str = "symmetric", quantization_formula: str = "google",
                      name: str | None = None) -> Blob:
    """``input`` quantized and dequantized with ``scale`` and ``zero_point`` (from an observer); the gradient
    passes straight through to ``input``.

    symmetric: ``clip(round(x / scale), -2^(b-1), 2^(b-1) - 1) * scale``;
    affine: ``(clip(round(x / scale + zero_point), 0, 2^b - 1) - zero_point) * scale`` (rounding to even).

    Args:
        input: a floating blob.
        scale, zero_point: shape (1,), or one value per slice of axis 0 (per-channel).
        quantization_bit, quantization_scheme, quantization_formula: as for :func:`min_max_observer`.
        name: the op name; default ``Fake_Quantization_<n>``.
    """
    return apply("fake_quantization", [input, scale, zero_point],
                 _attrs(quantization_bit, quantization_scheme, quantization_formula), name=name)


def moving_average_min_maxObserver(input: Blob, quantization_bit: int = 8,  # noqa: N802 (legacy name)
                                   quantization_scheme: str = "symmetric", momentum: float = 0.95,
                                   name: str | None = None) -> tuple[Blob, Blob]:
    """v0.3's name and arguments of :func:`moving_average_min_max_observer` (no formula: ``"google"``)."""
    return moving_average_min_max_observer(input, quantization_bit, quantization_scheme, "google", momentum, name)
