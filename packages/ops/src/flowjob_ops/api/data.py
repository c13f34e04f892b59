"""``flow.data.decode_random`` (legacy v0.3/v0.4): random batches for synthetic-data runs."""
from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

from flowjob_core import Blob, apply
from flowjob_core.ir import dtypes

from flowjob_ops.api._common import build_error
from flowjob_ops.api._initializers import from_initializer_conf, uniform


__all__ = ["decode_random"]


def decode_random(shape: Sequence[int], dtype: Any, batch_size: int = 1, initializer: Any = None,
                  tick: Blob | None = None, name: str | None = None) -> Blob:
    """A blob of ``(batch_size, *shape)`` drawn afresh from ``initializer`` at every step.

    Args:
        shape: the shape of one example (a list or tuple; ``()`` for scalars such as labels).
        dtype: the element type (``flow.float``, ``flow.int32``, ...).
        batch_size: the number of examples per step.
        initializer: what to draw from; default ``flow.uniform(0, 1)`` (uniform in [0, 1)).
            An initializer's ``seed`` repeats the sequence of batches.
        tick: a blob the node waits for (legacy's ordering input); its value is not read.
        name: the op name; default ``DecodeRandom_<n>``.

    Returns:
        A blob that is not differentiable.
    """
    what = "flow.data.decode_random"
    if not isinstance(shape, (list, tuple)) or not all(
            isinstance(d, numbers.Integral) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise build_error(what, f"shape must be a list or tuple of non-negative ints, got {shape!r}")
    if dtype is None:
        raise build_error(what, "dtype is required (legacy asserted it): e.g. flow.float or flow.int32")
    if isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral) or batch_size < 1:
        raise build_error(what, f"batch_size must be an int >= 1, got {batch_size!r}")
    init = uniform(0, 1) if initializer is None else initializer
    if hasattr(init, "WhichOneof"):  # a legacy InitializerConf message
        try:
            init = from_initializer_conf(init, what)
        except ValueError as exc:
            raise build_error(what, str(exc)) from None
    attrs = {"shape": tuple(int(d) for d in shape), "dtype": dtypes.as_dtype(dtype), "batch_size": int(batch_size),
             "initializer": init}
    return apply("decode_random", [tick] if tick is not None else [], attrs, name=name)
