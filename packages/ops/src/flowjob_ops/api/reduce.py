"""Reductions: ``flow.math``'s reduce_* functions, l2_normalize, the two-stage reductions,
reduced_shape_elem_cnt and argmax; the top-level counts of non-finite elements (``flow.count_not_finite``,
``flow.multi_count_not_finite``) and ``flow.argmax``."""
from __future__ import annotations

import numbers
from typing import Any, Sequence

from flowjob_core import Blob, apply

from flowjob_ops.api._common import blob_arg, build_error, number_as_blob, op_name, restated
from flowjob_ops.records.shape import counted_axes


NAMESPACES = {
    "flow.math": ["argmax", "l2_normalize", "reduce_all", "reduce_any", "reduce_euclidean_norm", "reduce_logsumexp",
                  "reduce_max", "reduce_mean", "reduce_min", "reduce_prod", "reduce_std", "reduce_sum",
                  "reduce_variance", "reduced_shape_elem_cnt", "two_stage_reduce_max", "two_stage_reduce_min"],
    "flow": ["argmax", "count_not_finite", "multi_count_not_finite"],
}
"""The face namespaces legacy exported these names in; the oneflow face reads this literal."""
__all__ = sorted({name for names in NAMESPACES.values() for name in names})


def _legacy_axis(op: str, axis: Any) -> Any:
    """None, an int, or a list/tuple of ints (the axis forms legacy accepted) as the op's attribute."""
    if axis is None:
        return None
    if isinstance(axis, numbers.Integral) and not isinstance(axis, bool):
        return int(axis)
    if isinstance(axis, (list, tuple)) and all(isinstance(a, numbers.Integral) and not isinstance(a, bool)
                                               for a in axis):
        return tuple(int(a) for a in axis)
    raise build_error(op, f"axis must be None, an int or a list of ints, got {axis!r}")


def _reduce(op: str, arg: str = "input_tensor", empty_axis: str = "input") -> Any:
    """A legacy reduction; ``arg`` is legacy's name of the input (``x`` for max/min/prod/any/all).

    An empty axis list reduces nothing: legacy returned the input itself (``empty_axis="input"``), or
    for reduce_any/reduce_all its elementwise truth ``x != 0`` (``empty_axis="truth"``).
    """
    def reduce(input_tensor: Blob, axis: Any, keepdims: bool, name: str | None) -> Blob:
        axes = _legacy_axis(op, axis)
        if axes == ():
            if empty_axis == "truth":
                return apply("not_equal", [input_tensor, number_as_blob("not_equal", 0, input_tensor)], name=name)
            return input_tensor
        return apply(op, [input_tensor], {"axis": axes, "keepdims": bool(keepdims)}, name=name)

    if arg == "x":
        def fn(x: Blob, axis: int | Sequence[int] | None = None, keepdims: bool = False,
               name: str | None = None) -> Blob:
            return reduce(x, axis, keepdims, name)
    else:
        def fn(input_tensor: Blob, axis: int | Sequence[int] | None = None,  # type: ignore[misc]
               keepdims: bool = False, name: str | None = None) -> Blob:
            return reduce(input_tensor, axis, keepdims, name)

    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = f"""{restated(op, '.')}

    Args:
        {arg}: a blob.
        axis: None (all axes), an int or a list of ints; negative counts from the end; an empty list
            reduces nothing.
        keepdims: keep the reduced axes with size 1.
        name: the op name; default from the op's legacy prefix.

    Returns:
        The reduced blob.
    """
    return fn


reduce_sum = _reduce("reduce_sum")


reduce_mean = _reduce("reduce_mean")


reduce_max = _reduce("reduce_max", arg="x")


reduce_min = _reduce("reduce_min", arg="x")


reduce_prod = _reduce("reduce_prod", arg="x")


reduce_any = _reduce("reduce_any", arg="x", empty_axis="truth")


reduce_all = _reduce("reduce_all", arg="x", empty_axis="truth")


reduce_logsumexp = _reduce("reduce_logsumexp")


