"""flow.data.megatron_gpt_mmap_data_loader (and MegatronGPTMMapDataLoader) as legacy v0.4, on Megatron-LM's
indexed dataset written here the way Megatron's MMapIndexedDatasetBuilder writes it: samples of seq_length + 1
tokens, consecutive samples sharing a token, documents repeated over epochs, splits, shuffles, and the saved
progress a checkpoint resumes from."""
from __future__ import annotations

import struct

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core.testing.modules import sibling

fresh_session = sibling(__file__, "op_surface_helpers").fresh_session

DTYPE_CODES = {np.uint8: 1, np.int8: 2, np.int16: 3, np.int32: 4, np.int64: 5, np.float32: 6, np.float64: 7,
               np.uint16: 8}


def write_megatron_dataset(prefix, documents, dtype=np.uint16):
    """Megatron's MMapIndexedDatasetBuilder: ``.bin`` the tokens, ``.idx`` the header, sizes, pointers, doc_idx."""
    sizes = [len(d) for d in documents]
    with open(f"{prefix}.bin", "wb") as f:
        for doc in documents:
            f.write(np.asarray(doc, dtype=dtype).tobytes(order="C"))
    pointers, address = [], 0
    for size in sizes:
        pointers.append(address)
        address += size * np.dtype(dtype).itemsize
    doc_idx = list(range(len(sizes) + 1))  # end_document after every add_item
    with open(f"{prefix}.idx", "wb") as f:
        f.write(b"MMIDIDX\x00\x00")
        f.write(struct.pack("<Q", 1))
        f.write(struct.pack("<B", DTYPE_CODES[dtype]))
        f.write(struct.pack("<Q", len(sizes)))
        f.write(struct.pack("<Q", len(doc_idx)))
        f.write(np.array(sizes, dtype=np.int32).tobytes(order="C"))
        f.write(np.array(pointers, dtype=np.int64).tobytes(order="C"))
        f.write(np.array(doc_idx, dtype=np.int64).tobytes(order="C"))


# document d holds d * 100, d * 100 + 1, ...: a sample shows where its tokens came from
DOCS = [[d * 100 + t for t in range(n)] for d, n in enumerate([7, 3, 12, 5, 9, 4])]


@pytest.fixture
def dataset(tmp_path):
    prefix = str(tmp_path / "gpt_text_document")
    write_megatron_dataset(prefix, DOCS)
    return prefix


def _loader_job(prefix, batch_size=2, seq_length=5, **kwargs):
    @flow.global_function()
    def load() -> tp.Numpy:
        return flow.data.megatron_gpt_mmap_data_loader(prefix, seq_length=seq_length, batch_size=batch_size,
                                                       **kwargs)

    return load


def _stream(docs, epochs):
    return np.concatenate([np.concatenate([np.asarray(d) for d in docs])] * epochs)


@pytest.mark.parametrize("dtype", [flow.int64, flow.int32])
def test_unshuffled_samples_are_windows_of_the_token_stream(dataset, dtype):
    """In order, sample k is tokens [k * seq_length, (k + 1) * seq_length] of the documents read epoch after
    epoch: seq_length + 1 tokens, the last shared with the next sample (legacy's label token)."""
    load = _loader_job(dataset, num_samples=20, shuffle=False, dtype=dtype)
    stream = _stream(DOCS, 4)
    for step in range(5):
        got = load()
        assert got.shape == (2, 6) and got.dtype == np.dtype(dtype)
        for i in range(2):
            k = step * 2 + i
            np.testing.assert_array_equal(got[i], stream[k * 5: k * 5 + 6])


def test_a_split_reads_its_documents_only(dataset):
    """split_sizes [2, 1], split 1: the last third of the 6 documents (legacy rounds to the nearest one)."""
    load = _loader_job(dataset, batch_size=1, seq_length=3, num_samples=4, shuffle=False, split_sizes=[2, 1],
                       split_index=1)
    stream = _stream(DOCS[4:], 3)
    for k in range(4):
        np.testing.assert_array_equal(load()[0], stream[k * 3: k * 3 + 4])


def test_shuffled_samples_repeat_with_their_seed_and_hold_whole_runs_of_documents(dataset):
    starts = {d * 100 for d in range(len(DOCS))}
    runs = []
    for seed in (3, 3, 4):
        flow.clear_default_session()
        load = _loader_job(dataset, num_samples=12, shuffle=True, random_seed=seed)
        runs.append(np.concatenate([load() for _ in range(4)]))
    np.testing.assert_array_equal(runs[0], runs[1])
    assert not np.array_equal(runs[0], runs[2])
    for sample in runs[0]:
        for a, b in zip(sample[:-1], sample[1:]):
            assert b == a + 1 or b in starts, f"token {b} cannot follow {a}: {sample}"


def test_saved_progress_resumes_from_a_checkpoint(dataset, tmp_path):
    """start_from_saved_progress counts batches in an int64 variable the checkpoint holds."""
    def job():
        return _loader_job(dataset, num_samples=20, shuffle=True, random_seed=11, start_from_saved_progress=True)

    load = job()
    flow.train.CheckPoint().init()
    first = [load() for _ in range(2)]
    flow.checkpoint.save(str(tmp_path / "ckpt"))
    third = load()
    counters = [n for n in flow.get_all_variables() if n.startswith("gpt_data_loader-iteration")]
    assert len(counters) == 1 and flow.get_all_variables()[counters[0]].numpy().tolist() == [3]

    flow.clear_default_session()
    resumed = job()
    flow.train.CheckPoint().load(str(tmp_path / "ckpt"))
    np.testing.assert_array_equal(resumed(), third)
    assert not np.array_equal(first[0], third)


def test_the_alias_and_a_file_that_is_no_index(dataset, tmp_path):
    assert flow.data.MegatronGPTMMapDataLoader is flow.data.megatron_gpt_mmap_data_loader
    bad = tmp_path / "bad"
    (tmp_path / "bad.idx").write_bytes(b"not an index at all, no header here")
    (tmp_path / "bad.bin").write_bytes(b"")
    load = _loader_job(str(bad), num_samples=2, shuffle=False)
    with pytest.raises(Exception, match="is not a Megatron index"):
        load()
    with pytest.raises(ValueError, match="split index 2 is out of range"):
        _loader_job(dataset, num_samples=2, split_sizes=[1, 1], split_index=2)()
