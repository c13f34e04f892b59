"""Op records of legacy v0.4's OneRec data path: ``onerec_reader`` and ``onerec_decoder``.

The reader is the OFRecord reader's machinery (``Reader``: a background thread reading ahead, shuffles,
shards, epochs) over a list of OneRec files; its blob is the batch's record ids. A decoder copies one
feature's tensors of the batch, decoded in the reader thread, into a ``(batch, *static_shape)`` blob.
"""
from __future__ import annotations

import numbers
from typing import Any, Sequence

import numpy as np

from flowjob_core import BlobSpec, Effects, KernelContext, LegacyFace, OpDef, ShapeError
from flowjob_core.ir import dtypes

from flowjob_ofrecord.errors import OFRecordError
from flowjob_ofrecord.files import RecordRef
from flowjob_ofrecord.onerec_format import LIST_NAMES, LIST_TYPES, Tensor
from flowjob_ofrecord.reader import Reader, ReaderConfig, onerec_paths
from flowjob_ofrecord.records.reader_nodes import copy_decoded, find_reader, int_attr
from flowjob_ofrecord.sessions import session_alive

SHUFFLE_MODES = ("instance", "batch")
DECODED_DTYPES = tuple(np.dtype(t) for t in (np.int8, np.int32, np.int64, np.float32, np.float64))


def onerec_config(op: str, attrs: dict) -> ReaderConfig:
    world = int_attr(attrs, "world", 1)
    batch = int_attr(attrs, "batch_size", 1)
    if batch % world:
        raise ShapeError(f"batch_size {batch} does not split over {world} processes")
    if attrs["shuffle_mode"] not in SHUFFLE_MODES:
        raise ShapeError(f"shuffle_mode must be one of {SHUFFLE_MODES}, got {attrs['shuffle_mode']!r}")
    seed = attrs.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, numbers.Integral)):
        raise ShapeError(f"seed must be an int or None, got {seed!r}")
    seed = None if seed is None else int(seed)
    files = tuple(str(f) for f in attrs["files"])
    return ReaderConfig(op=op, data_dir="", data_part_num=max(1, len(files)), batch_size=batch // world,
                        random_shuffle=bool(attrs["random_shuffle"]),
                        shuffle_buffer_size=int_attr(attrs, "shuffle_buffer_size", 1),
                        shuffle_after_epoch=bool(attrs["shuffle_after_epoch"]), seed=seed,
                        rank=int_attr(attrs, "rank", 0), world=world, files=files, format="onerec",
                        shuffle_mode=attrs["shuffle_mode"])


def _reader_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    config = onerec_config("onerec_reader", attrs)
    onerec_paths(config.files, "onerec_reader")  # missing files fail when the job is traced
    return [BlobSpec((config.batch_size,), dtypes.int64)]


def _reader_kernel(ctx: KernelContext) -> Any:
    reader = Reader(onerec_config(ctx.node_name, ctx.attrs), alive=session_alive(ctx.attrs.get("session")))
    ctx.shared[("ofrecord", ctx.node_name)] = reader  # where find_reader looks, as for OFRecord readers
    out = ctx.out(0)

    def run() -> Any:
        out[...] = ctx.xp.asarray(reader.next().ids)
        return out

    return run


def _shape(attrs: dict, key: str) -> tuple[int, ...]:
    shape = tuple(attrs[key])
    if any(isinstance(d, bool) or not isinstance(d, numbers.Integral) for d in shape):
        raise ShapeError(f"{key} must hold ints, got {attrs[key]!r}")
    return tuple(int(d) for d in shape)


def _decoder_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (records,) = inputs
    if records.dtype != dtypes.int64 or len(records.shape) != 1:
        raise ShapeError(f"the input must be a onerec_reader's record blob, got {records}")
    dtype = dtypes.as_dtype(attrs["data_type"])
    if np.dtype(dtype.name) not in DECODED_DTYPES:
        raise ShapeError(f"dtype must be one of int8, int32, int64, float32, float64 (the OneRec lists legacy "
                         f"decoded), got {dtype.name}")
    shape = _shape(attrs, "static_shape")
    if any(d < 0 for d in shape):
        raise ShapeError(f"shape must hold ints >= 0, got {list(shape)}")
    if attrs["is_dynamic"]:
        raise ShapeError("is_dynamic=True (a blob whose shape each batch decides) is not supported: give the "
                         "shape every record's tensor has, with batch_padding to pad the first axis")
    if attrs["has_reshape"]:
        reshape = _shape(attrs, "reshape")
        if len(reshape) != len(shape) or sum(d == -1 for d in reshape) > 1 or any(d == 0 or d < -1 for d in reshape):
            raise ShapeError(f"reshape must have the shape's {len(shape)} axes, positive sizes and at most one "
                             f"-1, got {list(reshape)}")
    if attrs["has_batch_padding"]:
        padding = _shape(attrs, "batch_padding")
        if len(padding) != len(shape) or any(padding[1:]) or padding[0] < -1:
            raise ShapeError(f"batch_padding pads the first axis only: ({len(shape)} values, the first 0 (equal "
                             f"sizes), -1 (the batch's largest) or a size, the rest 0), got {list(padding)}")
    return [BlobSpec((records.shape[0], *shape), dtype)]


