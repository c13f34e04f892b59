"""OneRec files, legacy v0.4's second record format (``flow.data.onerec_reader``), read and written.

A file is a sequence of frames: a 24-byte header (the magic ``^ONEREC$`` as a little-endian int64, an
int32 0, the int32 payload size, and the XXH64 (seed 0) of those 16 bytes stored big-endian), the
payload padded with zeros to a multiple of 8 bytes, then the XXH64 of the payload, big-endian. The
payload is a FlatBuffers ``Example`` (file identifier ``1REC``): a vector of ``Feature`` tables (sorted
by ``name``), each a name and a ``Tensor`` (an int32 ``shape`` vector and a union of typed lists).
"""
from __future__ import annotations

import os
import struct
import tempfile
from pathlib import Path
from typing import Iterable, Mapping

import numpy as np

from flowjob_ofrecord.errors import OFRecordError
from flowjob_ofrecord.files import RecordRef

MAGIC = 0x24434552454E4F5E  # b"^ONEREC$" read as a little-endian int64
HEAD = struct.Struct("<qii")
HEADER_SIZE = HEAD.size + 8
IDENTIFIER = b"1REC"
# the Tensor.data union's numeric member types, by numpy dtype (legacy's onerec_decoder read all but int16)
LIST_TYPES: dict[np.dtype, int] = {np.dtype(np.int8): 1, np.dtype(np.int16): 2, np.dtype(np.int32): 3,
                                   np.dtype(np.int64): 4, np.dtype(np.float32): 5, np.dtype(np.float64): 6}
LIST_DTYPES: dict[int, np.dtype] = {code: dtype for dtype, code in LIST_TYPES.items()}
LIST_NAMES = {1: "Int8List", 2: "Int16List", 3: "Int32List", 4: "Int64List", 5: "Float32List", 6: "Float64List",
              7: "StringList", 8: "BinaryList"}

_P1, _P2, _P3, _P4, _P5 = (0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0x85EBCA77C2B2AE63,
                           0x27D4EB2F165667C5)
_M = (1 << 64) - 1


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _M


def _round(acc: int, lane: int) -> int:
    return (_rotl((acc + lane * _P2) & _M, 31) * _P1) & _M


