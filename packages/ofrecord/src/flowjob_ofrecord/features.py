"""Turning one feature of a record into numpy values, with errors that name the record and feature."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from flowjob_core.ir.dtypes import unfit_value

from flowjob_ofrecord.errors import OFRecordError
from flowjob_ofrecord.files import RecordRef
from flowjob_ofrecord.record_pb2 import OFRecord

# numeric list kinds and the numpy dtype their values arrive in
NUMERIC = {"float_list": np.float32, "double_list": np.float64, "int32_list": np.int32, "int64_list": np.int64}
BYTE_DTYPES = (np.dtype(np.int8), np.dtype(np.uint8))


def feature(record: OFRecord, key: str, ref: RecordRef, op: str):
    """``record.feature[key]``, or an ``OFRecordError`` naming the record, the key and the keys present."""
    if key not in record.feature:
        raise OFRecordError(f"{op}: {ref.where()} has no feature {key!r}; it has {sorted(record.feature)}")
    return record.feature[key]


def raw_values(record: OFRecord, key: str, dtype: np.dtype, ref: RecordRef, op: str) -> np.ndarray:
    """The feature's values as a flat array of ``dtype``.

    As legacy's raw decoder: numeric lists convert to any numeric dtype; a bytes list holds exactly one
    value whose bytes are the elements, and only an int8/uint8 blob can take it.
    """
    feat = feature(record, key, ref, op)
    kind = feat.WhichOneof("kind")
    if kind is None:
        raise OFRecordError(f"{op}: feature {key!r} of {ref.where()} holds no list")
    if kind == "bytes_list":
        if dtype not in BYTE_DTYPES:
            raise OFRecordError(f"{op}: feature {key!r} of {ref.where()} is a bytes_list, which decodes only to "
                                f"int8 or uint8, not {dtype.name}")
        values = feat.bytes_list.value
        if len(values) != 1:
            raise OFRecordError(f"{op}: feature {key!r} of {ref.where()} holds {len(values)} bytes values; "
                                f"the raw decoder takes exactly one")
        return np.frombuffer(values[0], dtype=dtype)
    values = np.asarray(getattr(feat, kind).value, dtype=NUMERIC[kind])
    lost = unfit_value(values, dtype)
    if lost is not None:  # legacy's C cast wrapped it silently (2**40 + 7 into int32 gave 7)
        raise OFRecordError(f"{op}: feature {key!r} of {ref.where()}: its {kind} {lost}, the blob's dtype")
    return values.astype(dtype, copy=False)


def bytes_values(record: OFRecord, key: str, ref: RecordRef, op: str) -> Sequence[bytes]:
    """The values of a bytes_list feature (a feature of another kind is an error naming it)."""
    feat = feature(record, key, ref, op)
    kind = feat.WhichOneof("kind")
    if kind != "bytes_list":
        raise OFRecordError(f"{op}: feature {key!r} of {ref.where()} is a {kind or 'empty feature'}, "
                            f"not the bytes_list this decoder reads")
    return feat.bytes_list.value


def fit(values: np.ndarray, count: int, truncate: bool, key: str, ref: RecordRef, op: str) -> np.ndarray:
    """``values`` with exactly ``count`` elements: equal, or (``truncate``) cut or zero-padded."""
    if values.size == count:
        return values
    if not truncate:
        raise OFRecordError(f"{op}: feature {key!r} of {ref.where()} has {values.size} values, the blob's shape "
                            f"needs {count} (truncate=True cuts or zero-pads)")
    out = np.zeros(count, dtype=values.dtype)
    n = min(count, values.size)
    out[:n] = values[:n]
    return out
