"""``categorical_ordinal_encode``: the hash-table op of legacy v0.4 ``flow.categorical_ordinal_encode``.

categorical_ordinal_encode(in, table, size) gives each distinct hash value the next ordinal 1, 2, ...
in order of first appearance and remembers it in ``table`` (a flat (2 * capacity,) variable of
(key, value) pairs, open addressing with linear probing from slot key % capacity) and ``size`` (the
ordinals handed out): legacy's CPU kernel. Key 0 marks an empty slot, so the value 0 encodes to 0.
Both variables are written in place; a full table is an error naming the op.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from flowjob_core import BlobSpec, Effects, KernelContext, OpDef, ShapeError


# categorical_ordinal_encode -------------------------------------------------------------
def _encode_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    values, table, size = inputs
    if attrs.get("hash_precomputed") is not True:
        raise ShapeError("categorical_ordinal_encode supports hash_precomputed=True only (as legacy)")
    for what, spec in (("input_tensor", values), ("table", table), ("size", size)):
        if spec.dtype not in (np.dtype(np.int32), np.dtype(np.int64)):
            raise ShapeError(f"categorical_ordinal_encode: {what} must be int32 or int64, got {spec.dtype}")
        if spec.dtype != values.dtype:
            raise ShapeError(f"categorical_ordinal_encode: {what} is {spec.dtype}, input_tensor {values.dtype}")
    if len(table.shape) != 1 or table.shape[0] < 2 or table.shape[0] % 2:
        raise ShapeError(f"categorical_ordinal_encode: table must be 1-d of even length (2 * capacity), "
                         f"got shape {table.shape}")
    if size.shape != (1,):
        raise ShapeError(f"categorical_ordinal_encode: size must be shaped (1,), got {size.shape}")
    return [values]


def encode(values: np.ndarray, table: np.ndarray, size: np.ndarray) -> np.ndarray:
    """Legacy's probing loop on host arrays; writes table and size in place."""
    capacity = table.shape[0] // 2
    keys, ordinals = table[0::2], table[1::2]  # views: writes land in table
    flat = values.reshape(-1)
    out = np.empty_like(flat)
    for i, key in enumerate(flat.tolist()):
        slot = (key % 2 ** 64) % capacity  # legacy cast the key to size_t: a negative one wraps
        for _ in range(capacity):
            if keys[slot] == key:
                out[i] = ordinals[slot]
                break
            if keys[slot] == 0:
                size[0] += 1
                keys[slot], ordinals[slot] = key, size[0]
                out[i] = size[0]
                break
            slot = (slot + 1) % capacity
        else:
            raise ValueError(f"categorical_ordinal_encode: the table is full ({capacity} keys); raise its capacity")
    return out.reshape(values.shape)


def _encode_kernel(ctx: KernelContext) -> Any:
    xp, out, backend = ctx.xp, ctx.out(0), ctx.backend

    def run(values: Any, table: Any, size: Any) -> Any:
        host_table, host_size = np.array(backend.to_host(table)), np.array(backend.to_host(size))
        codes = encode(np.asarray(backend.to_host(values)), host_table, host_size)
        xp.copyto(table, backend.from_host(host_table))
        xp.copyto(size, backend.from_host(host_size))
        xp.copyto(out, backend.from_host(codes))
        return out

    return run


CATEGORICAL_ORDINAL_ENCODE = OpDef(
    "categorical_ordinal_encode", _encode_infer, kernel=_encode_kernel, not_differentiable=True,
    doc="ordinals 1, 2, ... by first appearance from a hash table (table, size updated in place)",
    effects=Effects(host_state=True, mutates=(1, 2), effect=True))

OPS = (CATEGORICAL_ORDINAL_ENCODE,)
