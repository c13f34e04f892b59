"""Megatron-LM's indexed dataset (``<prefix>.idx`` + ``<prefix>.bin``) sampled as legacy's GPT data loader did.

The index, as Megatron's ``MMapIndexedDatasetBuilder`` writes it: the magic ``MMIDIDX\\x00\\x00``, the version
(uint64, 1), a dtype code (uint8: 1 uint8, 2 int8, 3 int16, 4 int32, 5 int64, 6 float32, 7 float64, 8 uint16),
the counts of sizes and of document offsets (uint64 each), then the sizes (int32, tokens per sequence), the
pointers (int64, byte offset of each sequence in ``.bin``) and the document offsets (int64). The ``.bin`` file is
memory-mapped. As legacy, every sequence is a document (``len(doc_idx) == len(sizes) + 1``).

``GptSamples`` follows legacy's MegatronGPTMMapDataset: the split's documents (``split_sizes`` ratios, rounded
to the nearest document), repeated for as many epochs as ``num_samples`` samples of ``seq_length + 1`` tokens
need (consecutive samples share one token), the last epoch kept apart when it is short, documents and samples
shuffled per epoch group. Shuffles use numpy's generator seeded with ``random_seed``: the same seed gives the
same order here, not legacy's order (it used ``std::mt19937`` and ``std::shuffle``).
"""
from __future__ import annotations

import math
import os
import struct
from typing import Sequence

import numpy as np

from flowjob_ofrecord.errors import OFRecordError

MAGIC = b"MMIDIDX\x00\x00"
DTYPES = {1: np.uint8, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64, 6: np.float32, 7: np.float64,
          8: np.uint16}


class MegatronIndex:
    """One ``.idx`` file's sizes and pointers, and the ``.bin`` file mapped."""

    def __init__(self, prefix: str) -> None:
        path = prefix + ".idx"
        try:
            with open(path, "rb") as f:
                raw = f.read()
        except OSError as exc:
            raise OFRecordError(f"megatron_gpt_mmap_data_loader: cannot read the index {path!r}: {exc}") from None
        head = len(MAGIC) + 8 + 1 + 8 + 8
        if raw[: len(MAGIC)] != MAGIC or len(raw) < head:
            raise OFRecordError(f"megatron_gpt_mmap_data_loader: {path!r} is not a Megatron index (no "
                                f"{MAGIC!r} header)")
        version, code, count, doc_count = struct.unpack_from("<QBQQ", raw, len(MAGIC))
        if code not in DTYPES:
            raise OFRecordError(f"megatron_gpt_mmap_data_loader: {path!r} names dtype code {code}; known: "
                                f"{sorted(DTYPES)}")
        if doc_count != count + 1:
            raise OFRecordError(f"megatron_gpt_mmap_data_loader: {path!r} holds {count} sequences in {doc_count - 1} "
                                f"documents; legacy's loader reads one sequence per document")
        if len(raw) != head + count * 4 + count * 8 + doc_count * 8:
            raise OFRecordError(f"megatron_gpt_mmap_data_loader: {path!r} has {len(raw)} bytes, its header announces "
                                f"{head + count * 12 + doc_count * 8}")
        self.version, self.dtype = version, np.dtype(DTYPES[code])
        self.sizes = np.frombuffer(raw, np.int32, count, head).astype(np.int64)
        self.pointers = np.frombuffer(raw, np.int64, count, head + count * 4)
        data = prefix + ".bin"
        try:
            self.data = np.memmap(data, dtype=np.uint8, mode="r") if os.path.getsize(data) else np.zeros(0, np.uint8)
        except OSError as exc:
            raise OFRecordError(f"megatron_gpt_mmap_data_loader: cannot map {data!r}: {exc}") from None
        ends = self.pointers + self.sizes * self.dtype.itemsize
        if count and int(ends.max()) > self.data.size:
            raise OFRecordError(f"megatron_gpt_mmap_data_loader: {data!r} has {self.data.size} bytes, the index "
                                f"points up to {int(ends.max())}")

    def tokens(self, doc: int, start: int, count: int) -> np.ndarray:
        offset = int(self.pointers[doc]) + start * self.dtype.itemsize
        return self.data[offset: offset + count * self.dtype.itemsize].view(self.dtype)


