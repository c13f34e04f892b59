"""flow.data.ofrecord_reader and OFRecordRawDecoder in legacy jobs, on OFRecord folders the tests write."""
from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path
from typing import Tuple

import numpy as np
import pytest

import oneflow as flow
import oneflow.core.record.record_pb2 as ofrecord
import oneflow.typing as tp
from flowjob_core import OpBuildError
from flowjob_core.testing.modules import sibling
from flowjob_ofrecord import OFRecordError, write_part

_helpers = sibling(__file__, "op_surface_helpers")
fresh_session, as_rank = _helpers.fresh_session, _helpers.as_rank


def make_record(i: int) -> "ofrecord.OFRecord":
    """Record i, built as legacy programs build theirs."""
    return ofrecord.OFRecord(feature={
        "images": ofrecord.Feature(float_list=ofrecord.FloatList(value=[i + k / 8 for k in range(6)])),
        "labels": ofrecord.Feature(int64_list=ofrecord.Int64List(value=[i % 10])),
        "class/label": ofrecord.Feature(int32_list=ofrecord.Int32List(value=[i])),
        "weight": ofrecord.Feature(double_list=ofrecord.DoubleList(value=[i / 3])),
        "pixels": ofrecord.Feature(bytes_list=ofrecord.BytesList(value=[bytes([i, 255 - i, 7])])),
        "tokens": ofrecord.Feature(int32_list=ofrecord.Int32List(value=list(range(i % 4)))),
    })


def write_dataset(root: Path, counts=(6, 4), suffix_length: int = 5) -> Path:
    start = 0
    for n, count in enumerate(counts):
        write_part(root / f"part-{str(n).zfill(suffix_length)}", [make_record(i) for i in range(start, start + count)])
        start += count
    return root


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return write_dataset(tmp_path / "ofrecord")


def test_raw_decoders_give_exact_values(data: Path) -> None:
    @flow.global_function(type="predict")
    def read() -> Tuple[tp.Numpy, tp.Numpy, tp.Numpy, tp.Numpy, tp.Numpy, tp.Numpy]:
        records = flow.data.ofrecord_reader(str(data), batch_size=5, data_part_num=2, part_name_suffix_length=5)
        images = flow.data.OFRecordRawDecoder(records, "images", shape=(2, 3), dtype=flow.float)
        labels = flow.data.OFRecordRawDecoder(records, "labels", shape=(1,), dtype=flow.int32)
        label = flow.data.ofrecord_raw_decoder(records, "class/label", shape=(), dtype=flow.int64)
        weight = flow.data.OFRecordRawDecoder(records, "weight", shape=(), dtype=flow.double)
        pixels = flow.data.OFRecordRawDecoder(records, "pixels", shape=(3,), dtype=flow.uint8)
        return records, images, labels, label, weight, pixels

    for step in range(3):  # 10 records: the third step starts the second epoch
        ids = np.arange(step * 5, step * 5 + 5) % 10
        records, images, labels, label, weight, pixels = read()
        np.testing.assert_array_equal(records, ids)
        expect = (ids[:, None] + np.arange(6) / 8).astype(np.float32).reshape(5, 2, 3)
        np.testing.assert_array_equal(images, expect)
        assert images.dtype == np.float32
        np.testing.assert_array_equal(labels, (ids % 10)[:, None].astype(np.int32))
        assert labels.dtype == np.int32
        np.testing.assert_array_equal(label, ids.astype(np.int64))
        np.testing.assert_array_equal(weight, ids / 3)
        np.testing.assert_array_equal(pixels, np.stack([ids, 255 - ids, np.full(5, 7)], 1).astype(np.uint8))


def test_truncate_pads_and_cuts(data: Path) -> None:
    @flow.global_function()
    def read() -> tp.Numpy:
        records = flow.data.ofrecord_reader(str(data), batch_size=4, data_part_num=2, part_name_suffix_length=5)
        return flow.data.OFRecordRawDecoder(records, "tokens", shape=(2,), dtype=flow.int32, auto_zero_padding=True)

    # records 0..3 hold 0, 1, 2 and 3 tokens: padded to 2 with zeros, the last cut
    np.testing.assert_array_equal(read(), [[0, 0], [0, 0], [0, 1], [0, 1]])


def test_the_job_names_the_ops_as_legacy(data: Path) -> None:
    @flow.global_function()
    def read() -> tp.Numpy:
        records = flow.data.ofrecord_reader(str(data), batch_size=2, data_part_num=2, part_name_suffix_length=5)
        return flow.data.OFRecordRawDecoder(records, "labels", shape=(1,), dtype=flow.int32, name="labels")

    read()
    names = [n.name for n in read.ensure_traced().nodes]
    assert names[0].startswith("OFRecord_Reader_") and "labels" in names


def test_seeded_shuffle_repeats_through_jobs(data: Path) -> None:
    def run(seed: int) -> list[int]:
        flow.clear_default_session()

        @flow.global_function()
        def read() -> tp.Numpy:
            return flow.data.ofrecord_reader(str(data), batch_size=5, data_part_num=2, part_name_suffix_length=5,
                                             random_shuffle=True, shuffle_buffer_size=3, shuffle_after_epoch=True,
                                             seed=seed)

        return [int(i) for _ in range(4) for i in read()]

    first = run(1)
    assert first == run(1) and first != run(2)
    assert sorted(first[:10]) != first[:10] or sorted(first[10:]) != first[10:]


