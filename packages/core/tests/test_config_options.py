"""Every legacy function_config / flow.config option: accepted with its value check; no-effect ones
recorded (accessor, debug log, ``python -m oneflow info``); result-changing ones not implemented refused."""
from __future__ import annotations

import copy
import dataclasses
import logging

import pytest

from flowjob_core import ConfigError, FunctionConfig, Session, hookimpl, make_plugin_manager
from flowjob_core.ir import dtypes
from flowjob_core.api import flow_config_options as session_options
from flowjob_core.config.function_config import TrainConfig
from flowjob_core.config.options import UnknownOptionError, recorded_options
from flowjob_core.runtime.session import clear_default_session, get_default_session


@pytest.fixture(autouse=True)
def core_only(monkeypatch):
    # the session these options live in needs no plugin
    monkeypatch.setenv("FLOWJOB_DISABLE_PLUGIN_AUTOLOAD", "1")
    clear_default_session()
    yield
    clear_default_session()


# one legal value for every option the tables declare, by the check's expected type
def _legal(expected: str):
    if expected.startswith("a bool"):
        return True
    if expected.startswith("an int"):
        return 3
    if expected.startswith("a number"):
        return 0.5
    if "'non_distributed'" in expected:
        return "distributed_split"
    if "'naive_sequential'" in expected:
        return "disable"
    if expected.startswith("a list of ints"):
        return [1, 2]
    if expected.startswith("a dict"):
        return {"k": 1}
    if expected.startswith("a flowjob dtype"):
        return dtypes.int32
    return "x"


def _recorded_names(options):
    return sorted(n for n, o in options.items() if o.effect == "recorded")


