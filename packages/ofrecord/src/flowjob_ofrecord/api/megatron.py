"""Legacy ``flow.data.megatron_gpt_mmap_data_loader`` (also ``flow.data.MegatronGPTMMapDataLoader``)."""
from __future__ import annotations

import os
import time
from typing import Any, Sequence

from flowjob_core import Blob, OpBuildError, apply, current_builder, get_variable
from flowjob_core.ir import dtypes

from flowjob_ofrecord.reader import shard

__all__ = ["MegatronGPTMMapDataLoader", "megatron_gpt_mmap_data_loader"]


def megatron_gpt_mmap_data_loader(
        data_file_prefix: str, seq_length: int, num_samples: int, batch_size: int, dtype: Any = dtypes.int64,
        shuffle: bool = True, random_seed: int | None = None, split_sizes: Sequence[int] | None = None,
        split_index: int | None = None, parallel_distribution: Sequence[Any] | None = None,
        start_from_saved_progress: bool = False, name: str | None = None) -> Blob:
    """Every step, ``batch_size`` samples of ``seq_length + 1`` tokens (inputs and the next-token label) from
    the Megatron-LM indexed dataset ``<data_file_prefix>.idx`` / ``.bin``, as legacy's loader drew them.

    Args:
        data_file_prefix: the dataset's path without ``.idx`` / ``.bin``.
        seq_length: tokens per sample before the label token.
        num_samples: samples the loader is made for (documents repeat for as many epochs as they need).
        batch_size: samples per step, over all processes (each takes its share, as legacy's shards).
        dtype: flow.int64 (default) or flow.int32.
        shuffle: shuffle documents and samples (seeded with ``random_seed``; default: the current time, as
            legacy).
        split_sizes: relative sizes of the splits of the documents (default one split); ``split_index`` picks one.
        parallel_distribution: legacy's SBP strings for several devices; here processes shard by rank, so the
            value is accepted and not needed.
        start_from_saved_progress: count batches in an int64 variable (saved with the checkpoint), so a loaded
            checkpoint goes on from the batch it reached.
        name: the op name; default ``gpt_data_loader_<n>`` (``gpt_data_loader`` with saved progress).

    Returns:
        An int ``(batch_size, seq_length + 1)`` blob of token ids.
    """
    what = "flow.data.megatron_gpt_mmap_data_loader"
    for suffix in (".idx", ".bin"):
        if not os.path.isfile(f"{data_file_prefix}{suffix}"):
            raise OpBuildError(f"{what}: {data_file_prefix}{suffix!s} does not exist")
    split_sizes = (1,) if split_sizes is None else tuple(split_sizes)
    split_index = 0 if split_index is None else split_index
    if not 0 <= split_index < len(split_sizes):
        raise ValueError(f"{what}: split index {split_index} is out of range, split_sizes {list(split_sizes)}")
    seed = int(time.time()) if random_seed is None else int(random_seed)
    session = current_builder(what).session
    rank, world = shard(session)
    attrs = {"data_file_prefix": os.fspath(data_file_prefix), "seq_length": seq_length, "label_length": 1,
             "num_samples": num_samples, "batch_size": batch_size, "dtype": dtypes.as_dtype(dtype),
             "shuffle": bool(shuffle), "random_seed": seed, "split_sizes": split_sizes, "split_index": split_index,
             "rank": rank, "world": world}
    inputs = []
    if start_from_saved_progress:
        name = "gpt_data_loader" if name is None else name
        counter = (f"{name}-iteration-sq{seq_length}-sa{num_samples}-bs{batch_size}-sd{seed}-"
                   f"sp{'_'.join(str(s) for s in split_sizes)}-spi{split_index}-")  # legacy's variable name
        # no initializer: zeros, the first batch
        inputs.append(get_variable(counter, shape=(1,), dtype=dtypes.int64, trainable=False, reuse=False))
    op = "megatron_gpt_mmap_data_loader_with_progress" if inputs else "megatron_gpt_mmap_data_loader"
    return apply(op, inputs, attrs, name=name)


MegatronGPTMMapDataLoader = megatron_gpt_mmap_data_loader