def reduce_euclidean_norm(input_tensor: Blob, axis: int | Sequence[int] | None = None, keepdims: bool = False,
                          name: str | None = None) -> Blob:
    """sqrt(sum(x ** 2)) along ``axis``: legacy's square, reduce_sum and sqrt nodes.

    Args:
        input_tensor: a floating blob.
        axis: None (all axes), an int or a list of ints.
        keepdims: keep the reduced axes with size 1.
        name: the stem of the node names; default ``ReduceEuclideanNorm_<n>``.

    Returns:
        The norm; its gradient x / norm is not finite where the norm is 0, as legacy's.
    """
    node = op_name(name, "ReduceEuclideanNorm")
    squares = apply("square", [input_tensor], name=f"{node}_square")
    total = reduce_sum(squares, axis, keepdims, name=f"{node}_reduce_sum")
    return apply("sqrt", [total], name=f"{node}_sqrt")


def reduce_variance(input_tensor: Blob, axis: int | Sequence[int] | None = None, keepdims: bool = False,
                    name: str | None = None) -> Blob:
    """The population variance mean((x - mean(x)) ** 2) along ``axis``.

    Legacy computed mean(x^2) - mean(x)^2, which cancels catastrophically (and can go negative) when the
    mean is large against the spread; centring first gives the same value without that loss.

    Args:
        input_tensor: a floating blob.
        axis: None (all axes), an int or a list of ints; an empty list gives zeros like the input.
        keepdims: keep the reduced axes with size 1.
        name: the stem of the node names; default ``ReduceVariance_<n>``.

    Returns:
        The variance.
    """
    node = op_name(name, "ReduceVariance")
    axes = _legacy_axis("reduce_variance", axis)
    if axes == ():
        return apply("zeros_like", [input_tensor], name=f"{node}_zeros_like")
    centre = reduce_mean(input_tensor, axes, True, name=f"{node}_reduce_mean_centre")
    deviation = apply("subtract", [input_tensor, centre], name=f"{node}_subtract")
    squares = apply("square", [deviation], name=f"{node}_square")
    return reduce_mean(squares, axes, keepdims, name=f"{node}_reduce_mean")


def reduce_std(input_tensor: Blob, axis: int | Sequence[int] | None = None, keepdims: bool = False,
               name: str | None = None) -> Blob:
    """The population standard deviation sqrt(reduce_variance) along ``axis``.

    Args:
        input_tensor: a floating blob.
        axis: None (all axes), an int or a list of ints; an empty list gives zeros like the input.
        keepdims: keep the reduced axes with size 1.
        name: the stem of the node names; default ``ReduceStd_<n>``.

    Returns:
        The standard deviation (its gradient is not finite where it is 0).
    """
    node = op_name(name, "ReduceStd")
    axes = _legacy_axis("reduce_std", axis)
    if axes == ():
        return apply("zeros_like", [input_tensor], name=f"{node}_zeros_like")
    variance = reduce_variance(input_tensor, axes, keepdims, name=f"{node}_reduce_variance")
    return apply("sqrt", [variance], name=f"{node}_sqrt")


def l2_normalize(input: Blob, axis: int | None = None, epsilon: float = 1e-12,  # noqa: A002 - legacy name
                 name: str | None = None) -> Blob:
    """x / sqrt(max(sum(x ** 2 along axis), epsilon)).

    Args:
        input: a floating blob.
        axis: the axis to normalise along (negative counts from the end); legacy required one.
        epsilon: the floor of the sum of squares, so a zero slice stays zero.
        name: the op name; default ``L2Normalize_<n>``.

    Returns:
        A blob like input.
    """
    if axis is None or isinstance(axis, bool) or not isinstance(axis, numbers.Integral):
        raise build_error("l2_normalize", f"axis must be an int, got {axis!r}")
    if isinstance(epsilon, bool) or not isinstance(epsilon, numbers.Real) or not epsilon >= 0:
        raise build_error("l2_normalize", f"epsilon must be a number >= 0, got {epsilon!r}")
    y, _square_x_sum = apply("l2_normalize", [input], {"axis": int(axis), "epsilon": float(epsilon)}, name=name)
    return y