def split_documents(split_sizes: Sequence[int], split_index: int, num_docs: int) -> np.ndarray:
    """The documents of split ``split_index`` (legacy's GetSplitDocIndices)."""
    total = sum(split_sizes)
    offset = sum(int(np.rint(np.float32(s) / np.float32(total) * num_docs)) for s in split_sizes[:split_index])
    size = int(np.rint(np.float32(split_sizes[split_index]) / np.float32(total) * num_docs))
    return np.arange(offset, offset + size)


class GptSamples:
    """Sample ``k`` of the loader: ``seq_length + 1`` tokens (legacy's MegatronGPTMMapDataset)."""

    def __init__(self, index: MegatronIndex, seq_length: int, num_samples: int, split_sizes: Sequence[int],
                 split_index: int, shuffle: bool, seed: int) -> None:
        self.index, self.seq_length, self.sample_length = index, seq_length, seq_length + 1
        docs = split_documents(split_sizes, split_index, len(index.sizes))
        per_epoch = int(index.sizes[docs].sum())
        if per_epoch < 2:
            raise OFRecordError(f"megatron_gpt_mmap_data_loader: split {split_index} of {list(split_sizes)} holds "
                                f"{per_epoch} token(s); a sample needs at least 2")
        epochs = math.ceil((num_samples * seq_length + 1) / per_epoch)
        complete = epochs
        if epochs > 1:
            per_epoch_samples = (per_epoch - 1) // seq_length
            before_last = ((epochs - 1) * per_epoch - 1) // seq_length
            if num_samples - before_last < int(0.8 * per_epoch_samples):
                complete = epochs - 1  # a short last epoch is shuffled apart, as legacy
        rng = np.random.default_rng(seed)
        self.docs = np.concatenate([docs] * complete)
        if shuffle:
            rng.shuffle(self.docs)
        if complete != epochs:
            last = docs.copy()
            if shuffle:
                rng.shuffle(last)
            self.docs = np.concatenate([self.docs, last])
        total = (epochs * per_epoch - 1) // seq_length
        self.starts = self._sample_starts(total)
        self.order = np.arange(len(self.starts))
        if shuffle:
            head = (complete * per_epoch - 1) // seq_length
            rng.shuffle(self.order[:head])
            if complete != epochs:
                rng.shuffle(self.order[head:])

    def _sample_starts(self, total: int) -> list[tuple[int, int]]:
        """(position in ``docs``, token offset) where each sample starts; consecutive samples share a token."""
        starts, position, offset = [], 0, 0
        sizes = self.index.sizes
        for _ in range(total):
            if position >= len(self.docs):
                break
            starts.append((position, offset))
            remaining = self.seq_length
            while remaining > 0:
                length = int(sizes[self.docs[position]]) - offset
                if remaining < length:
                    offset += remaining
                else:
                    position, offset = position + 1, 0
                remaining -= length
        return starts

    def __len__(self) -> int:
        return len(self.order)

    def sample(self, k: int, out: np.ndarray) -> None:
        """Sample ``k``'s tokens into ``out`` (``seq_length + 1`` values, converted to its dtype)."""
        if not 0 <= k < len(self.order):
            raise OFRecordError(f"megatron_gpt_mmap_data_loader: sample {k} is past the {len(self.order)} samples "
                                f"the loader was made for (raise num_samples)")
        position, offset = self.starts[int(self.order[k])]
        filled, sizes = 0, self.index.sizes
        while filled < self.sample_length:
            doc = int(self.docs[position])
            count = min(int(sizes[doc]) - offset, self.sample_length - filled)
            out[filled: filled + count] = self.index.tokens(doc, offset, count)
            filled += count
            position, offset = position + 1, 0
