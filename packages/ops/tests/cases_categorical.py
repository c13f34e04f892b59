"""Op case of ``categorical_ordinal_encode`` (the hash table of legacy v0.4); the reference inserts the
values one by one. op_cases.py appends ``CASES``."""
from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

from flowjob_core.testing import OpCase
from flowjob_core.testing.modules import sibling

base = sibling(__file__, "op_cases")
Draw = Any
Case = tuple[list[np.ndarray], dict]


def encode_case(draw: Draw) -> Case:
    dtype = draw(st.sampled_from([np.int32, np.int64]))
    capacity = draw(st.integers(4, 8))
    # at most capacity - 2 keys of its own, so with the <= 2 keys already in the table it never fills
    values = np.array(draw(st.lists(st.integers(0, 12), min_size=1, max_size=capacity - 2)), dtype=dtype)
    # a table already holding some keys (as after earlier steps): encode them through the probing path
    table, size = np.zeros(2 * capacity, dtype=dtype), np.zeros(1, dtype=dtype)
    for key in draw(st.lists(st.integers(1, 12), max_size=2, unique=True)):
        _insert(table, size, key)
    return [values.reshape(draw(st.sampled_from([(-1,), (1, -1)]))), table, size], {"hash_precomputed": True}


def _insert(table: np.ndarray, size: np.ndarray, key: int) -> int:
    """The reference probe: first slot from key % capacity holding the key (its ordinal) or 0 (a new one)."""
    capacity = table.size // 2
    for step in range(capacity):
        slot = (key + step) % capacity
        if table[2 * slot] == key:
            return int(table[2 * slot + 1])
        if table[2 * slot] == 0:
            size[0] += 1
            table[2 * slot], table[2 * slot + 1] = key, size[0]
            return int(size[0])
    raise AssertionError("full table")


def encode_ref(values: np.ndarray, table: np.ndarray, size: np.ndarray, hash_precomputed: bool) -> np.ndarray:
    table, size = table.copy(), size.copy()
    return np.array([_insert(table, size, int(v)) for v in values.reshape(-1)], dtype=values.dtype).reshape(
        values.shape)


CASES = [
    OpCase("categorical_ordinal_encode", encode_case, reference=encode_ref, wrt=()),
]
