"""Tensor buffers and tensor lists (legacy ``flow.tensor_buffer_*``, ``gen_tensor_buffer``, ``tensor_list_*``).

A tensor buffer is an array of tensors, each with its own shape: here a host numpy array of dtype object
(``flow.tensor_buffer``) whose elements are the backend's arrays. Its kernels build a new container each step
(a few pointers) and copy the elements they make, so no element is memory another node writes.

Converting back to dense values: ``tensor_buffer_to_tensor`` stacks elements of one shape; the others give
values whose shape the data decide (``OpDef.shape.dynamic_extent``: planned at the declared maximum, the kernel
returns the actual one, ``flowjob_core/plan/extent.py``). A tensor list (``tensor_buffer_to_tensor_list``) is
one element per item, each item ``(1, *element shape)``: the value is a ``TensorList`` (legacy's packed list),
which tensor-list ops and ``tp.ListListNumpy`` returns take item by item; other readers get its body, the items
concatenated on axis 0 (``flowjob_core/plan/extent.py``).
"""
from __future__ import annotations

import numbers
from typing import Any, Sequence

import numpy as np

from flowjob_core import BlobSpec, Compute, Effects, KernelContext, LegacyFace, OpDef, ShapeError, ShapeTraits
from flowjob_core.ir import dtypes
from flowjob_core.plan.mirrored import TensorList

BUFFER = dtypes.tensor_buffer


