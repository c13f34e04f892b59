"""OneRec frames, their XXH64 digests and the FlatBuffers Example payload, read back and broken on purpose."""
from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from flowjob_ofrecord import OFRecordError
from flowjob_ofrecord.files import RecordRef
from flowjob_ofrecord.onerec_format import (HEADER_SIZE, MAGIC, example_bytes, index_onerec_file, parse_example,
                                            read_onerec_payload, write_onerec, xxh64)

REF = RecordRef(Path("mem"), 0, 0, 0)


@pytest.mark.parametrize("data, digest", [
    (b"", 0xEF46DB3751D8E999),
    (b"a", 0xD24EC4F1A98C6E5B),
    (b"abc", 0x44BC2CF5AD770999),
    (b"Nobody inspects the spammish repetition", 0xFBCEA83C8A378BF1),  # past 32 bytes: the striped path
])
def test_xxh64_known_digests(data: bytes, digest: int) -> None:
    assert xxh64(data) == digest


def test_examples_read_back_with_their_shapes_and_list_kinds() -> None:
    features = {"labels": np.array([3], np.int32), "dense": np.arange(6, dtype=np.float64).reshape(2, 3) - 2.5,
                "ids": np.array([1, -2, 127], np.int8), "big": np.array([2 ** 40, -5], np.int64),
                "w": np.array([[0.5]], np.float32), "s": np.array([-300, 7], np.int16), "empty": np.zeros(0, np.int32)}
    parsed = parse_example(example_bytes(features), REF)
    assert sorted(parsed) == sorted(features)
    for name, array in features.items():
        tensor = parsed[name]
        assert tensor.shape == array.shape
        assert tensor.values.dtype == array.dtype
        np.testing.assert_array_equal(tensor.values, array.ravel())


def test_a_dtype_without_a_list_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="feature 'x': uint16 values have no OneRec list type"):
        example_bytes({"x": np.zeros(2, np.uint16)})


def test_frames_round_trip_and_are_aligned(tmp_path: Path) -> None:
    path = tmp_path / "a.onerec"
    examples = [{"v": np.arange(k, dtype=np.int64)} for k in range(5)]
    assert write_onerec(path, examples) == 5
    assert [p.name for p in tmp_path.iterdir()] == ["a.onerec"]
    refs = index_onerec_file(path)
    assert [r.index for r in refs] == list(range(5))
    assert all(r.offset % 8 == 0 for r in refs)  # every header and payload starts 8-aligned
    with open(path, "rb") as f:
        for k, ref in enumerate(refs):
            np.testing.assert_array_equal(parse_example(read_onerec_payload(f, ref), ref)["v"].values, np.arange(k))
    (magic, reserved, size) = struct.unpack_from("<qii", path.read_bytes())
    assert (magic, reserved) == (MAGIC, 0) and path.read_bytes()[:8] == b"^ONEREC$"


def test_a_flipped_payload_byte_fails_its_digest(tmp_path: Path) -> None:
    path = tmp_path / "a.onerec"
    write_onerec(path, [{"v": np.arange(4, dtype=np.int32)}])
    data = bytearray(path.read_bytes())
    data[HEADER_SIZE + 20] ^= 0xFF
    path.write_bytes(bytes(data))
    (ref,) = index_onerec_file(path)
    with open(path, "rb") as f, pytest.raises(OFRecordError, match=r"frame 0 of .*a.onerec': the payload's digest"):
        read_onerec_payload(f, ref)


def test_a_broken_header_is_named(tmp_path: Path) -> None:
    path = tmp_path / "a.onerec"
    write_onerec(path, [{"v": np.arange(4, dtype=np.int32)}] * 2)
    data = bytearray(path.read_bytes())
    data[12] ^= 1  # the payload size: the header digest no longer matches
    path.write_bytes(bytes(data))
    with pytest.raises(OFRecordError, match=r"frame 0 at byte 0: the header's digest does not match"):
        index_onerec_file(path)
    path.write_bytes(b"PK\x03\x04" + bytes(40))
    with pytest.raises(OFRecordError, match="does not start with the OneRec magic"):
        index_onerec_file(path)


def test_a_truncated_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "a.onerec"
    write_onerec(path, [{"v": np.arange(40, dtype=np.int32)}] * 3)
    whole = path.read_bytes()
    path.write_bytes(whole[:-30])
    with pytest.raises(OFRecordError, match=r"frame 2 at byte \d+ is truncated: it declares \d+ payload bytes"):
        index_onerec_file(path)
    path.write_bytes(whole[:HEADER_SIZE - 3])
    with pytest.raises(OFRecordError, match="frame 0 at byte 0 is truncated"):
        index_onerec_file(path)


@pytest.mark.parametrize("payload, message", [
    (b"", "no 1REC identifier"),
    (b"\x08\0\0\0XXXX" + bytes(8), "no 1REC identifier"),
    (b"\xff\xff\0\x001REC", "table at 65535 has its vtable out of range"),
    (example_bytes({"v": np.arange(64, dtype=np.int64)})[:-64], r"vector at \d+ runs past the end"),
])
def test_a_payload_that_is_no_example_is_named(payload: bytes, message: str) -> None:
    with pytest.raises(OFRecordError, match=f"frame 0 of 'mem' is not a OneRec Example: {message}"):
        parse_example(payload, REF)
