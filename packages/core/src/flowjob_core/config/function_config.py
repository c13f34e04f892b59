"""``flow.function_config()`` (per-job settings) and the session's ``flow.config`` record.

Every option of legacy OneFlow's ``FunctionConfig`` (v0.3/v0.4) is declared here with its value
check and its effect (see :mod:`flowjob_core.config.options`): read by flowjob, recorded with no effect
(CUDA and legacy-runtime tuning), or refused as not supported yet where it would change results.
"""
from __future__ import annotations

from typing import Any

from flowjob_core.ir import dtypes
from flowjob_core.errors import ConfigError
from flowjob_core.config.options import (
    BOOL, NUMBER, Option, OptionSet, UnknownOptionError, check_value, count, flag, is_dict, is_int, is_number, is_str)
from flowjob_core.trace.scope import LogicalView, Placement
from flowjob_core.config.function_desc import FunctionDesc

__all__ = ["FunctionConfig", "SessionConfig", "TrainConfig", "UnknownOptionError", "function_config"]

CUDNN = "cuDNN on CUDA devices"
MEMORY = "the legacy runtime's memory planner"
GRAPH = "the legacy runtime's graph rewrites (a speed setting)"
DISTRIBUTED = "multi-device communication of the legacy runtime"
GONE = "nothing (legacy OneFlow had already dropped it)"
HALF = "float16 arithmetic on CUDA devices"


def _is_dtype(v: Any) -> bool:
    try:
        dtypes.as_dtype(v)
        return True
    except TypeError:
        return False


def _is_off(v: Any) -> bool:
    return v is False


def _is_indexed_slices_conf(v: Any) -> bool:
    """Legacy's IndexedSlicesOptimizerConf as a dict: ``include_op_names.op_name`` and an optional ``enable``."""
    if not isinstance(v, dict) or set(v) - {"enable", "include_op_names"}:
        return False
    if not isinstance(v.get("enable", True), bool):
        return False
    names = v.get("include_op_names")
    if not isinstance(names, dict) or set(names) != {"op_name"} or not isinstance(names["op_name"], (list, tuple)):
        return False
    return all(isinstance(n, str) and n for n in names["op_name"])


# options of legacy train_conf: setting any of them (even to its default) marks a positional
# function_config as a training one, as legacy's train_conf did
_TRAIN_CONF = ("primary_lr", "secondary_lr", "model_update_conf", "loss_scale_factor", "weight_l2", "bias_l2",
               "num_gradient_accumulation_steps")


class TrainConfig(OptionSet):
    """``cfg.train.*`` of version-0.1 training: read by the optimizer pass."""

    _path = "function_config.train"
    _what = "train option"
    _options = {
        "primary_lr": Option(*NUMBER),
        "secondary_lr": Option(*NUMBER),
        "model_update_conf": Option(is_dict, "a dict such as {'naive_conf': {}}"),
        # fp32 only: the loss is scaled and the gradients unscaled by the same factor
        "loss_scale_factor": Option(*NUMBER),
        "weight_l2": Option(*NUMBER),
        "bias_l2": Option(*NUMBER),
        # read by flowjob_optim's optimizer pass: each call is one micro-batch, every N-th call updates
        "num_gradient_accumulation_steps": Option(
            lambda v: is_int(v) and v >= 1, "a positive int (the calls, one micro-batch each, per update)"),
        "optimizer_placement_optimization_mode": Option(
            lambda v: v in ("non_distributed", "distributed_split"), "'non_distributed' or 'distributed_split'",
            effect="recorded", why=DISTRIBUTED),
        "optimizer_placement_optimization_threshold": count(DISTRIBUTED),
    }

    @property
    def is_set(self) -> bool:
        return any(name in self.values for name in _TRAIN_CONF)


class TensorRTConfig(OptionSet):
    _path = "function_config.tensorrt"
    _what = "tensorrt option"
    _options = {
        "use_fp16": Option(*BOOL, True, "unsupported", "TensorRT float16 inference is not implemented",
                           supported=_is_off),
        "use_int8": Option(*BOOL, True, "unsupported", "TensorRT int8 inference is not implemented",
                           supported=_is_off),
        "int8_calibration": Option(is_str, "a calibration path (str)", effect="unsupported",
                                   why="TensorRT int8 inference is not implemented"),
    }


QAT_BACKENDS = ("", "tensorrt7", "cambricon")