def _ints(value: Any, what: str, low: int = 0) -> tuple[int, ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise ShapeError(f"{what} must be a sequence of ints, got {value!r}")
    out = tuple(value)
    if any(isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < low for v in out):
        raise ShapeError(f"{what} must hold ints >= {low}, got {value!r}")
    return tuple(int(v) for v in out)


def _buffer_input(spec: BlobSpec, what: str = "input") -> None:
    if spec.dtype != BUFFER:
        raise ShapeError(f"the {what} must be a tensor buffer (dtype flow.tensor_buffer), got {spec.dtype}")


def new_buffer(shape: Sequence[int]) -> np.ndarray:
    """An empty tensor buffer of ``shape`` (host memory: it holds the element arrays, not their data)."""
    return np.empty(tuple(shape), dtype=object)


def elements(buffer: Any) -> list[Any]:
    """The elements of a tensor buffer value in row-major order."""
    return list(np.asarray(buffer, dtype=object).reshape(-1))


def _element_dtype(element: Any, dtype: np.dtype, node: str) -> None:
    if element is None:
        raise ValueError(f"{node}: the tensor buffer holds an empty element")
    if element.dtype != dtype:
        raise ValueError(f"{node}: a tensor buffer element is {element.dtype}, the op's dtype is {dtype.name}")


def dense_out(out: Any, shape: Sequence[int]) -> Any:
    """The first ``prod(shape)`` elements of a max-sized output buffer, as a contiguous array of ``shape``."""
    size = int(np.prod(shape, dtype=np.int64))
    return out.reshape(-1)[:size].reshape(tuple(shape))


def _fits(shape: tuple[int, ...], limit: tuple[int, ...]) -> bool:
    return len(shape) == len(limit) and all(d <= m for d, m in zip(shape, limit))


# tensor_to_tensor_buffer ------------------------------------------------------------------
def _to_buffer_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (x,) = inputs
    dims = attrs["instance_dims"]
    if isinstance(dims, bool) or not isinstance(dims, numbers.Integral) or not 0 < dims < len(x.shape):
        raise ShapeError(f"instance_dims must be an int in [1, {len(x.shape) - 1}] for an input of shape {x.shape}, "
                         f"got {dims!r}")
    if x.dtype == BUFFER:
        raise ShapeError("the input is a tensor buffer already")
    return [BlobSpec(x.shape[: len(x.shape) - dims], BUFFER)]


def _to_buffer_kernel(ctx: KernelContext) -> Any:
    xp, outer = ctx.xp, ctx.outputs[0].shape

    def run(x: Any) -> Any:
        out = new_buffer(outer)
        rows = x.reshape((-1, *x.shape[len(outer):]))
        flat = out.reshape(-1)
        for i in range(rows.shape[0]):
            flat[i] = xp.array(rows[i], copy=True)
        return out

    return run


TENSOR_TO_TENSOR_BUFFER = OpDef(
    "tensor_to_tensor_buffer", _to_buffer_infer, kernel=_to_buffer_kernel, not_differentiable=True,
    doc="a tensor buffer of the input's outer axes; each element the last instance_dims axes",
    compute=Compute(amp="black"), effects=Effects(host_state=True),
    legacy=LegacyFace(input_names=("in",), attr_names=("instance_dims",)))


# tensor_buffer_to_tensor ------------------------------------------------------------------
def _to_tensor_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (x,) = inputs
    _buffer_input(x)
    shape = _ints(attrs["instance_shape"], "instance_shape")
    return [BlobSpec((*x.shape, *shape), dtypes.as_dtype(attrs["dtype"]))]


def _to_tensor_kernel(ctx: KernelContext) -> Any:
    out, shape, node = ctx.out(0), tuple(ctx.attrs["instance_shape"]), ctx.node_name
    dtype = ctx.outputs[0].dtype
    rows = out.reshape((-1, *shape))

    def run(buffer: Any) -> Any:
        for i, element in enumerate(elements(buffer)):
            _element_dtype(element, dtype, node)
            if tuple(element.shape) != shape:
                raise ValueError(f"{node}: tensor buffer element {i} has shape {tuple(element.shape)}, "
                                 f"instance_shape is {shape}")
            rows[i] = element
        return out

    return run


TENSOR_BUFFER_TO_TENSOR = OpDef(
    "tensor_buffer_to_tensor", _to_tensor_infer, kernel=_to_tensor_kernel, not_differentiable=True,
    doc="the elements of a tensor buffer (each of instance_shape and dtype) stacked into one tensor",
    compute=Compute(amp="black"), effects=Effects(host_state=True),
    legacy=LegacyFace(input_names=("in",), attr_names=("dtype", "instance_shape")))


# gen_tensor_buffer ------------------------------------------------------------------------
def _gen_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    if inputs:
        raise ShapeError(f"gen_tensor_buffer takes no input, got {len(inputs)}")
    shape = _ints(attrs["shape"], "shape")
    count = int(np.prod(shape, dtype=np.int64))
    shapes, values = list(attrs["shape_list"]), list(attrs["value_list"])
    if len(shapes) != count or len(values) != count:
        raise ShapeError(f"shape {shape} holds {count} elements; shape_list has {len(shapes)} and value_list "
                         f"{len(values)}")
    for k, s in enumerate(shapes):
        _ints(s, f"shape_list[{k}]")
    dtypes.as_dtype(attrs["data_type"])
    return [BlobSpec(shape, BUFFER)]


def _gen_kernel(ctx: KernelContext) -> Any:
    xp, attrs = ctx.xp, ctx.attrs
    dtype = dtypes.as_dtype(attrs["data_type"])
    made = [xp.full(tuple(s), v, dtype=dtype) for s, v in zip(attrs["shape_list"], attrs["value_list"])]
    shape = tuple(attrs["shape"])

    def run() -> Any:
        out = new_buffer(shape)
        flat = out.reshape(-1)
        for i, element in enumerate(made):
            flat[i] = xp.array(element, copy=True)  # a reader may keep what it is handed
        return out

    return run


GEN_TENSOR_BUFFER = OpDef(
    "gen_tensor_buffer", _gen_infer, kernel=_gen_kernel, not_differentiable=True,
    doc="a tensor buffer whose element k is shape_list[k] filled with value_list[k]", effects=Effects(host_state=True),
    legacy=LegacyFace(attr_names=("shape", "shape_list", "value_list", "data_type", "dynamic_out")))


# tensor_buffer_to_list_of_tensors ---------------------------------------------------------
def _list_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (x,) = inputs
    _buffer_input(x)
    shape = _ints(attrs["out_shape"], "out_shape")
    dtype = dtypes.as_dtype(attrs["out_dtype"])
    return [BlobSpec(shape, dtype) for _ in range(x.size)]


def _list_kernel(ctx: KernelContext) -> Any:
    limit, node, dtype = tuple(ctx.attrs["out_shape"]), ctx.node_name, ctx.outputs[0].dtype if ctx.outputs else None
    dynamic = bool(ctx.attrs.get("dynamic_out", False))
    outs = [ctx.out(k) for k in range(len(ctx.outputs))]

    def run(buffer: Any) -> Any:
        got = []
        for i, element in enumerate(elements(buffer)):
            _element_dtype(element, dtype, node)
            shape = tuple(element.shape)
            if (shape != limit) if not dynamic else not _fits(shape, limit):
                rule = "out_shape" if not dynamic else "within out_shape"
                raise ValueError(f"{node}: tensor buffer element {i} has shape {shape}, not {rule} {limit}")
            target = dense_out(outs[i], shape)
            target[...] = element
            got.append(target)
        return tuple(got) if len(got) != 1 else got[0]

    return run


TENSOR_BUFFER_TO_LIST_OF_TENSORS = OpDef(
    "tensor_buffer_to_list_of_tensors", _list_infer, kernel=_list_kernel, not_differentiable=True,
    doc="one output per tensor buffer element (planned at out_shape; dynamic_out: each its own shape)",
    compute=Compute(amp="black"), effects=Effects(host_state=True), shape=ShapeTraits(dynamic_extent=True),
    legacy=LegacyFace(input_names=("in",), attr_names=("out_shape", "out_dtype", "dynamic_out")))


# tensor lists -----------------------------------------------------------------------------
def list_items(value: Any) -> list[Any]:
    """The items of a tensor-list value: a ``TensorList``'s arrays, or the rows of a dense body."""
    if type(value) is TensorList:
        return [row for item in value for row in item]
    return list(value)


def _list_to_buffer_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (x,) = inputs
    if not x.shape or x.dtype == BUFFER:
        raise ShapeError(f"the input must be a tensor list (rank >= 1, not a tensor buffer), got {x}")
    return [BlobSpec(x.shape[:1], BUFFER)]


def _list_to_buffer_kernel(ctx: KernelContext) -> Any:
    xp = ctx.xp

    def run(x: Any) -> Any:
        items = list_items(x)
        out = new_buffer((len(items),))
        for i, item in enumerate(items):
            out[i] = xp.array(item, copy=True)
        return out

    return run


TENSOR_LIST_TO_TENSOR_BUFFER = OpDef(
    "tensor_list_to_tensor_buffer", _list_to_buffer_infer, kernel=_list_to_buffer_kernel, not_differentiable=True,
    doc="a tensor buffer of the tensor list's items, one element each (the item without its leading axis)",
    compute=Compute(amp="black"), effects=Effects(host_state=True), shape=ShapeTraits(takes_tensor_list=True),
    legacy=LegacyFace(name_prefix="TensorListToBuffer", input_names=("in",)))


def _buffer_to_list_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (x,) = inputs
    _buffer_input(x)
    if len(x.shape) != 1:
        raise ShapeError(f"the tensor buffer must have one axis, got shape {x.shape}")
    shape = _ints(attrs["shape"], "shape")
    return [BlobSpec((x.shape[0], *shape), dtypes.as_dtype(attrs["dtype"]))]


def _buffer_to_list_kernel(ctx: KernelContext) -> Any:
    out, node = ctx.out(0), ctx.node_name
    limit, dtype = ctx.outputs[0].shape[1:], ctx.outputs[0].dtype

    def run(buffer: Any) -> Any:
        items = elements(buffer)
        for i, element in enumerate(items):
            _element_dtype(element, dtype, node)
            if not _fits(tuple(element.shape), limit):
                raise ValueError(f"{node}: tensor buffer element {i} has shape {tuple(element.shape)}, not within "
                                 f"the list's item shape {limit}")
        if len(items) == 1:  # one item: the list is that array
            item = dense_out(out, (1, *items[0].shape))
            item[0] = items[0]
            return item
        packed, offset, flat = TensorList(), 0, out.reshape(-1)
        for element in items:
            item = flat[offset: offset + element.size].reshape((1, *element.shape))
            item[0] = element
            packed.append(item)
            offset += element.size
        return packed

    return run


TENSOR_BUFFER_TO_TENSOR_LIST = OpDef(
    "tensor_buffer_to_tensor_list", _buffer_to_list_infer, kernel=_buffer_to_list_kernel, not_differentiable=True,
    doc="a tensor list of the buffer's elements, item k being (1, *element k's shape); planned at (n, *shape)",
    compute=Compute(amp="black"), effects=Effects(host_state=True), shape=ShapeTraits(dynamic_extent=True),
    legacy=LegacyFace(name_prefix="TensorBufferToList", input_names=("in",), attr_names=("shape", "dtype")))


def _split_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (x,) = inputs
    if len(x.shape) < 2 or x.dtype == BUFFER:
        raise ShapeError(f"the input must be a tensor list of rank >= 2, got {x}")
    return [BlobSpec(x.shape[1:], x.dtype) for _ in range(x.shape[0])]


def _split_kernel(ctx: KernelContext) -> Any:
    outs, node = [ctx.out(k) for k in range(len(ctx.outputs))], ctx.node_name

    def run(x: Any) -> Any:
        items = list_items(x)
        if len(items) > len(outs):
            raise ValueError(f"{node}: the tensor list holds {len(items)} items, the op was traced for {len(outs)}")
        got = []
        for k, out in enumerate(outs):
            item = items[k] if k < len(items) else out[:0]  # a shorter list: the rest are empty
            target = dense_out(out, item.shape)
            target[...] = item
            got.append(target)
        return tuple(got) if len(got) != 1 else got[0]

    return run


TENSOR_LIST_SPLIT = OpDef(
    "tensor_list_split", _split_infer, kernel=_split_kernel, not_differentiable=True,
    doc="one output per tensor-list item (the item without its leading axis)", compute=Compute(amp="black"),
    effects=Effects(host_state=True), shape=ShapeTraits(dynamic_extent=True, takes_tensor_list=True),
    legacy=LegacyFace(input_names=("in",)))

OPS = (TENSOR_TO_TENSOR_BUFFER, TENSOR_BUFFER_TO_TENSOR, GEN_TENSOR_BUFFER, TENSOR_BUFFER_TO_LIST_OF_TENSORS,
       TENSOR_LIST_TO_TENSOR_BUFFER, TENSOR_BUFFER_TO_TENSOR_LIST, TENSOR_LIST_SPLIT)
