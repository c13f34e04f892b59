"""``flow.nn.dropout`` and legacy v0.4's ``random_mask_like`` (the keep mask alone)."""
from __future__ import annotations

from typing import Sequence

from flowjob_core import Blob, apply

from flowjob_ops.api._common import build_error
from flowjob_ops.records.dropout import check_rate


__all__ = ["dropout", "random_mask_like"]


def dropout(x: Blob, rate: float, noise_shape: Sequence[int] | None = None, seed: int | None = None,
            name: str | None = None) -> Blob:
    """Zeroes each element with probability ``rate`` and scales the rest by 1/(1-rate); identity in predict jobs.

    A new mask is drawn at every step of a train job, and the gradient uses that same mask.

    Args:
        x: a floating blob.
        rate: the drop probability, in [0, 1).
        noise_shape: the mask's shape, broadcast over x (default x's shape).
        seed: seeds this node's random stream (default: fresh entropy).
        name: the op name; default ``Dropout_<n>``.

    Returns:
        A blob like x.
    """
    attrs = {"rate": rate, "noise_shape": None if noise_shape is None else tuple(noise_shape), "seed": seed}
    y, _mask = apply("dropout", [x], attrs, name=name)
    return y


def random_mask_like(like: Blob, rate: float, seed: int | None = None, noise_shape: Sequence[int] | None = None,
                     name: str | None = None) -> Blob:
    """An int8 mask shaped like ``like``: each element 1 with probability 1 - rate, else 0 (legacy v0.4).

    A fresh mask is drawn at every step (train and predict jobs alike); only like's shape is read.

    Args:
        like: a blob of any dtype.
        rate: the probability of a 0, in [0, 1).
        seed: seeds this node's random stream, so the sequence of masks repeats (default: fresh entropy).
        noise_shape: must be None: legacy v0.4 refused any other value ("supported later").
        name: the op name; default ``RandomMaskLike_<n>``.

    Returns:
        An int8 blob of like's shape.
    """
    what = "flow.nn.random_mask_like"
    if not isinstance(like, Blob):
        raise TypeError(f"{what}: like must be a blob, got {type(like).__name__}")
    if noise_shape is not None:
        raise build_error(what, f"noise_shape must be None (legacy v0.4 did not support it), got {noise_shape!r}")
    try:
        check_rate(rate, "rate")
    except ValueError as exc:
        raise build_error(what, str(exc)) from None
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise build_error(what, f"seed must be an int or None, got {seed!r}")
    return apply("random_mask_like", [like], {"rate": float(rate), "seed": seed}, name=name)
