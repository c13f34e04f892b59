"""The op record of legacy's ``megatron_gpt_mmap_data_loader``: a source of (batch, seq_length + 1) token
blocks from a Megatron indexed dataset (``flowjob_ofrecord/megatron.py``), this process taking its share.

With an ``iteration`` input (legacy's ``start_from_saved_progress``: an int64 (1,) variable) the batch is the
one that counter names and the counter is advanced in place, so a checkpoint resumes the data where it was."""
from __future__ import annotations

import numbers
from typing import Any, Sequence

import numpy as np

from flowjob_core import BlobSpec, Effects, KernelContext, LegacyFace, OpDef, ShapeError
from flowjob_core.ir import dtypes

from flowjob_ofrecord.megatron import GptSamples, MegatronIndex


def _positive(attrs: dict, key: str) -> int:
    value = attrs[key]
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ShapeError(f"{key} must be an int >= 1, got {value!r}")
    return int(value)


def _infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    if len(inputs) > 1 or (inputs and (inputs[0].shape != (1,) or inputs[0].dtype != dtypes.int64)):
        raise ShapeError(f"the only input is the iteration counter, int64 of shape (1,), got {list(inputs)}")
    batch, seq, world = _positive(attrs, "batch_size"), _positive(attrs, "seq_length"), attrs.get("world", 1)
    num_samples = _positive(attrs, "num_samples")
    if batch % world or num_samples % world:
        raise ShapeError(f"batch_size {batch} and num_samples {num_samples} must split over the {world} processes")
    dtype = dtypes.as_dtype(attrs["dtype"])
    if dtype not in (dtypes.int32, dtypes.int64):
        raise ShapeError(f"dtype must be int32 or int64, got {dtype.name}")
    sizes, index = list(attrs["split_sizes"]), attrs["split_index"]
    if not sizes or any(isinstance(s, bool) or not isinstance(s, numbers.Integral) or s < 0 for s in sizes) \
            or sum(sizes) <= 0 or not 0 <= index < len(sizes):
        raise ShapeError(f"split_sizes must be ints >= 0 with a positive sum and split_index one of their "
                         f"positions, got {sizes} and {index!r}")
    return [BlobSpec((batch // world, seq + 1), dtype)]


def _kernel(ctx: KernelContext) -> Any:
    attrs = ctx.attrs
    samples = GptSamples(MegatronIndex(attrs["data_file_prefix"]), attrs["seq_length"], attrs["num_samples"],
                         [int(s) for s in attrs["split_sizes"]], attrs["split_index"], attrs["shuffle"],
                         attrs["random_seed"])
    out, xp, to_host = ctx.out(0), ctx.xp, ctx.backend.to_host
    rows, shards, shard = out.shape[0], attrs.get("world", 1), attrs.get("rank", 0)
    host = np.empty(out.shape, out.dtype)
    counter = [0]

    def batch(step: int) -> Any:
        for i in range(rows):
            samples.sample(step * rows * shards + shard * rows + i, host[i])
        out[...] = xp.asarray(host)
        return out

    def run(*iteration: Any) -> Any:
        if iteration:  # the saved progress: the batch it names, then one further
            (it,) = iteration
            step = int(np.asarray(to_host(it)).reshape(-1)[0])
            it += 1
            return batch(step)
        counter[0] += 1
        return batch(counter[0] - 1)

    return run


MEGATRON_GPT_MMAP_DATA_LOADER = OpDef(
    "megatron_gpt_mmap_data_loader", _infer, kernel=_kernel, not_differentiable=True,
    doc="batches of seq_length + 1 tokens from a Megatron .idx/.bin dataset, shuffled as legacy's loader",
    effects=Effects(host_state=True, effect=True), legacy=LegacyFace(name_prefix="gpt_data_loader"))
MEGATRON_GPT_MMAP_DATA_LOADER_WITH_PROGRESS = OpDef(
    "megatron_gpt_mmap_data_loader_with_progress", _infer, kernel=_kernel, not_differentiable=True,
    doc="megatron_gpt_mmap_data_loader taking the batch its iteration counter (input 0) names, then advancing it",
    effects=Effects(host_state=True, mutates=(0,), effect=True), legacy=LegacyFace(name_prefix="gpt_data_loader"))

OPS = (MEGATRON_GPT_MMAP_DATA_LOADER, MEGATRON_GPT_MMAP_DATA_LOADER_WITH_PROGRESS)