def _two_stage(op: str, x: Blob, axis: int | Sequence[int] | None, keepdims: bool, name: str | None) -> Blob:
    # one process holds every split: the device stage and the global stage are the whole reduction, and
    # legacy's gradient (dy shared evenly among the tied extrema) is reduce_max/min's own
    reduce = reduce_max if op == "max" else reduce_min
    return reduce(x, axis=axis, keepdims=keepdims, name=name)


def two_stage_reduce_max(x: Blob, axis: int | Sequence[int] | None = None, keepdims: bool = False,
                         name: str | None = None) -> Blob:
    """Maximum over ``axis`` (default: all), reduced per device then globally in legacy; one stage here.

    Args:
        x: a blob.
        axis: None, an int or a list of ints.
        keepdims: keep reduced axes as 1.
        name: the op name; default ``ReduceMax_<n>``.
    """
    return _two_stage("max", x, axis, keepdims, name)


def two_stage_reduce_min(x: Blob, axis: int | Sequence[int] | None = None, keepdims: bool = False,
                         name: str | None = None) -> Blob:
    """Minimum over ``axis`` (default: all); see ``two_stage_reduce_max``.

    Args:
        x: a blob.
        axis: None, an int or a list of ints.
        keepdims: keep reduced axes as 1.
        name: the op name; default ``ReduceMin_<n>``.
    """
    return _two_stage("min", x, axis, keepdims, name)


def reduced_shape_elem_cnt(input_blob: Blob, axis: Sequence[int] | None = None, dtype: Any = None,
                           name: str | None = None) -> Blob:
    """The product of ``input_blob``'s extents along ``axis`` (default: all), as a (1,) blob.

    Args:
        input_blob: a blob (only its shape is read).
        axis: None or a list/tuple of axes.
        dtype: the result's dtype (default int32, legacy's).
        name: the op name; default ``ShapeElemCnt_<n>``.
    """
    if not isinstance(input_blob, Blob):
        raise TypeError(f"flow.math.reduced_shape_elem_cnt: input_blob must be a blob, got {type(input_blob).__name__}")
    try:
        counted_axes(axis, len(input_blob.shape))
    except Exception as exc:
        raise build_error("flow.math.reduced_shape_elem_cnt", str(exc)) from None
    axis = None if axis is None else list(axis)
    return apply("shape_elem_cnt", [input_blob], {"axis": axis, "dtype": dtype}, name=name)


def argmax(input: Blob, axis: int = -1, name: str | None = None) -> Blob:  # noqa: A002 - legacy name
    """The index (int32) of the first maximum along ``axis``.

    Args:
        input: a blob of rank >= 1.
        axis: the axis to search (default the last).
        name: the op name; default ``Argmax_<n>``.

    Returns:
        An int32 blob without that axis.
    """
    return apply("argmax", [input], {"axis": -1 if axis is None else axis}, name=name)


def count_not_finite(x: Blob, name: str | None = None) -> Blob:
    """How many elements of ``x`` are inf or nan, as an int64 blob of shape (1,).

    Args:
        x: a floating blob.
        name: the op name; default ``CountNotFinite_<n>``.
    """
    return apply("count_not_finite", [blob_arg("flow.count_not_finite", "x", x)], name=name)


def multi_count_not_finite(x: Sequence[Blob] | None = None, name: str | None = None) -> Blob:
    """How many elements of all the blobs in ``x`` are inf or nan, as an int64 blob of shape (1,).

    Args:
        x: a non-empty list of floating blobs of one dtype.
        name: the op name; default ``MultiCountNotFinite_<n>``.
    """
    blobs = list(x) if isinstance(x, (list, tuple)) else None
    if not blobs:
        raise build_error("flow.multi_count_not_finite", f"x must be a non-empty list of blobs, got {x!r}")
    for i, blob in enumerate(blobs):
        blob_arg("flow.multi_count_not_finite", f"x[{i}]", blob)
    return apply("multi_count_not_finite", blobs, name=name)