class QATConfig(OptionSet):
    """``cfg.qat.*``: how the quantization-aware training pass (flowjob-ops, ``enable_qat``) quantizes."""

    _path = "function_config.qat"
    _what = "qat option"
    _options = {
        # legacy's QatConfig defaults: per-layer, symmetric, momentum 0.95, target backend ""
        "per_channel_weight_quantization": Option(*BOOL, True),
        "symmetric": Option(*BOOL, True),
        "moving_min_max_momentum": Option(lambda v: is_number(v) and 0 <= v <= 1, "a number in [0, 1]"),
        # no legacy default: a job whose activations are quantized needs it
        "moving_min_max_stop_update_after_iters": Option(lambda v: is_int(v) and v >= 1, "an int >= 1"),
        "target_backend": Option(lambda v: v in QAT_BACKENDS, f"one of {', '.join(map(repr, QAT_BACKENDS))}"),
    }


POLICIES = ("use_mem_size_first_algo", "use_mutual_exclusion_first_algo", "use_time_line_algo")


class MemPolicyWhiteList(OptionSet):
    """``cfg.static_mem_alloc_policy_white_list``: the legacy memory planner's policies (recorded)."""

    _path = "function_config.static_mem_alloc_policy_white_list"
    _what = "static_mem_alloc_policy_white_list member"
    _options = {p: flag(MEMORY) for p in POLICIES}

    def _policy(self, policy: Any) -> str:
        if policy not in POLICIES:
            raise ConfigError(f"{self._path}: unknown policy {policy!r}; one of {', '.join(POLICIES)}")
        return policy

    def has(self, policy: str) -> bool:
        return bool(self.values.get(self._policy(policy), False))

    def add(self, policy: str) -> None:
        self._store(policy, check_value(f"{self._path}.{self._policy(policy)}", self._options[policy], True))

    def remove(self, policy: str) -> None:
        self._store(policy, check_value(f"{self._path}.{self._policy(policy)}", self._options[policy], False))

    def policy_mem_size_first(self) -> str:
        return POLICIES[0]

    def policy_mutual_exclusion_first(self) -> str:
        return POLICIES[1]

    def policy_time_line(self) -> str:
        return POLICIES[2]


class MemAlgoWhiteList(OptionSet):
    _path = "function_config.static_mem_alloc_algo_white_list"
    _what = "static_mem_alloc_algo_white_list member"
    _options = {}

    def show(self) -> list[str]:
        return list(POLICIES)


