"""flow.data.onerec_reader and flow.data.onerec_decoder (legacy v0.4) in jobs, on OneRec files the tests write."""
from __future__ import annotations

import glob
from pathlib import Path
from typing import Tuple

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core import OpBuildError
from flowjob_core.testing.modules import sibling
from flowjob_ofrecord import OFRecordError
from flowjob_ofrecord.onerec_format import write_onerec

_helpers = sibling(__file__, "op_surface_helpers")
fresh_session, as_rank = _helpers.fresh_session, _helpers.as_rank


def example(i: int) -> dict[str, np.ndarray]:
    return {"labels": np.array([i % 2], np.int32), "dense_fields": np.array([i, i + 0.25, i + 0.5], np.float32),
            "ids": np.arange(i % 3 + 1, dtype=np.int64) + 10 * i, "grid": np.arange(6, dtype=np.float64) + i}


@pytest.fixture
def files(tmp_path: Path) -> list[str]:
    """Two files: examples 0-5 and 6-9."""
    write_onerec(tmp_path / "a.onerec", [example(i) for i in range(6)])
    write_onerec(tmp_path / "b.onerec", [example(i) for i in range(6, 10)])
    return [str(tmp_path / "a.onerec"), str(tmp_path / "b.onerec")]


def test_values_in_file_order_epoch_after_epoch(files: list[str]) -> None:
    @flow.global_function(type="predict")
    def read() -> Tuple[tp.Numpy, tp.Numpy, tp.Numpy, tp.Numpy, tp.Numpy]:
        records = flow.data.onerec_reader(files, batch_size=4)
        return (records,
                flow.data.onerec_decoder(records, key="labels", shape=(1,), dtype=flow.int32),
                flow.data.onerec_decoder(records, key="dense_fields", shape=(3,), dtype=flow.float),
                flow.data.OneRecDecoder(records, "ids", flow.int64, (3,), batch_padding=(3,)),
                flow.data.onerec_decoder(records, key="grid", shape=(3, 2), dtype=flow.double, reshape=(-1, 2)))

    seen = []
    for _ in range(5):  # 20 examples: two epochs of 10
        ids, labels, dense, padded, grid = read()
        assert labels.dtype == np.int32 and dense.dtype == np.float32 and padded.dtype == np.int64
        for row, i in enumerate(ids.tolist()):
            want = example(i)
            assert labels[row].tolist() == want["labels"].tolist()
            np.testing.assert_array_equal(dense[row], want["dense_fields"])
            np.testing.assert_array_equal(padded[row], np.pad(want["ids"], (0, 3 - want["ids"].size)))
            np.testing.assert_array_equal(grid[row], want["grid"].reshape(3, 2))
        seen += ids.tolist()
    assert seen == list(range(10)) * 2


def reader_job(files: list[str], **kwargs):
    @flow.global_function(type="predict")
    def read() -> tp.Numpy:
        return flow.data.onerec_reader(files, batch_size=4, **kwargs)

    return read


@pytest.mark.parametrize("mode", ["instance", "batch"])
def test_seeded_shuffles_repeat(files: list[str], mode: str) -> None:
    runs = []
    for _ in range(2):
        flow.clear_default_session()
        read = reader_job(files, random_shuffle=True, shuffle_mode=mode, shuffle_buffer_size=3,
                          shuffle_after_epoch=True, seed=7)
        runs.append([read().tolist() for _ in range(10)])
    assert runs[0] == runs[1]
    flat = [i for batch in runs[0] for i in batch]
    assert flat != sorted(flat) and set(flat) == set(range(10))


def test_batch_mode_shuffles_whole_batches_of_consecutive_examples(files: list[str]) -> None:
    read = reader_job(files, random_shuffle=True, shuffle_mode="batch", shuffle_buffer_size=4, seed=3)
    batches = [read().tolist() for _ in range(12)]
    for batch in batches:  # consecutive within a batch (over the epoch boundary 9 -> 0)
        assert all((b - a) % 10 == 1 for a, b in zip(batch, batch[1:])), batch
    unshuffled = [[(4 * k + j) % 10 for j in range(4)] for k in range(12)]
    assert batches != unshuffled


def test_sharding_by_the_hook_gives_each_rank_its_file(files: list[str]) -> None:
    per_rank = []
    for rank in (0, 1):
        flow.clear_default_session()
        as_rank(rank, 2)
        read = reader_job(files)  # batch 4 over 2 ranks: 2 each
        per_rank.append({i for _ in range(3) for i in read().tolist()})
    assert per_rank == [set(range(6)), set(range(6, 10))]


def decoder_job(files: list[str], **kwargs):
    @flow.global_function(type="predict")
    def read() -> tp.Numpy:
        records = flow.data.onerec_reader(files, batch_size=4)
        return flow.data.onerec_decoder(records, name="dec", **kwargs)

    return read


