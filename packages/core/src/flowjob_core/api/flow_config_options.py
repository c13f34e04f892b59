"""The ``flow.config.*`` options of legacy OneFlow (v0.3/v0.4) beyond those in :mod:`flowjob_core.api.flow_config`.

They tuned CUDA, NCCL, RDMA networking or the legacy runtime's threads and buffers: each is
checked like legacy did (``type(val) is int`` / ``bool``), kept in the default session's
``config.options`` and in :func:`flowjob_core.config.options.recorded_options`, logged to
``flowjob.config`` at debug level, and changes nothing. ``load_library`` goes on only where an installed
plugin declares that library's ops (``flowjob_op_libraries``): ops come from Python plugins here.
"""
from __future__ import annotations

import logging
import os
import warnings
from typing import Any

from flowjob_core.checkpoint.session_checkpoint import legacy_model_io
from flowjob_core.errors import ConfigError
from flowjob_core.config.options import Option, OptionSet, check_value, count, flag, is_bool, is_int
from flowjob_core.runtime.session import get_default_session

CUDA = "CUDA devices"
NETWORK = "multi-machine networking of the legacy runtime"
RUNTIME = "the legacy runtime's threads and buffers"
NCCL = "NCCL collectives between devices"
MEMORY = "the legacy runtime's memory planner"

_log = logging.getLogger("flowjob.config")

PLUGIN_HINT = ("flowjob runs no compiled OneFlow op libraries: write the op as a Python plugin (an OpDef record "
               "with an xp kernel, registered through the flowjob_add_ops hook) as the plugin guide "
               "examples/plugins/flowjob-swish/README.md shows; flow.user_op_builder then adds the op by name")


class _SessionOptions(OptionSet):
    """Values live in the default session (``flow.clear_default_session()`` forgets them, as legacy did)."""

    def _store(self, name: str, value: Any) -> None:
        get_default_session().config.options[f"{self._path}.{name}"] = value

    def get(self, name: str, default: Any = None) -> Any:
        return get_default_session().config.options.get(f"{self._path}.{name}", default)

    def recorded_options(self) -> dict[str, Any]:
        prefix = f"{self._path}."
        return {k: v for k, v in get_default_session().config.options.items() if k.startswith(prefix)}


class CollectiveBoxing(_SessionOptions):
    """``flow.config.collective_boxing.*``: NCCL fusion and streams."""

    _path = "flow.config.collective_boxing"
    _what = "flow.config.collective_boxing option"
    _options = {
        "enable_fusion": flag(NCCL),
        "num_callback_threads": count(NCCL),
        "nccl_num_streams": count(NCCL),
        "nccl_fusion_threshold_mb": count(NCCL),
        "nccl_fusion_all_reduce_use_buffer": flag(NCCL, default=False),
        "nccl_fusion_all_reduce": flag(NCCL, default=False),
        "nccl_fusion_reduce_scatter": flag(NCCL, default=False),
        "nccl_fusion_all_gather": flag(NCCL, default=False),
        "nccl_fusion_reduce": flag(NCCL, default=False),
        "nccl_fusion_broadcast": flag(NCCL, default=False),
        "nccl_fusion_max_ops": count(NCCL),
        "nccl_enable_all_to_all": flag(NCCL, default=False),
        "nccl_enable_mixed_fusion": flag(NCCL, default=False),
    }


class Cudnn(_SessionOptions):
    """``flow.config.cudnn.*``: cuDNN convolution algorithms and workspace."""

    _path = "flow.config.cudnn"
    _what = "flow.config.cudnn option"
    _options = {
        "buf_limit_mbyte": Option(is_int, "an int",
                                  default=1024, effect="recorded", why="cuDNN on CUDA devices"),
        "conv_force_fwd_algo": count("cuDNN on CUDA devices"),
        "conv_force_bwd_data_algo": count("cuDNN on CUDA devices"),
        "conv_force_bwd_filter_algo": count("cuDNN on CUDA devices"),
        "conv_heuristic_search_algo": flag("cuDNN on CUDA devices"),
        "conv_use_deterministic_algo_only": flag("cuDNN on CUDA devices", default=False),
    }


class TopLevel(_SessionOptions):
    """The plain ``flow.config.<name>(value)`` options that are recorded only."""

    _path = "flow.config"
    _what = "flow.config option"
    _options = {
        "comm_net_worker_num": count(NETWORK),
        "max_mdsave_worker_num": count(RUNTIME),
        "compute_thread_pool_size": Option(lambda v: is_int(v) and v >= 1, "an int of 1 or more", effect="applied",
                                           why="the host threads one step keeps busy (FLOWJOB_HOST_THREADS wins "
                                               "where set)"),
        "rdma_mem_block_mbyte": count(NETWORK),
        "rdma_recv_msg_buf_mbyte": count(NETWORK),
        "reserved_host_mem_mbyte": count(RUNTIME),
        "reserved_device_mem_mbyte": count(CUDA),
        "use_rdma": flag(NETWORK),
        "thread_enable_local_message_queue": Option(is_bool, "a bool",
                                                    effect="recorded", why=RUNTIME),
        "enable_numa_aware_cuda_malloc_host": flag(CUDA),
        "save_downloaded_file_to_local_fs": flag(RUNTIME),
        "persistence_buf_byte": count(RUNTIME),
        "collect_act_event": flag("the legacy runtime's profiler"),
        # both checkpoint APIs work either way; False gives flow.train.CheckPoint the v2 meaning (session_checkpoint.py)
        "enable_legacy_model_io": flag("flow.train.CheckPoint's init/load semantics", effect="applied"),
        "enable_model_io_v2": Option(is_bool, "a bool", effect="recorded",
                                     why="which checkpoint API the legacy runtime allowed (flowjob has both)"),
        "enable_cudnn": flag("cuDNN on CUDA devices"),
        "enable_tensor_float_32_compute": flag(CUDA),
        "nccl_use_compute_stream": flag(NCCL, default=False),
        "disable_group_boxing_by_dst_parallel": flag(NCCL, default=False),
        "enable_mem_chain_merge": flag(MEMORY),
    }


