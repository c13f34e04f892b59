"""Top-level ``flow`` functions whose values do not depend on their inputs' values: constant,
constant_like, ones_like, zeros_like, zeros, ones, range, random_uniform and random_normal.

Node names follow legacy's (``Zeros_<n>constant``, ``range``), so programs that watch or look up
nodes by name find them.
"""
from __future__ import annotations

import numbers
from typing import Any, Sequence

import numpy as np

from flowjob_core import Blob, apply
from flowjob_core.ir import dtypes

from flowjob_ops.api._common import build_error, op_name
from flowjob_ops.records.common import is_int


__all__ = ["constant", "constant_like", "constant_scalar", "ones", "ones_like", "random_normal", "random_uniform",
           "range", "zeros", "zeros_like"]


def constant(value: Any, dtype: Any = None, shape: Sequence[int] | None = None, name: str | None = None) -> Blob:
    """A constant blob: ``value`` broadcast to ``shape``.

    Args:
        value: a number or a (nested) list or array of numbers.
        dtype: default ``flow.float``.
        shape: default the shape of ``value``; a number without a shape, or ``shape=()``, gives (1,), as
            legacy's constant op did (it never made a 0-d blob).
        name: the op name; default ``Constant_<n>``.

    Returns:
        A blob that is not differentiable.
    """
    array = np.asarray(value)
    out_shape = array.shape if shape is None else tuple(shape)
    attrs = {"value": array.tolist(), "dtype": dtypes.as_dtype(dtype) if dtype is not None else dtypes.float32,
             "shape": out_shape or (1,)}
    return apply("constant", [], attrs, name=name)


def constant_scalar(value: float | int, dtype: Any = None, name: str | None = None) -> Blob:
    """Legacy ``flow.constant_scalar``: ``value`` as a blob of shape (1,) (``flow.constant(value, dtype,
    shape=[1])``; dtype default ``flow.float``)."""
    return constant(value, dtype=dtype, shape=[1], name=name)


def constant_like(like: Blob, value: float | int, dtype: Any = None, name: str | None = None) -> Blob:
    """``value`` in the shape of ``like``.

    Args:
        like: the blob whose shape (and, by default, dtype) to use.
        value: a Python number.
        dtype: the dtype; default like's.
        name: the op name; default ``ConstantLike_<n>``.

    Returns:
        A blob shaped like ``like``.
    """
    return apply("constant_like", [like], {"value": value, "dtype": None if dtype is None else dtypes.as_dtype(dtype)},
                 name=name)


def ones_like(like: Blob, dtype: Any = None, name: str | None = None) -> Blob:
    """Ones shaped like ``like``.

    Args:
        like: a blob.
        dtype: the dtype (legacy's second argument); default like's.
        name: the op name; default ``OnesLike_<n>`` (``ConstantLike_<n>`` with a dtype).

    Returns:
        A blob of ones.
    """
    if dtype is not None:  # legacy made every *_like a constant_like; a dtype needs the cast it does
        return constant_like(like, 1, dtype=dtype, name=name)
    return apply("ones_like", [like], name=name)


def zeros_like(like: Blob, dtype: Any = None, name: str | None = None) -> Blob:
    """Zeros shaped like ``like``.

    Args:
        like: a blob.
        dtype: the dtype (legacy's second argument); default like's.
        name: the op name; default ``ZerosLike_<n>`` (``ConstantLike_<n>`` with a dtype).

    Returns:
        A blob of zeros.
    """
    if dtype is not None:  # legacy made every *_like a constant_like; a dtype needs the cast it does
        return constant_like(like, 0, dtype=dtype, name=name)
    return apply("zeros_like", [like], name=name)


def _fill(shape: Sequence[int], value: int, dtype: Any, name: str | None, prefix: str, what: str) -> Blob:
    if isinstance(shape, numbers.Integral):
        shape = (shape,)
    if not isinstance(shape, (list, tuple)) or not all(is_int(d) and d > 0 for d in shape):
        raise build_error(what, f"shape must be a list or tuple of positive ints, got {shape!r}")
    dt = dtypes.float32 if dtype is None else dtypes.as_dtype(dtype)
    # legacy names the constant node "<name>constant": Zeros_3constant, or myzerosconstant; its constant op made
    # shape () a (1,)
    return apply("constant", [], {"value": value, "dtype": dt, "shape": tuple(shape) or (1,)},
                 name=f"{op_name(name, prefix)}constant")