@pytest.mark.parametrize("name", _recorded_names(FunctionConfig._options))
def test_every_recorded_function_option_is_kept_logged_and_listed(name, caplog):
    cfg = FunctionConfig()
    value = _legal(FunctionConfig._options[name].expected)
    with caplog.at_level(logging.DEBUG, logger="flowjob.config"):
        getattr(cfg, name)(value)
    assert cfg.get(name) == value
    assert cfg.recorded_options() == {f"function_config.{name}": value}
    assert recorded_options()[f"function_config.{name}"] == value
    assert any(f"function_config.{name}({value!r}) recorded, no effect here" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("namespace", ["collective_boxing", "cudnn", "_TOP"])
def test_every_flow_config_option_is_recorded_in_the_session(namespace):
    space = getattr(session_options, namespace)
    for name, option in type(space)._options.items():
        value = _legal(option.expected)
        setter = getattr(session_options, name) if namespace == "_TOP" else getattr(space, name)
        setter(value)
        assert space.get(name) == value
        with pytest.raises(ConfigError, match=f"{name} expects {option.expected}"):
            setter(None)
    assert len(space.recorded_options()) == len(type(space)._options)
    clear_default_session()  # legacy: the settings belonged to the session
    assert space.recorded_options() == {}


def test_bare_flags_take_the_legacy_default_and_counts_need_a_value():
    cfg = FunctionConfig()
    cfg.enable_cudnn()
    cfg.enable_inplace()
    assert cfg.get("enable_cudnn") is True and cfg.get("enable_inplace") is True
    with pytest.raises(ConfigError, match="cudnn_buf_limit_mbyte expects an int: call it with a value"):
        cfg.cudnn_buf_limit_mbyte()
    session_options.nccl_use_compute_stream()  # legacy default False
    assert session_options._TOP.get("nccl_use_compute_stream") is False
    session_options.cudnn.buf_limit_mbyte()
    assert session_options.cudnn.get("buf_limit_mbyte") == 1024


@pytest.mark.parametrize("call, message", [
    (lambda c: c.enable_cudnn(1), "enable_cudnn expects a bool, got 1"),
    (lambda c: c.concurrency_width(2.0), "concurrency_width expects an int"),
    (lambda c: c.exp_run_conf([1]), "exp_run_conf expects a dict"),
    (lambda c: c.train.optimizer_placement_optimization_mode("zero"), "'non_distributed' or 'distributed_split'"),
    (lambda c: c.static_mem_alloc_policy_white_list.add("fastest"), "unknown policy 'fastest'"),
])
def test_values_keep_the_legacy_type_checks(call, message):
    with pytest.raises(ConfigError, match=message):
        call(FunctionConfig())
    with pytest.raises(ConfigError, match="use_rdma expects a bool, got 'yes'"):
        session_options.use_rdma("yes")
    with pytest.raises(ConfigError, match="nccl_num_streams expects an int"):
        session_options.collective_boxing.nccl_num_streams(True)


UNSUPPORTED = [
    ("default_initializer_conf", {"constant_conf": {"value": 0}}, None, "initializer="),
    ("tensorrt.use_fp16", True, False, "TensorRT"),
    ("tensorrt.use_int8", True, False, "TensorRT"),
    ("tensorrt.int8_calibration", "/cal", None, "TensorRT"),
]


def _option(cfg, dotted):
    target = cfg
    *parents, leaf = dotted.split(".")
    for p in parents:
        target = getattr(target, p)
    return target, leaf


@pytest.mark.parametrize("dotted, bad, neutral, why", UNSUPPORTED)
def test_result_changing_options_are_refused_never_ignored(dotted, bad, neutral, why):
    cfg = FunctionConfig()
    target, leaf = _option(cfg, dotted)
    with pytest.raises(ConfigError, match=rf"function_config\.{dotted}\(.*\) is not supported yet: .*{why}"):
        getattr(target, leaf)(bad)
    assert target.get(leaf) is None
    if neutral is not None:  # the legacy default changes nothing: accepted and recorded
        getattr(target, leaf)(neutral)
        assert target.get(leaf) == neutral
        assert f"function_config.{dotted}" in cfg.recorded_options()


def test_declared_effects_partition_the_options():
    # the ones flowjob reads are exactly these; everything else is recorded or refusable
    applied = sorted(n for n, o in FunctionConfig._options.items() if o.effect == "applied")
    assert applied == ["default_distribute_strategy", "default_logical_view", "default_placement_scope",
                       "enable_auto_mixed_precision", "enable_numerics_check", "enable_qat",
                       "enable_quantization_aware_training", "enable_ssp", "indexed_slices_optimizer_conf"]
    train_applied = sorted(n for n, o in TrainConfig._options.items() if o.effect == "applied")
    assert train_applied == ["bias_l2", "loss_scale_factor", "model_update_conf", "num_gradient_accumulation_steps",
                             "primary_lr", "secondary_lr", "weight_l2"]


@pytest.mark.parametrize("call, suggestion", [
    (lambda c: c.enable_cudnnn(), "did you mean 'enable_cudnn'"),
    (lambda c: c.train.num_gradient_acumulation_steps(2), "did you mean 'num_gradient_accumulation_steps'"),
    (lambda c: c.tensorrt.use_fp61(), "did you mean 'use_fp16'"),
    (lambda c: c.qat.symetric(), "did you mean 'symmetric'"),
    (lambda c: session_options.collective_boxing.nccl_fusion_max_op(4), "did you mean 'nccl_fusion_max_ops'"),
    (lambda c: session_options.cudnn.buf_limit_mb(4), "did you mean 'buf_limit_mbyte'"),
])
def test_a_misspelt_option_names_the_closest_real_one(call, suggestion):
    with pytest.raises(UnknownOptionError, match=suggestion):
        call(FunctionConfig())


def test_unknown_names_read_as_missing_attributes_for_feature_tests():
    cfg = FunctionConfig()
    # legacy programs probe: hasattr(func_cfg.train, "num_gradient_accumulation_steps")
    assert hasattr(cfg.train, "num_gradient_accumulation_steps")
    assert not hasattr(cfg.train, "no_such_option")
    assert not hasattr(session_options.collective_boxing, "no_such_option")


def test_accumulation_of_one_marks_a_positional_config_as_training_like_legacy_train_conf():
    cfg = FunctionConfig()
    cfg.train.optimizer_placement_optimization_mode("non_distributed")
    assert not cfg.train.is_set  # a job-level setting reachable under train.
    cfg.train.num_gradient_accumulation_steps(1)
    assert cfg.train.is_set


def test_memory_policy_white_list_and_copies():
    cfg = FunctionConfig()
    wl = cfg.static_mem_alloc_policy_white_list
    assert cfg.static_mem_alloc_algo_white_list.show() == [
        wl.policy_mem_size_first(), wl.policy_mutual_exclusion_first(), wl.policy_time_line()]
    wl.add(wl.policy_time_line())
    assert wl.has("use_time_line_algo") and not wl.has("use_mem_size_first_algo")
    clone = copy.deepcopy(cfg)
    assert clone == cfg and clone.static_mem_alloc_policy_white_list is not wl
    wl.remove("use_time_line_algo")
    assert not wl.has("use_time_line_algo") and clone.static_mem_alloc_policy_white_list.has("use_time_line_algo")
    assert clone != cfg


def test_a_snapshot_is_frozen_plain_data_that_later_settings_do_not_reach():
    cfg = FunctionConfig()
    cfg.indexed_slices_optimizer_conf({"include_op_names": {"op_name": ["emb"]}})
    cfg.enable_auto_mixed_precision(True)
    cfg.train.primary_lr(0.1)
    snap = cfg.snapshot()
    assert snap.get("enable_auto_mixed_precision") is True and snap.get("enable_inplace", 7) == 7
    assert [name for name, _ in snap.options] == ["enable_auto_mixed_precision", "indexed_slices_optimizer_conf"]
    assert snap.section("train").is_set and snap.section("train").get("primary_lr") == 0.1
    assert not snap.section("tensorrt").is_set and snap.section("no such set").options == ()
    cfg.get("indexed_slices_optimizer_conf")["include_op_names"]["op_name"].append("other")
    cfg.train.primary_lr(0.5)
    assert snap.get("indexed_slices_optimizer_conf") == {"include_op_names": {"op_name": ["emb"]}}
    assert snap.section("train").get("primary_lr") == 0.1
    with pytest.raises(dataclasses.FrozenInstanceError):
        snap.is_set = True  # type: ignore[misc]
    assert copy.deepcopy(snap) == snap and cfg.snapshot() != snap


@pytest.mark.parametrize("load", [session_options.load_library, session_options.load_library_now])
def test_load_library_points_to_a_python_op_plugin(load):
    with pytest.raises(ConfigError, match=r"\('libcustom_op.so'\).*Python plugin.*flowjob_add_ops.*flowjob-swish"):
        load("libcustom_op.so")
    with pytest.raises(ConfigError, match="expects a path"):
        load(3)


def test_legacy_model_io_enabled_reports_the_setting():
    assert session_options.legacy_model_io_enabled() is True
    session_options.enable_legacy_model_io(False)
    assert session_options.legacy_model_io_enabled() is False
    assert get_default_session().config.options == {"flow.config.enable_legacy_model_io": False}


class _PortedLibrary:
    """A plugin declaring that it provides the ops of a compiled legacy library (by file name)."""

    @hookimpl
    def flowjob_op_libraries(self) -> list[str]:
        return ["libcustom_op.so"]


def _default_session_with(monkeypatch, plugin):
    session = Session(make_plugin_manager(plugins=[plugin], autoload=False))
    monkeypatch.setattr(session_options, "get_default_session", lambda: session)
    return session


@pytest.mark.parametrize("load", [session_options.load_library, session_options.load_library_now])
def test_load_library_goes_on_when_a_plugin_declares_the_library(monkeypatch, caplog, load):
    session = _default_session_with(monkeypatch, _PortedLibrary())
    assert list(session_options.op_library_providers()) == ["libcustom_op.so"]
    with caplog.at_level(logging.DEBUG, logger="flowjob.config"):
        load("/build/out/libcustom_op.so")  # the folder does not matter, the file name does
    assert "its ops come from plugin" in caplog.text
    with pytest.raises(ConfigError, match=r"'libother.so'.*declare: libcustom_op.so.*flowjob_op_libraries"):
        load("libother.so")
    session.close()


def test_a_malformed_library_declaration_names_the_plugin(monkeypatch):
    class Bad:
        @hookimpl
        def flowjob_op_libraries(self):
            return "libx.so"  # a str, not a list of names

    session = _default_session_with(monkeypatch, Bad())
    with pytest.raises(ConfigError, match=r"plugin .*flowjob_op_libraries must return a list"):
        session_options.load_library("libx.so")
    session.close()
