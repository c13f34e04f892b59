"""One rank's piece of a split variable in the variable's whole ``out`` file (legacy's layout: the whole array, C
order, no header), written and read in place, so no process holds more than its piece.

A piece ``Shard(axis, start, stop)`` of a value of shape ``(d0, ..., dn)`` is ``outer = d0 * ... * d(axis-1)`` runs of
contiguous bytes, one per index of the axes before ``axis``: a split by rows (axis 0) is one run, a split by
columns of a matrix one run per row. Each run is written at its own offset through this process's own file
handle (unbuffered) and read straight into the piece's memory, so ranks writing their pieces of one file at the
same time never touch each other's bytes.
"""
from __future__ import annotations

import math
import os
from collections.abc import Iterator

import numpy as np

from flowjob_core.ir.job import BlobSpec
from flowjob_core.ir.layout import Shard


def runs(spec: BlobSpec, shard: Shard) -> Iterator[tuple[int, int, int]]:
    """(offset in the file, offset in the piece, length) in bytes of each contiguous run of ``shard`` of a value of
    ``spec``, in file order."""
    shape = tuple(int(d) for d in spec.shape)
    outer = math.prod(shape[:shard.axis])
    inner = math.prod(shape[shard.axis + 1:]) * spec.dtype.itemsize
    length = (shard.stop - shard.start) * inner
    if length == 0:
        return
    for k in range(outer):
        yield (k * shape[shard.axis] + shard.start) * inner, k * length, length


def create(path: str, nbytes: int) -> None:
    """A new file of ``nbytes`` bytes (zeros, sparse where the file system allows), for the ranks to write into."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        os.ftruncate(fd, nbytes)
        os.fsync(fd)
    finally:
        os.close(fd)


def write_piece(path: str, spec: BlobSpec, shard: Shard, piece: np.ndarray) -> None:
    """Write ``piece`` (this rank's ``shard`` of a value of ``spec``) at its place in the existing file ``path``, then
    fsync it; the file's other bytes are left as they are."""
    data = np.ascontiguousarray(piece, dtype=spec.dtype).reshape(-1).view(np.uint8).data
    with open(path, "r+b", buffering=0) as f:  # never truncated: the other ranks' rows stay
        for at, start, length in runs(spec, shard):
            done = 0
            while done < length:  # a write may be short (a signal, a large piece): go on where it stopped
                f.seek(at + done)
                done += f.write(data[start + done:start + length]) or 0
        os.fsync(f.fileno())


def read_piece(path: str, spec: BlobSpec, shard: Shard) -> np.ndarray:
    """This rank's ``shard`` of the value of ``spec`` stored whole in ``path``: only its bytes are read."""
    piece = np.empty(shard.local_shape(spec.shape), dtype=spec.dtype)
    data = piece.reshape(-1).view(np.uint8).data
    with open(path, "rb", buffering=0) as f:
        for at, start, length in runs(spec, shard):
            done = 0
            while done < length:
                f.seek(at + done)
                got = f.readinto(data[start + done:start + length])
                if not got:
                    raise EOFError(f"{path} ended at byte {at + done}; the piece needs bytes up to {at + length}")
                done += got
    return piece


__all__ = ["create", "read_piece", "runs", "write_piece"]