@pytest.mark.parametrize("kwargs, message", [
    ({"key": "absent", "shape": (1,), "dtype": flow.int32},
     r"dec: frame 0 of '.*a.onerec' has no feature 'absent'; it has \['dense_fields', 'grid', 'ids', 'labels'\]"),
    ({"key": "labels", "shape": (1,), "dtype": flow.int64},
     "dec: feature 'labels' of frame 0 of '.*a.onerec' is a Int32List, not the Int64List a int64 blob reads"),
    ({"key": "dense_fields", "shape": (4,), "dtype": flow.float},
     r"dec: the batch's 'dense_fields' tensors have shape \[3\], the blob's shape is \[4\]"),
    ({"key": "ids", "shape": (3,), "dtype": flow.int64},
     r"dec: the batch's 'ids' tensors differ in shape .*batch_padding=\[-1, ...\] pads the first axis"),
    ({"key": "ids", "shape": (2,), "dtype": flow.int64, "batch_padding": (2,)},
     "dec: a 'ids' tensor has 3 rows, batch_padding allows 2"),
    ({"key": "grid", "shape": (4, 2), "dtype": flow.double, "reshape": (4, -1)},
     r"feature 'grid' of frame 0 of .* has 6 values, which reshape=\[4, -1\] cannot take"),
])
def test_bad_features_name_decoder_frame_and_key_and_the_session_goes_on(files, kwargs, message) -> None:
    read = decoder_job(files, **kwargs)
    with pytest.raises(OFRecordError, match=message):
        read()
    flow.clear_default_session()
    assert decoder_job(files, key="labels", shape=(1,), dtype=flow.int32)().shape == (4, 1)


@pytest.mark.parametrize("kwargs, message", [
    ({"is_dynamic": True}, "is_dynamic=True .* is not supported"),
    ({"dtype": flow.uint8}, "dtype must be one of int8, int32, int64, float32, float64"),
    ({"batch_padding": (3, 1)}, "batch_padding pads the first axis only"),
    ({"reshape": (-1, -1)}, "reshape must have the shape's 1 axes"),
])
def test_unsupported_arguments_fail_when_traced(files, kwargs, message) -> None:
    args = {"key": "labels", "shape": (1,), "dtype": flow.int32, **kwargs}
    with pytest.raises(OpBuildError, match=f"(?s)dec.*{message}"):
        decoder_job(files, **args)()


def test_missing_files_and_wrong_inputs_are_named(tmp_path: Path, files: list[str]) -> None:
    with pytest.raises(OpBuildError, match=r"(?s)OneRec file\(s\) \['.*nowhere.onerec'\] do not exist"):
        reader_job([str(tmp_path / "nowhere.onerec")])()
    flow.clear_default_session()
    with pytest.raises(OpBuildError, match=r"files is empty \(legacy Wide&Deep globs"):
        reader_job([])()
    flow.clear_default_session()
    with pytest.raises(TypeError, match="files must be a list or tuple of paths, got str"):
        reader_job(files[0])()
    flow.clear_default_session()

    @flow.global_function(type="predict")
    def wrong() -> tp.Numpy:
        ofrecord = flow.data.decode_random(shape=(), dtype=flow.int64, batch_size=4)
        return flow.data.onerec_decoder(ofrecord, key="labels", shape=(1,), dtype=flow.int32)

    with pytest.raises(OpBuildError, match="is not the output of flow.data.onerec_reader"):
        wrong()


def test_a_corrupt_frame_stops_the_reader_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "part.onerec"
    write_onerec(path, [example(i) for i in range(8)])
    data = bytearray(path.read_bytes())
    data[-20] ^= 0xFF  # inside the last payload
    path.write_bytes(bytes(data))
    read = reader_job([str(path)])
    read()
    with pytest.raises(OFRecordError, match=r"frame 7 of .*part.onerec': the payload's digest does not match"):
        read()


def test_a_wide_and_deep_shaped_loader_trains_a_logistic_regression(tmp_path: Path) -> None:
    """Wide&Deep's --dataset_format onerec loader: files globbed from a folder, batch shuffle mode with a
    small buffer, verify_example=False, labels and dense fields decoded, feeding a train job."""
    rng = np.random.default_rng(0)
    for part in range(3):
        dense = rng.normal(size=(64, 4)).astype(np.float32)
        labels = (dense @ np.array([1.5, -2.0, 0.5, 1.0], np.float32) > 0).astype(np.int32)
        write_onerec(tmp_path / f"part-{part}.onerec",
                     [{"labels": labels[i:i + 1], "dense_fields": dense[i]} for i in range(64)])
    files = glob.glob(str(tmp_path / "*.onerec"))

    @flow.global_function(type="train")
    def train() -> tp.Numpy:
        records = flow.data.onerec_reader(files=files, batch_size=32, random_shuffle=True, verify_example=False,
                                          shuffle_mode="batch", shuffle_buffer_size=4, shuffle_after_epoch=True)
        labels = flow.data.onerec_decoder(records, key="labels", shape=(1,), dtype=flow.int32)
        dense = flow.data.onerec_decoder(records, key="dense_fields", shape=(4,), dtype=flow.float)
        logits = flow.layers.dense(dense, 1, kernel_initializer=flow.zeros_initializer(), name="wide")
        loss = flow.math.reduce_mean(flow.nn.sigmoid_cross_entropy_with_logits(
            labels=flow.cast(labels, flow.float), logits=logits))
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.5]), momentum=0).minimize(loss)
        return loss

    losses = [float(train()) for _ in range(60)]
    assert losses[0] == pytest.approx(np.log(2), rel=1e-5)  # zero weights: p = 1/2
    assert np.mean(losses[-6:]) < 0.5 * losses[0], losses