def _dims(tensor: Tensor, attrs: dict, where: str) -> tuple[int, ...]:
    """The record's tensor shape, after the decoder's reshape if it has one."""
    if not attrs["has_reshape"]:
        return tensor.shape
    reshape = tuple(attrs["reshape"])
    count = int(np.prod(tensor.shape, dtype=np.int64))
    fixed = int(np.prod([d for d in reshape if d != -1], dtype=np.int64))
    if (-1 in reshape and count % fixed) or (-1 not in reshape and count != fixed):
        raise OFRecordError(f"{where} has {count} values, which reshape={list(reshape)} cannot take")
    return tuple(count // fixed if d == -1 else d for d in reshape)


def _decoder_kernel(ctx: KernelContext) -> Any:
    reader = find_reader(ctx)
    attrs, node, spec = ctx.attrs, ctx.node_name, ctx.outputs[0]
    key, dtype, shape = attrs["key"], np.dtype(spec.dtype), tuple(spec.shape[1:])
    list_type = LIST_TYPES[dtype]
    padding = tuple(attrs["batch_padding"])[0] if attrs["has_batch_padding"] else None

    def decode(records: list[dict[str, Tensor]], refs: list[RecordRef], _decoded: dict) -> np.ndarray:
        tensors: list[np.ndarray] = []  # each record's values
        dims: list[tuple[int, ...]] = []
        for example, ref in zip(records, refs):
            where = f"{node}: feature {key!r} of frame {ref.index} of {str(ref.path)!r}"
            tensor = example.get(key)
            if tensor is None:
                raise OFRecordError(f"{node}: frame {ref.index} of {str(ref.path)!r} has no feature {key!r}; "
                                    f"it has {sorted(example)}")
            if tensor.list_type != list_type or tensor.values is None:
                raise OFRecordError(f"{where} is a {LIST_NAMES.get(tensor.list_type, 'tensor without values')}, "
                                    f"not the {LIST_NAMES[list_type]} a {dtype.name} blob reads")
            d = _dims(tensor, attrs, where)
            if len(d) != len(shape):
                raise OFRecordError(f"{where} has shape {list(d)}, not {len(shape)} axes as shape={list(shape)}")
            tensors.append(tensor.values)
            dims.append(d)
        first = [d[0] for d in dims] if shape else []
        if padding is None or padding == 0:
            instance = dims[0]
            if any(d != instance for d in dims):
                raise OFRecordError(f"{node}: the batch's {key!r} tensors differ in shape ({sorted(set(dims))})"
                                    + ("; batch_padding=[-1, ...] pads the first axis" if padding is None else ""))
        else:
            size = max(first) if padding == -1 else padding
            if max(first) > size:
                raise OFRecordError(f"{node}: a {key!r} tensor has {max(first)} rows, batch_padding allows {size}")
            if any(d[1:] != dims[0][1:] for d in dims):
                raise OFRecordError(f"{node}: the batch's {key!r} tensors differ beyond the first axis")
            instance = (size, *dims[0][1:])
        if instance != shape:
            raise OFRecordError(f"{node}: the batch's {key!r} tensors have shape {list(instance)}, the blob's "
                                f"shape is {list(shape)}")
        batch = np.zeros(spec.shape, dtype=dtype)
        flat = batch.reshape(len(tensors), -1)
        for i, (values, ref) in enumerate(zip(tensors, refs)):
            if values.size > flat.shape[1] or (padding is None and values.size != flat.shape[1]):
                raise OFRecordError(f"{node}: feature {key!r} of frame {ref.index} of {str(ref.path)!r} holds "
                                    f"{values.size} values for a shape of {flat.shape[1]}")
            flat[i, :values.size] = values
        return batch

    reader.add_decoder(node, decode)
    return copy_decoded(ctx, reader)


ONEREC_READER = OpDef("onerec_reader", _reader_infer, kernel=_reader_kernel, not_differentiable=True,
                      doc="The next batch of examples of a list of OneRec files (their ids, int64), read ahead",
                      effects=Effects(host_state=True), legacy=LegacyFace(name_prefix="OneRecReader"))
ONEREC_DECODER = OpDef("onerec_decoder", _decoder_infer, kernel=_decoder_kernel, not_differentiable=True,
                       doc="One feature's tensor of each OneRec example as a (batch, *shape) blob",
                       effects=Effects(host_state=True), legacy=LegacyFace(name_prefix="OneRecDecoder"))

OPS = (ONEREC_READER, ONEREC_DECODER)
