"""Op records of the OFRecord data path: the reader (a source op) and the raw decoder.

The reader's output blob is the batch's record ids (int64, one per record: the record's position in
the folder, parts in order), so a job may return it. The records themselves stay with the node's
``Reader`` in the plan's shared kernel dict; a decoder node names its reader in the ``reader``
attribute, registers its decoding with it when the plan is built, and at each step copies the values
the reader thread has already decoded for the current batch.
"""
from __future__ import annotations

import numbers
from typing import Any, Sequence

import numpy as np

from flowjob_core import BlobSpec, Effects, KernelContext, LegacyFace, OpDef, ShapeError
from flowjob_core.ir import dtypes

from flowjob_ofrecord import features
from flowjob_ofrecord.files import RecordRef, part_paths
from flowjob_ofrecord.reader import Reader, ReaderConfig
from flowjob_ofrecord.record_pb2 import OFRecord
from flowjob_ofrecord.records.reader_nodes import copy_decoded, find_reader, int_attr
from flowjob_ofrecord.sessions import session_alive


def reader_config(op: str, attrs: dict) -> ReaderConfig:
    world = int_attr(attrs, "world", 1)
    batch = int_attr(attrs, "batch_size", 1)
    if batch % world:
        raise ShapeError(f"batch_size {batch} does not split over {world} processes")
    seed = attrs.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, numbers.Integral)):
        raise ShapeError(f"seed must be an int or None, got {seed!r}")
    return ReaderConfig(
        op=op, data_dir=str(attrs["data_dir"]), data_part_num=int_attr(attrs, "data_part_num", 1),
        batch_size=batch // world,
        part_name_prefix=str(attrs["part_name_prefix"]), part_name_suffix_length=int(attrs["part_name_suffix_length"]),
        random_shuffle=bool(attrs["random_shuffle"]), shuffle_buffer_size=int_attr(attrs, "shuffle_buffer_size", 1),
        shuffle_after_epoch=bool(attrs["shuffle_after_epoch"]), seed=seed, rank=int_attr(attrs, "rank", 0), world=world)


def _reader_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    config = reader_config("ofrecord_reader", attrs)
    # a missing folder or part file is reported when the job is traced, naming the op and its source line
    part_paths(config.data_dir, config.data_part_num, config.part_name_prefix, config.part_name_suffix_length)
    return [BlobSpec((config.batch_size,), dtypes.int64)]


def _reader_kernel(ctx: KernelContext) -> Any:
    reader = Reader(reader_config(ctx.node_name, ctx.attrs), alive=session_alive(ctx.attrs.get("session")))
    ctx.shared[("ofrecord", ctx.node_name)] = reader
    out = ctx.out(0)

    def run() -> Any:
        batch = reader.next()
        out[...] = ctx.xp.asarray(batch.ids)
        return out

    return run


def _raw_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (records,) = inputs
    if records.dtype != dtypes.int64 or len(records.shape) != 1:
        raise ShapeError(f"the input must be an ofrecord_reader's record blob, got {records}")
    shape = tuple(attrs["shape"])
    if any(isinstance(d, bool) or not isinstance(d, numbers.Integral) or d < 0 for d in shape):
        raise ShapeError(f"shape must hold ints >= 0, got {attrs['shape']!r}")
    return [BlobSpec((records.shape[0], *shape), dtypes.as_dtype(attrs["data_type"]))]


def _raw_kernel(ctx: KernelContext) -> Any:
    reader = find_reader(ctx)
    spec = ctx.outputs[0]
    key, dtype, node = ctx.attrs["name"], np.dtype(spec.dtype), ctx.node_name
    sample_shape = spec.shape[1:]
    count = int(np.prod(sample_shape, dtype=np.int64))
    truncate = bool(ctx.attrs["truncate"] or ctx.attrs["dim1_varying_length"])

    def decode(records: list[OFRecord], refs: list[RecordRef], _decoded: dict) -> np.ndarray:
        batch = np.empty(spec.shape, dtype=dtype)
        for i, (record, ref) in enumerate(zip(records, refs)):
            values = features.raw_values(record, key, dtype, ref, node)
            batch[i] = features.fit(values, count, truncate, key, ref, node).reshape(sample_shape)
        return batch

    reader.add_decoder(node, decode)
    return copy_decoded(ctx, reader)


OFRECORD_READER = OpDef("ofrecord_reader", _reader_infer, kernel=_reader_kernel, not_differentiable=True,
                        doc="The next batch of records of an OFRecord folder (their ids, int64), read ahead",
                        effects=Effects(host_state=True), legacy=LegacyFace(name_prefix="OFRecord_Reader"))
OFRECORD_RAW_DECODER = OpDef("ofrecord_raw_decoder", _raw_infer, kernel=_raw_kernel, not_differentiable=True,
                             doc="One feature of each record as a (batch, *shape) blob of a numeric dtype",
                             effects=Effects(host_state=True), legacy=LegacyFace(name_prefix="OFRecordRawDecoder"))

OPS = (OFRECORD_READER, OFRECORD_RAW_DECODER)
