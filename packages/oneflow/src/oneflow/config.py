"""``flow.config``: session settings. Options that only tuned CUDA or the legacy runtime are
checked and recorded (``flow.config.recorded_options()``) and change nothing."""
from typing import Any

from flowjob_core.config.options import UnknownOptionError, closest, recorded_options
from flowjob_core.api.flow_config_options import (
    collect_act_event, collective_boxing, comm_net_worker_num, compute_thread_pool_size, cudnn,
    disable_group_boxing_by_dst_parallel, enable_cudnn, enable_legacy_model_io, enable_mem_chain_merge,
    enable_model_io_v2, enable_numa_aware_cuda_malloc_host, enable_tensor_float_32_compute, legacy_model_io_enabled,
    load_library, load_library_now, max_mdsave_worker_num, nccl_use_compute_stream, persistence_buf_byte,
    rdma_mem_block_mbyte, rdma_recv_msg_buf_mbyte, reserved_device_mem_mbyte, reserved_host_mem_mbyte,
    save_downloaded_file_to_local_fs, thread_enable_local_message_queue, use_rdma)
from flowjob_core.api.flow_config import (
    cpu_device_num, enable_debug_mode, enable_numerics_check, gpu_device_num, machine_num, seed)

__all__ = [
    "collect_act_event", "collective_boxing", "comm_net_worker_num", "compute_thread_pool_size", "cpu_device_num",
    "cudnn", "disable_group_boxing_by_dst_parallel", "enable_cudnn", "enable_debug_mode", "enable_legacy_model_io",
    "enable_mem_chain_merge", "enable_model_io_v2", "enable_numerics_check", "enable_numa_aware_cuda_malloc_host",
    "enable_tensor_float_32_compute", "gpu_device_num",
    "legacy_model_io_enabled", "load_library", "load_library_now", "machine_num", "max_mdsave_worker_num",
    "nccl_use_compute_stream", "persistence_buf_byte", "rdma_mem_block_mbyte", "rdma_recv_msg_buf_mbyte",
    "recorded_options", "reserved_device_mem_mbyte", "reserved_host_mem_mbyte", "save_downloaded_file_to_local_fs",
    "seed", "thread_enable_local_message_queue", "use_rdma",
]


def __getattr__(name: str) -> Any:
    # a misspelt option names the closest real one (an AttributeError too, so hasattr() stays False)
    if name.startswith("_"):
        raise AttributeError(name)
    raise UnknownOptionError(f"unknown flow.config option {name!r}; {closest(name, __all__)}")