def xxh64(data: bytes, seed: int = 0) -> int:
    """The 64-bit xxHash of ``data`` (the digest OneRec frames carry)."""
    n, i = len(data), 0
    if n >= 32:
        v = [(seed + _P1 + _P2) & _M, (seed + _P2) & _M, seed & _M, (seed - _P1) & _M]
        lanes = struct.unpack_from(f"<{(n // 32) * 4}Q", data)
        for k in range(0, len(lanes), 4):
            v = [_round(v[j], lanes[k + j]) for j in range(4)]
        i = (n // 32) * 32
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M
        for acc in v:
            h = (((h ^ _round(0, acc)) * _P1) + _P4) & _M
    else:
        h = (seed + _P5) & _M
    h = (h + n) & _M
    while i + 8 <= n:
        (lane,) = struct.unpack_from("<Q", data, i)
        h = ((_rotl(h ^ _round(0, lane), 27) * _P1) + _P4) & _M
        i += 8
    if i + 4 <= n:
        (lane,) = struct.unpack_from("<I", data, i)
        h = ((_rotl(h ^ ((lane * _P1) & _M), 23) * _P2) + _P3) & _M
        i += 4
    while i < n:
        h = (_rotl(h ^ ((data[i] * _P5) & _M), 11) * _P1) & _M
        i += 1
    h = ((h ^ (h >> 33)) * _P2) & _M
    h = ((h ^ (h >> 29)) * _P3) & _M
    return h ^ (h >> 32)


# ---- frames ----

def frame(payload: bytes) -> bytes:
    head = HEAD.pack(MAGIC, 0, len(payload))
    pad = b"\0" * (-len(payload) % 8)
    return head + xxh64(head).to_bytes(8, "big") + payload + pad + xxh64(payload).to_bytes(8, "big")


def index_onerec_file(path: Path) -> list[RecordRef]:
    """Every frame's payload position in one OneRec file, checking headers and their digests."""
    refs: list[RecordRef] = []
    total = path.stat().st_size
    with open(path, "rb") as f:
        offset = 0
        while offset < total:
            head = f.read(HEADER_SIZE)
            where = f"{str(path)!r}: frame {len(refs)} at byte {offset}"
            if len(head) < HEADER_SIZE:
                raise OFRecordError(f"{where} is truncated ({len(head)} of the {HEADER_SIZE} header bytes)")
            magic, reserved, size = HEAD.unpack_from(head)
            if magic != MAGIC or reserved != 0:
                raise OFRecordError(f"{where} does not start with the OneRec magic; not a OneRec file")
            if int.from_bytes(head[HEAD.size:], "big") != xxh64(head[:HEAD.size]):
                raise OFRecordError(f"{where}: the header's digest does not match")
            end = offset + HEADER_SIZE + size + (-size % 8) + 8
            if size < 0 or end > total:
                raise OFRecordError(f"{where} is truncated: it declares {size} payload bytes, the file ends first")
            refs.append(RecordRef(path, len(refs), offset + HEADER_SIZE, size))
            offset = end
            f.seek(offset)
    return refs


def read_onerec_payload(handle, ref: RecordRef) -> bytes:
    """The payload of frame ``ref``, checked against the digest after it."""
    handle.seek(ref.offset)
    data = handle.read(ref.size + (-ref.size % 8) + 8)
    if len(data) != ref.size + (-ref.size % 8) + 8:
        raise OFRecordError(f"frame {ref.index} of {str(ref.path)!r} is truncated")
    payload = data[:ref.size]
    if int.from_bytes(data[-8:], "big") != xxh64(payload):
        raise OFRecordError(f"frame {ref.index} of {str(ref.path)!r}: the payload's digest does not match "
                            f"(a corrupt file)")
    return payload


# ---- the FlatBuffers Example ----

class Tensor:
    """One feature's tensor: its shape and its values (a typed list, or None for a list kind not decoded)."""

    __slots__ = ("shape", "list_type", "values")

    def __init__(self, shape: tuple[int, ...], list_type: int, values: np.ndarray | None) -> None:
        self.shape, self.list_type, self.values = shape, list_type, values


def parse_example(buf: bytes, ref: RecordRef) -> dict[str, Tensor]:
    """A OneRec payload's features by name; an out-of-range offset or a wrong identifier is an error."""
    n = len(buf)

    def fail(what: str) -> OFRecordError:
        return OFRecordError(f"frame {ref.index} of {str(ref.path)!r} is not a OneRec Example: {what}")

    def u32(pos: int) -> int:
        if pos < 0 or pos + 4 > n:
            raise fail(f"offset {pos} out of its {n} bytes")
        return struct.unpack_from("<I", buf, pos)[0]

    def field(table: int, slot: int) -> int:
        """The position of field ``slot`` (its vtable offset) of the table at ``table``, 0 when absent."""
        vtable = table - struct.unpack_from("<i", buf, table)[0] if table + 4 <= n else -1
        if vtable < 0 or vtable + 4 > n:
            raise fail(f"table at {table} has its vtable out of range")
        vsize = struct.unpack_from("<H", buf, vtable)[0]
        if slot + 2 > vsize:
            return 0
        rel = struct.unpack_from("<H", buf, vtable + slot)[0]
        return table + rel if rel else 0

    def deref(pos: int) -> int:
        return pos + u32(pos)

    def vector(pos: int, itemsize: int) -> tuple[int, int]:
        start = deref(pos)
        length = u32(start)
        if start + 4 + length * itemsize > n:
            raise fail(f"vector at {start} runs past the end")
        return start + 4, length

    if n < 8 or buf[4:8] != IDENTIFIER:
        raise fail(f"no {IDENTIFIER.decode()} identifier")
    example = deref(0)
    out: dict[str, Tensor] = {}
    features_at = field(example, 4)
    if not features_at:
        return out
    first, count = vector(features_at, 4)
    for k in range(count):
        feature = deref(first + 4 * k)
        name_at = field(feature, 4)
        if not name_at:
            raise fail(f"feature {k} has no name")
        start, length = vector(name_at, 1)
        name = buf[start:start + length].decode("utf-8", "replace")
        tensor_at = field(feature, 6)
        if not tensor_at:
            raise fail(f"feature {name!r} has no tensor")
        tensor = deref(tensor_at)
        shape_at = field(tensor, 4)
        shape: tuple[int, ...] = ()
        if shape_at:
            start, length = vector(shape_at, 4)
            shape = struct.unpack_from(f"<{length}i", buf, start)
        type_at = field(tensor, 6)
        list_type = buf[type_at] if type_at else 0
        data_at = field(tensor, 8)
        values = None
        if list_type in LIST_DTYPES and data_at:
            values_at = field(deref(data_at), 4)
            dtype = LIST_DTYPES[list_type]
            values = np.zeros(0, dtype)
            if values_at:
                start, length = vector(values_at, dtype.itemsize)
                values = np.frombuffer(buf, dtype.newbyteorder("<"), length, start).astype(dtype)
        out[name] = Tensor(tuple(shape), list_type, values)
    return out


class _Builder:
    """Lays a FlatBuffers buffer out front to back: every offset points forward, as FlatBuffers needs."""

    def __init__(self) -> None:
        self.buf = bytearray()

    def align(self, size: int, extra: int = 0) -> None:
        self.buf += b"\0" * (-(len(self.buf) + extra) % size)

    def table(self, fields: list[tuple[str, object]]) -> tuple[int, list[int]]:
        """A vtable then its table of 4-byte fields ("o": an offset patched later, "b": a ubyte, padded);
        returns the table's position and each field's position."""
        self.align(4)
        vt = len(self.buf)
        slots = len(fields)
        self.buf += struct.pack(f"<HH{slots}H", 4 + 2 * slots, 4 + 4 * slots, *[4 + 4 * i for i in range(slots)])
        self.align(4)
        table = len(self.buf)
        self.buf += struct.pack("<i", table - vt)
        positions = []
        for kind, value in fields:
            positions.append(len(self.buf))
            self.buf += struct.pack("<I", 0) if kind == "o" else struct.pack("<B3x", value)
        return table, positions

    def patch(self, at: int, target: int) -> None:
        struct.pack_into("<I", self.buf, at, target - at)

    def vector(self, data: bytes, length: int, itemsize: int, terminate: bool = False) -> int:
        self.align(max(4, itemsize), 4)
        start = len(self.buf)
        self.buf += struct.pack("<I", length) + data + (b"\0" if terminate else b"")
        return start


def example_bytes(features: Mapping[str, np.ndarray]) -> bytes:
    """A OneRec Example payload of ``features`` (name -> array of int8/16/32/64 or float32/64 values,
    its shape kept as the tensor's shape)."""
    b = _Builder()
    b.buf += b"\0\0\0\0" + IDENTIFIER
    example, (features_field,) = b.table([("o", None)])
    b.patch(0, example)
    names = sorted(features)
    vec = b.vector(b"\0" * 4 * len(names), len(names), 4)
    b.patch(features_field, vec)
    for k, name in enumerate(names):
        array = np.asarray(features[name])
        if array.dtype not in LIST_TYPES:
            raise ValueError(f"feature {name!r}: {array.dtype} values have no OneRec list type "
                             f"(one of {sorted(str(d) for d in LIST_TYPES)})")
        feature, (name_field, tensor_field) = b.table([("o", None), ("o", None)])
        b.patch(vec + 4 + 4 * k, feature)
        b.patch(name_field, b.vector(name.encode(), len(name.encode()), 1, terminate=True))
        tensor, (shape_field, type_field, data_field) = b.table([("o", None), ("b", LIST_TYPES[array.dtype]),
                                                                 ("o", None)])
        b.patch(tensor_field, tensor)
        b.patch(shape_field, b.vector(np.asarray(array.shape, "<i4").tobytes(), array.ndim, 4))
        values, (values_field,) = b.table([("o", None)])
        b.patch(data_field, values)
        flat = array.astype(array.dtype.newbyteorder("<")).ravel()
        b.patch(values_field, b.vector(flat.tobytes(), flat.size, array.dtype.itemsize))
    return bytes(b.buf)


def write_onerec(path: str | os.PathLike, examples: Iterable[Mapping[str, np.ndarray]]) -> int:
    """Write a OneRec file of ``examples`` atomically (beside it, then renamed in); returns the count."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    count = 0
    try:
        with os.fdopen(fd, "wb") as f:
            for example in examples:
                f.write(frame(example_bytes(example)))
                count += 1
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return count