class FunctionConfig(OptionSet):
    """``flow.function_config()``: settings of one global function. An unknown name is an error."""

    _path = "function_config"
    _what = "function_config option"
    _options = {
        # read by flowjob
        # legacy read it only for variables declared without a dtype, which flow.get_variable never makes (its
        # dtype defaults to float32), and to refuse mixed precision with a non-float32 default (the amp pass)
        "default_data_type": Option(
            _is_dtype, "a flowjob dtype such as flow.float", effect="recorded",
            why="every op's dtype comes from its inputs or its dtype argument, as in legacy"),
        "default_placement_scope": Option(lambda v: isinstance(v, Placement), "flow.scope.placement(...)"),
        "default_logical_view": Option(lambda v: isinstance(v, LogicalView),
                                       "flow.scope.consistent_view() or mirrored_view()"),
        "default_distribute_strategy": Option(lambda v: isinstance(v, LogicalView),
                                              "flow.distribute.consistent_strategy() or mirrored_strategy()"),
        # flowjob addition in legacy's enable_* style: stop a step at the first op whose output holds NaN or
        # Inf (flowjob_core/plan/numerics.py); unset, the session's flow.config.enable_numerics_check decides
        "enable_numerics_check": Option(*BOOL, True),
        # would change results: refused unless left at the legacy default
        "default_initializer_conf": Option(
            is_dict, "an initializer conf dict", effect="unsupported",
            why="a job-wide default initializer is not implemented; pass initializer= to flow.get_variable"),
        # read by flowjob_optim's optimizer pass (sparse_updates.py): row-wise updates of embedding variables
        "indexed_slices_optimizer_conf": Option(
            _is_indexed_slices_conf,
            "a dict {'include_op_names': {'op_name': [variable names]}} (optionally 'enable': bool)"),
        # read by flowjob_ops' auto-mixed-precision pass (float16 casts around GEMM-like ops, GPU backends)
        "enable_auto_mixed_precision": Option(*BOOL, True),
        # read by flowjob_ops' quantization-aware training pass (fake quantization around int8-able ops)
        "enable_quantization_aware_training": Option(*BOOL, True),
        "enable_qat": Option(*BOOL, True),
        # read by flowjob_ops' stale-synchronous pass (train jobs read variables through ssp_variable_proxy)
        "enable_ssp": Option(*BOOL, True),
        "ssp_partition_strategy": Option(lambda v: v in ("naive_sequential", "disable"),
                                         "'naive_sequential' or 'disable'", effect="recorded",
                                         why="nothing (legacy v0.4 declared it and never read it)"),
        "ssp_partition_scope_ids": Option(lambda v: isinstance(v, (list, tuple)) and all(is_int(i) for i in v),
                                          "a list of ints", effect="recorded",
                                          why="nothing (legacy v0.4 declared it and never read it)"),
        # CUDA / cuDNN
        "enable_cudnn": flag(CUDNN),
        "cudnn_buf_limit_mbyte": count(CUDNN),
        "cudnn_conv_force_fwd_algo": count(CUDNN),
        "cudnn_conv_force_bwd_data_algo": count(CUDNN),
        "cudnn_conv_force_bwd_filter_algo": count(CUDNN),
        "cudnn_conv_heuristic_search_algo": flag(CUDNN),
        "cudnn_conv_use_deterministic_algo_only": flag(CUDNN),
        "enable_cudnn_fused_normalization_add_relu": flag(CUDNN),
        "cudnn_conv_enable_pseudo_half": flag(HALF),
        "enable_cudnn_conv_pseudo_half": flag(HALF),
        "cudnn_conv_enable_true_half": flag(HALF),
        "enable_true_half_config_when_conv": flag(HALF),
        "enable_float_compute_for_half_gemm": flag(HALF),
        "use_xla_jit": flag("the XLA compiler of the legacy runtime"),
        "use_tensorrt": flag("the TensorRT backend of the legacy runtime"),
        # legacy runtime: memory, graph rewrites, scheduling
        "use_memory_allocation_algorithm_v2": flag(MEMORY),
        "enable_reused_mem": flag(MEMORY),
        "enable_inplace": flag(MEMORY),
        "enable_inplace_in_reduce_struct": flag(GONE),
        "enable_keep_header_only": flag(GONE),
        "exp_run_conf": Option(is_dict, "a dict", effect="recorded", why="experimental runs of the legacy runtime"),
        "enable_fuse_add_to_output": flag(GRAPH),
        "enable_fuse_model_update_ops": flag(GRAPH),
        "enable_fuse_cast_scale": flag(GRAPH),
        "enable_gradients_stats_aggregation": flag(GRAPH),
        "do_parallel_cast_before_widening_type_cast": flag(GRAPH),
        "prune_parallel_cast_ops": flag(GRAPH),
        "prune_cast_to_static_shape_ops": flag(GRAPH),
        "concurrency_width": count("the legacy runtime's scheduler"),
        "allow_cpu_return_op": flag("where the legacy runtime placed return ops"),
        # multi-device communication
        "enable_nccl": flag(GONE),
        "use_nccl_inter_node_communication": flag(GONE),
        "use_boxing_v2": flag(GONE),
        "enable_all_reduce_group": flag(GONE),
        "all_reduce_group_num": count(GONE),
        "all_reduce_lazy_ratio": Option(is_number, "a number", effect="recorded", why=GONE),
        "all_reduce_group_min_mbyte": count(GONE),
        "all_reduce_group_size_warmup": Option(is_number, "a number", effect="recorded", why=GONE),
        "all_reduce_fp16": flag(GONE),
        "disable_all_reduce_sequence": flag(GONE),
        "non_distributed_optimizer_group_size_mbyte": count(GONE),
        "enable_non_distributed_optimizer": flag(DISTRIBUTED),
        "optimizer_placement_optimization_mode": TrainConfig._options["optimizer_placement_optimization_mode"],
        "optimizer_placement_optimization_threshold": count(DISTRIBUTED),
    }
    _children = {"train": TrainConfig, "tensorrt": TensorRTConfig, "qat": QATConfig,
                 "static_mem_alloc_policy_white_list": MemPolicyWhiteList,
                 "static_mem_alloc_algo_white_list": MemAlgoWhiteList}

    def _store(self, name: str, value: Any) -> None:
        # legacy's two names set one field: the last call wins
        super()._store("enable_quantization_aware_training" if name == "enable_qat" else name, value)

    @property
    def function_desc(self) -> FunctionDesc:
        """Legacy's getter side: the options set so far, by name (``cfg.function_desc.enable_inplace``); a
        config with training options set describes a trainable function."""
        return FunctionDesc("<function config>", "train" if self.train.is_set else "predict", self.snapshot())


function_config = FunctionConfig


class SessionConfig:
    """Settings that apply to a whole session (``flow.config.*``)."""

    def __init__(self) -> None:
        self.gpu_device_num: int | None = None  # None: not asked for
        self.cpu_device_num: int = 1
        self.machine_num: int | None = None  # None: not declared (flow.config.machine_num)
        self.debug_mode = False  # legacy's: the verifier after every pass, kernel outputs checked every call
        self.numerics_check: bool | None = None  # None: FLOWJOB_NUMERICS_CHECK decides
        self.seed = 0
        self.max_in_flight = 8
        self.options: dict[str, Any] = {}  # other flow.config.* options set, by dotted name