def test_sharding_by_the_hook_is_disjoint_and_complete(data: Path) -> None:
    seen = []
    for rank in range(2):
        flow.clear_default_session()
        as_rank(rank, 2)

        @flow.global_function()
        def read() -> tp.Numpy:
            return flow.data.ofrecord_reader(str(data), batch_size=4, data_part_num=2, part_name_suffix_length=5)

        out = read()
        assert out.shape == (2,)  # the batch splits over the two processes
        seen.append({int(i) for _ in range(6) for i in read()})
    assert seen[0] == set(range(6)) and seen[1] == set(range(6, 10))


def test_missing_folder_fails_when_traced_naming_the_op(tmp_path: Path) -> None:
    @flow.global_function()
    def read() -> tp.Numpy:
        return flow.data.ofrecord_reader(str(tmp_path / "absent"), batch_size=2, name="train_reader")

    with pytest.raises(OpBuildError, match=r"(?s)train_reader.*absent' does not exist"):
        read()


def test_missing_feature_names_file_record_and_feature_and_session_goes_on(data: Path) -> None:
    @flow.global_function()
    def bad() -> tp.Numpy:
        records = flow.data.ofrecord_reader(str(data), batch_size=2, data_part_num=2, part_name_suffix_length=5)
        return flow.data.OFRecordRawDecoder(records, "label", shape=(), dtype=flow.int32, name="dec")

    with pytest.raises(OFRecordError, match=r"dec: record 0 of '.*part-00000' has no feature 'label'; it has "
                                            r"\['class/label', "):
        bad()

    @flow.global_function()
    def good() -> tp.Numpy:
        records = flow.data.ofrecord_reader(str(data), batch_size=2, data_part_num=2, part_name_suffix_length=5)
        return flow.data.OFRecordRawDecoder(records, "class/label", shape=(), dtype=flow.int32)

    np.testing.assert_array_equal(good(), [0, 1])


@pytest.mark.parametrize(("feature", "dtype", "shape", "message"), [
    ("pixels", flow.float, (3,), "'pixels' of record 0 of .* is a bytes_list, which decodes only to int8 or uint8"),
    ("images", flow.float, (4,), "'images' of record 0 of .* has 6 values, the blob's shape needs 4"),
])
def test_wrong_kind_or_size(data: Path, feature, dtype, shape, message) -> None:
    @flow.global_function()
    def read() -> tp.Numpy:
        records = flow.data.ofrecord_reader(str(data), batch_size=2, data_part_num=2, part_name_suffix_length=5)
        return flow.data.OFRecordRawDecoder(records, feature, shape=shape, dtype=dtype)

    with pytest.raises(OFRecordError, match=message):
        read()


@pytest.mark.parametrize(("values", "dtype", "message"), [
    (ofrecord.Feature(int64_list=ofrecord.Int64List(value=[3, 2**40 + 7])), flow.int32,
     r"'big' of record 0 of .*: its int64_list value 1099511627783 \(element 1\) does not fit int32"),
    (ofrecord.Feature(float_list=ofrecord.FloatList(value=[float("nan"), 300.0])), flow.uint8,
     r"'big' of record 0 of .*: its float_list value nan \(element 0\) does not fit uint8"),
    (ofrecord.Feature(float_list=ofrecord.FloatList(value=[1.0, 300.0])), flow.uint8,
     r"its float_list value 300.0 \(element 1\) does not fit uint8"),
])
def test_a_value_that_does_not_fit_the_blob_dtype_names_feature_and_record(tmp_path: Path, values, dtype,
                                                                            message) -> None:
    write_part(tmp_path / "part-0", [ofrecord.OFRecord(feature={"big": values})])

    @flow.global_function()
    def read() -> tp.Numpy:
        records = flow.data.ofrecord_reader(str(tmp_path), batch_size=1, data_part_num=1, part_name_suffix_length=1)
        return flow.data.OFRecordRawDecoder(records, "big", shape=(2,), dtype=dtype)

    with pytest.raises(OFRecordError, match=message):
        read()


def test_truncated_part_fails_when_planned(data: Path) -> None:
    part = data / "part-00001"
    part.write_bytes(part.read_bytes()[:-1])

    @flow.global_function()
    def read() -> tp.Numpy:
        return flow.data.ofrecord_reader(str(data), batch_size=2, data_part_num=2, part_name_suffix_length=5)

    with pytest.raises(OFRecordError, match="part-00001' is truncated .*record 3 at byte"):
        read()


def test_decoder_needs_a_reader_blob(data: Path) -> None:
    @flow.global_function()
    def read(x: tp.Numpy.Placeholder((2,), dtype=flow.int64)) -> tp.Numpy:
        return flow.data.OFRecordRawDecoder(x, "labels", shape=(), dtype=flow.int32)

    with pytest.raises(OpBuildError, match="is not the output of flow.data.ofrecord_reader"):
        read(np.zeros(2, np.int64))


def test_reader_thread_stops_when_the_session_closes(data: Path) -> None:
    @flow.global_function()
    def read() -> tp.Numpy:
        return flow.data.ofrecord_reader(str(data), batch_size=2, data_part_num=2, part_name_suffix_length=5)

    read()
    threads = [t for t in threading.enumerate() if t.name.startswith("flowjob-ofrecord ")]
    assert threads
    flow.clear_default_session()
    for t in threads:
        t.join(2)
        assert not t.is_alive()


def test_a_program_exits_cleanly_with_its_reader_running(data: Path) -> None:
    program = f"""
import oneflow as flow
import oneflow.typing as tp

@flow.global_function()
def read() -> tp.Numpy:
    records = flow.data.ofrecord_reader({str(data)!r}, batch_size=2, data_part_num=2, part_name_suffix_length=5)
    return flow.data.OFRecordRawDecoder(records, "class/label", shape=(), dtype=flow.int32)

print(read().tolist(), read().tolist())
"""
    proc = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[0, 1] [2, 3]" and proc.stderr == ""