def zeros(shape: Sequence[int], dtype: Any = None, name: str | None = None) -> Blob:
    """A blob of zeros.

    Args:
        shape: the shape.
        dtype: default ``flow.float32``.
        name: the op name prefix; the node is ``<name>constant`` (default ``Zeros_<n>constant``).

    Returns:
        A constant blob (no gradient).
    """
    return _fill(shape, 0, dtype, name, "Zeros", "flow.zeros")


def ones(shape: Sequence[int], dtype: Any = None, name: str | None = None) -> Blob:
    """A blob of ones.

    Args:
        shape: the shape.
        dtype: default ``flow.float32``.
        name: the op name prefix; the node is ``<name>constant`` (default ``Ones_<n>constant``).

    Returns:
        A constant blob (no gradient).
    """
    return _fill(shape, 1, dtype, name, "Ones", "flow.ones")


def range(start: int, limit: int | None = None, delta: int = 1, dtype: Any = None,  # noqa: A001
          name: str | None = "range") -> Blob:
    """``start, start + delta, ...`` below ``limit``, as Python's range (``range(n)`` counts from 0).

    Args:
        start: an int; the limit when ``limit`` is None.
        limit: an int > start.
        delta: an int in [1, limit - start].
        dtype: default ``flow.int64``.
        name: the op name; legacy's default is ``"range"`` (a second call in one job needs another).

    Returns:
        A constant 1-d blob of ceil((limit - start) / delta) elements.
    """
    if limit is None:
        start, limit = 0, start
    if not all(is_int(v) for v in (start, limit, delta)):
        raise build_error("flow.range", f"start, limit and delta must be ints, got {start!r}, {limit!r}, {delta!r}")
    if limit <= start or not 0 < delta <= limit - start:
        raise build_error("flow.range", f"needs limit > start and 0 < delta <= limit - start, got start={start}, "
                                        f"limit={limit}, delta={delta}")
    attrs = {"start": int(start), "limit": int(limit), "delta": int(delta),
             "dtype": dtypes.int64 if dtype is None else dtypes.as_dtype(dtype)}
    return apply("range", [], attrs, name=name)


def random_uniform(shape: Sequence[int], dtype: Any = None, minval: float = 0.0, maxval: float = 1.0,
                   seed: int | None = None, name: str | None = None) -> Blob:
    """Uniform random numbers in [minval, maxval), drawn anew every step.

    Args:
        shape: the shape.
        dtype: a floating dtype; default ``flow.float``.
        minval: the lower bound.
        maxval: the upper bound.
        seed: seeds this node's random stream (default: fresh entropy).
        name: the op name; default ``RandomUniform_<n>``.

    Returns:
        A blob that is not differentiable.
    """
    attrs = {"shape": tuple(shape), "dtype": None if dtype is None else dtypes.as_dtype(dtype), "minval": minval,
             "maxval": maxval, "seed": seed}
    return apply("random_uniform", [], attrs, name=name)


def random_normal(shape: Sequence[int], mean: float = 0.0, stddev: float = 1.0, dtype: Any = None,
                  seed: int | None = None, name: str | None = None) -> Blob:
    """Normal random numbers, drawn anew every step.

    Args:
        shape: the shape.
        mean: the mean.
        stddev: the standard deviation.
        dtype: a floating dtype; default ``flow.float``.
        seed: seeds this node's random stream (default: fresh entropy).
        name: the op name; default ``RandomNormal_<n>``.

    Returns:
        A blob that is not differentiable.
    """
    attrs = {"shape": tuple(shape), "dtype": None if dtype is None else dtypes.as_dtype(dtype), "mean": mean,
             "stddev": stddev, "seed": seed}
    return apply("random_normal", [], attrs, name=name)