_TOP = TopLevel()
collective_boxing = CollectiveBoxing()
cudnn = Cudnn()


def _setter(name: str) -> Any:
    option = TopLevel._options[name]

    def set_option(val: Any = option.default) -> None:
        _TOP._store(name, check_value(f"flow.config.{name}", option, val))

    set_option.__name__ = set_option.__qualname__ = name
    set_option.__doc__ = f"Legacy ``flow.config.{name}``: checked and recorded; it tuned {option.why}."
    if option.effect == "applied":
        set_option.__doc__ = f"Legacy ``flow.config.{name}``: sets {option.why}."
    return set_option


comm_net_worker_num = _setter("comm_net_worker_num")
max_mdsave_worker_num = _setter("max_mdsave_worker_num")
_store_compute_thread_pool_size = _setter("compute_thread_pool_size")


def compute_thread_pool_size(val: int) -> None:
    """Legacy ``flow.config.compute_thread_pool_size``: the host threads of the session's steps, read when the
    session chooses its backend (``FLOWJOB_HOST_THREADS`` wins where set)."""
    _store_compute_thread_pool_size(val)
    if get_default_session().backend_chosen:
        # legacy ignored it silently once the session had started
        warnings.warn(f"flow.config.compute_thread_pool_size({val}) comes after the session's first job was "
                      f"planned: this session's steps keep their thread count (set it before the first job runs)",
                      RuntimeWarning, stacklevel=2)
rdma_mem_block_mbyte = _setter("rdma_mem_block_mbyte")
rdma_recv_msg_buf_mbyte = _setter("rdma_recv_msg_buf_mbyte")
reserved_host_mem_mbyte = _setter("reserved_host_mem_mbyte")
reserved_device_mem_mbyte = _setter("reserved_device_mem_mbyte")
use_rdma = _setter("use_rdma")
thread_enable_local_message_queue = _setter("thread_enable_local_message_queue")
enable_numa_aware_cuda_malloc_host = _setter("enable_numa_aware_cuda_malloc_host")
save_downloaded_file_to_local_fs = _setter("save_downloaded_file_to_local_fs")
persistence_buf_byte = _setter("persistence_buf_byte")
collect_act_event = _setter("collect_act_event")
enable_legacy_model_io = _setter("enable_legacy_model_io")
enable_model_io_v2 = _setter("enable_model_io_v2")
enable_cudnn = _setter("enable_cudnn")
enable_tensor_float_32_compute = _setter("enable_tensor_float_32_compute")
nccl_use_compute_stream = _setter("nccl_use_compute_stream")
disable_group_boxing_by_dst_parallel = _setter("disable_group_boxing_by_dst_parallel")
enable_mem_chain_merge = _setter("enable_mem_chain_merge")


def legacy_model_io_enabled() -> bool:
    """What ``enable_legacy_model_io`` was set to (legacy default: True). Both checkpoint APIs work either
    way; False makes ``flow.train.CheckPoint`` act as v0.4's model I/O v2 (``init()`` does nothing, ``load``
    keeps what a checkpoint lacks)."""
    return legacy_model_io(get_default_session())


def op_library_providers() -> dict[str, str]:
    """Library file name -> the plugin that declared it provides that library's ops (``flowjob_op_libraries``)."""
    providers: dict[str, str] = {}
    caller = get_default_session().pm.hook.flowjob_op_libraries
    for impl in caller.get_hookimpls():
        declared: Any = impl.function()
        if isinstance(declared, str) or not all(isinstance(name, str) for name in declared):
            raise ConfigError(f"plugin {impl.plugin_name!r}: flowjob_op_libraries must return a list of library "
                              f"file names (str), got {declared!r}")
        for name in declared:
            providers.setdefault(name, impl.plugin_name)
    return providers


def _load_library(what: str, val: str) -> None:
    if not isinstance(val, str) or not val:
        raise ConfigError(f"flow.config.{what} expects a path (str), got {val!r}")
    file_name = os.path.basename(val)
    providers = op_library_providers()
    plugin = providers.get(file_name)
    if plugin is None:
        declared = ", ".join(sorted(providers)) or "none"
        raise ConfigError(f"flow.config.{what}({val!r}): {PLUGIN_HINT}. No installed plugin declares the ops of "
                          f"{file_name!r} (libraries plugins declare: {declared}); a plugin whose "
                          f"flowjob_op_libraries hook returns [{file_name!r}] lets this call go on unchanged "
                          f"(the porting path: examples/plugins/flowjob-myrelu/README.md)")
    _log.debug("flow.config.%s(%r): its ops come from plugin %r", what, val, plugin)


def load_library(val: str) -> None:
    """Legacy: load a compiled op library (.so). Goes on when an installed plugin declares that library's ops
    (hook ``flowjob_op_libraries``, by file name); otherwise refused with the way to port the op."""
    _load_library("load_library", val)


def load_library_now(val: str) -> None:
    """Legacy: load a compiled op library at once. Same as :func:`load_library` (plugins are loaded with the
    session)."""
    _load_library("load_library_now", val)


__all__ = [*TopLevel._options, "collective_boxing", "cudnn", "legacy_model_io_enabled", "load_library",
           "load_library_now", "op_library_providers"]
