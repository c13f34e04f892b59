"""``flow.nn``'s softmax, log_softmax (and legacy's alias logsoftmax) and softmax_grad."""
from __future__ import annotations

from flowjob_core import Blob, apply


__all__ = ["log_softmax", "logsoftmax", "softmax", "softmax_grad"]


def softmax(logits: Blob, axis: int | None = None, name: str | None = None) -> Blob:
    """exp(logits) / sum(exp(logits)) along ``axis``.

    Args:
        logits: a floating blob.
        axis: the axis to normalise (default the last).
        name: the op name; default ``Softmax_<n>``.

    Returns:
        A blob like logits.
    """
    return apply("softmax", [logits], {"axis": -1 if axis is None else axis}, name=name)


def log_softmax(logits: Blob, axis: int | None = None, name: str | None = None) -> Blob:
    """logits - log(sum(exp(logits))) along ``axis``, computed stably.

    Args:
        logits: a floating blob.
        axis: the axis to normalise (default the last).
        name: the op name; default ``LogSoftmax_<n>``.

    Returns:
        A blob like logits.
    """
    return apply("log_softmax", [logits], {"axis": -1 if axis is None else axis}, name=name)


def logsoftmax(logits: Blob, axis: int | None = None, name: str | None = None) -> Blob:
    """The legacy spelling of ``log_softmax``: logits - log(sum(exp(logits))) along ``axis``.

    Args:
        logits: a floating blob.
        axis: the axis to normalise (default the last).
        name: the op name; default ``LogSoftmax_<n>``.

    Returns:
        A blob like logits.
    """
    return log_softmax(logits, axis, name)


def softmax_grad(y: Blob, dy: Blob, axis: int | None = None, name: str | None = None) -> Blob:
    """The gradient of softmax from its output: y * (dy - sum(dy * y)) along ``axis``.

    Args:
        y: a softmax output.
        dy: the gradient of y, shaped like y.
        axis: the softmax axis (default -1).
        name: the op name; default ``SoftmaxGrad_<n>``.
    """
    return apply("softmax_grad", [y, dy], {"axis": -1 if axis is None else axis}, name=name)
