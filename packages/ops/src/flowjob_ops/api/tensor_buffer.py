"""Legacy ``flow.tensor_to_tensor_buffer``, ``tensor_buffer_to_tensor``, ``gen_tensor_buffer``,
``tensor_buffer_to_list_of_tensors`` and v0.3's tensor-list functions: ``tensor_list_to_tensor_buffer``,
``tensor_buffer_to_tensor_list``, ``tensor_list_split``.

A tensor buffer blob has dtype ``flow.tensor_buffer``: each element is a tensor of its own shape
(``flowjob_ops/records/tensor_buffer.py``).
"""
from __future__ import annotations

from typing import Any, Sequence

from flowjob_core import Blob, apply
from flowjob_core.ir import dtypes

from flowjob_ops.api._common import blob_arg, build_error

__all__ = ["gen_tensor_buffer", "tensor_buffer_to_list_of_tensors", "tensor_buffer_to_tensor",
           "tensor_buffer_to_tensor_list", "tensor_list_split", "tensor_list_to_tensor_buffer",
           "tensor_to_tensor_buffer"]


def _dtype(what: str, arg: str, value: Any) -> Any:
    try:
        return dtypes.as_dtype(value)
    except TypeError as exc:
        raise build_error(what, f"{arg}: {exc}") from None


def _buffer(what: str, x: Any) -> Blob:
    blob = blob_arg(what, "x", x)
    if blob.dtype != dtypes.tensor_buffer:
        raise build_error(what, f"the input {blob.lbn!r} must be a tensor buffer (dtype flow.tensor_buffer), got "
                                f"{blob.dtype}")
    return blob


def tensor_to_tensor_buffer(x: Blob, instance_dims: int, name: str | None = None) -> Blob:
    """A tensor buffer of ``x``'s leading axes: each element is ``x``'s last ``instance_dims`` axes at one
    index (shape ``(4, 16, 64, 64)`` with ``instance_dims=2`` gives a (4, 16) buffer of (64, 64) tensors)."""
    what = "flow.tensor_to_tensor_buffer"
    return apply("tensor_to_tensor_buffer", [blob_arg(what, "x", x)], {"instance_dims": instance_dims}, name=name)


def tensor_buffer_to_tensor(x: Blob, dtype: Any, instance_shape: Sequence[int], name: str | None = None) -> Blob:
    """The elements of a tensor buffer, each of ``instance_shape`` and ``dtype``, as one tensor of shape
    ``x.shape + instance_shape``; an element of another shape or dtype is an error naming the op."""
    what = "flow.tensor_buffer_to_tensor"
    attrs = {"dtype": _dtype(what, "dtype", dtype), "instance_shape": tuple(instance_shape)}
    return apply("tensor_buffer_to_tensor", [_buffer(what, x)], attrs, name=name)


def gen_tensor_buffer(shape: Sequence[int], shape_list: Sequence[Sequence[int]], value_list: Sequence[float],
                      data_type: Any = dtypes.float32, dynamic_out: bool = False, name: str | None = None) -> Blob:
    """A tensor buffer of ``shape`` whose element ``k`` is ``shape_list[k]`` filled with ``value_list[k]``
    (``data_type``). ``dynamic_out`` is accepted as legacy's: the buffer's shape is fixed either way."""
    what = "flow.gen_tensor_buffer"
    attrs = {"shape": tuple(shape), "shape_list": tuple(tuple(s) for s in shape_list),
             "value_list": tuple(float(v) for v in value_list), "data_type": _dtype(what, "data_type", data_type),
             "dynamic_out": bool(dynamic_out)}
    return apply("gen_tensor_buffer", [], attrs, name=name)


def tensor_buffer_to_list_of_tensors(x: Blob, out_shape: Sequence[int], out_dtype: Any, dynamic_out: bool = False,
                                     name: str | None = None) -> list[Blob]:
    """One blob per element of a tensor buffer, in row-major order. Each element must have ``out_shape``, or
    with ``dynamic_out`` as many axes and each no longer: the blob then has the element's own shape."""
    what = "flow.tensor_buffer_to_list_of_tensors"
    blob = _buffer(what, x)
    attrs = {"out_shape": tuple(out_shape), "out_dtype": _dtype(what, "out_dtype", out_dtype),
             "dynamic_out": bool(dynamic_out)}
    outs = apply("tensor_buffer_to_list_of_tensors", [blob], attrs, name=name)
    return list(outs) if isinstance(outs, (list, tuple)) else [outs]


def tensor_list_to_tensor_buffer(input: Blob, name: str | None = None) -> Blob:  # noqa: A002 - legacy name
    """A one-axis tensor buffer of a tensor list's items (``tp.ListListNumpy`` / ``flow.MirroredTensorListDef``
    arguments): element ``k`` is item ``k`` without its leading axis of 1."""
    what = "flow.tensor_list_to_tensor_buffer"
    return apply("tensor_list_to_tensor_buffer", [blob_arg(what, "input", input)], {}, name=name)


def tensor_buffer_to_tensor_list(input: Blob, shape: Sequence[int], dtype: Any,  # noqa: A002 - legacy name
                                 name: str | None = None) -> Blob:
    """A tensor list of a one-axis tensor buffer's elements: item ``k`` is ``(1, *element k's shape)``;
    ``shape`` bounds each element's and ``dtype`` is theirs. Return it as ``tp.ListListNumpy`` to get the items."""
    what = "flow.tensor_buffer_to_tensor_list"
    attrs = {"shape": tuple(shape), "dtype": _dtype(what, "dtype", dtype)}
    return apply("tensor_buffer_to_tensor_list", [_buffer(what, input)], attrs, name=name)


def tensor_list_split(input_tensor_list: Blob, name: str | None = None) -> tuple[Blob, ...]:
    """One blob per item of a tensor list (as many as its declared leading axis), each the item without its
    leading axis of 1; items a shorter list lacks come back empty."""
    what = "flow.tensor_list_split"
    outs = apply("tensor_list_split", [blob_arg(what, "input_tensor_list", input_tensor_list)], {}, name=name)
    return tuple(outs) if isinstance(outs, (list, tuple)) else (outs,)
