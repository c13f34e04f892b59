"""Legacy names about the runtime and the build: flow.sysconfig, flow.tensorrt, flow.deprecated, flow.name_scope,
flow.is_deprecated, flow.ExecutionConfig, flow.record, flow.inter_job_reuse_mem_strategy,
flow.eager_nccl_all_reduce, flow.current_global_function_desc and flow.builtin_op."""
from __future__ import annotations

import os

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core import ConfigError, FlowjobError, OpBuildError, get_default_session


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


def test_sysconfig_answers_for_this_installation():
    assert os.path.isfile(os.path.join(flow.sysconfig.get_lib(), "__init__.py"))
    assert flow.sysconfig.with_cuda() is (get_default_session().registries.backends.get("gpu") is not None)
    assert flow.sysconfig.with_xla() is False
    assert flow.sysconfig.has_rpc_backend_grpc() is False and flow.sysconfig.has_rpc_backend_local() is True
    for name in ("get_include", "get_compile_flags", "get_link_flags"):
        with pytest.raises(NotImplementedError, match=rf"sysconfig.{name}: flowjob has no C\+\+ headers.*plugin"):
            getattr(flow.sysconfig, name)()


def test_tensorrt_and_worker_management_are_refused_with_the_reason():
    with pytest.raises(NotImplementedError, match="no TensorRT backend"):
        flow.tensorrt.write_int8_calibration("calib")
    with pytest.raises(NotImplementedError, match="no TensorRT backend"):
        flow.tensorrt.cache_int8_calibration()
    for name in ("init_worker", "delete_worker", "delete_worker_by_bootstrap", "delete_worker_of_multi_process"):
        with pytest.raises(NotImplementedError, match=r"python -m oneflow launch"):
            getattr(flow.deprecated, name)()


def test_name_scope_is_the_deprecated_namespace():
    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        with pytest.warns(DeprecationWarning, match="use flow.scope.namespace"):
            with flow.name_scope("outer"):
                with flow.deprecated.variable_scope("inner"):
                    w = flow.get_variable("w", shape=(2,), initializer=flow.constant_initializer(3.0))
        return x * w

    np.testing.assert_array_equal(job(np.ones(2, np.float32)), [3, 3])
    assert "outer-inner-w" in flow.get_all_variables()
    assert flow.is_deprecated(flow.name_scope) and flow.is_deprecated(flow.fixed_placement)
    assert not flow.is_deprecated(flow.scope.namespace) and not flow.is_deprecated(3)


def test_small_aliases():
    assert flow.ExecutionConfig is flow.FunctionConfig
    assert flow.record == flow.int64  # the dtype of an OFRecord reader's blob here: record ids


def test_inter_job_reuse_mem_strategy_is_checked_and_changes_nothing():
    flow.inter_job_reuse_mem_strategy("reuse_mem_priority")
    flow.inter_job_reuse_mem_strategy("custom_parallelism", job_name_groups=[["a", "b"], ["c"]])
    with pytest.raises(ConfigError, match="strategy_str must be one of"):
        flow.inter_job_reuse_mem_strategy("fastest")
    with pytest.raises(ConfigError, match="needs job_name_groups"):
        flow.inter_job_reuse_mem_strategy("custom_parallelism")


def test_eager_nccl_all_reduce_over_one_device_is_the_blob():
    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((3,))) -> tp.Numpy:
        return flow.eager_nccl_all_reduce(x, parallel_conf='device_tag: "cpu" device_name: "0:0"')

    np.testing.assert_array_equal(job(np.arange(3, dtype=np.float32)), [0, 1, 2])


def test_eager_nccl_all_reduce_over_several_devices_is_refused():
    flow.config.cpu_device_num(2)

    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((3,))) -> tp.Numpy:
        return flow.eager_nccl_all_reduce(x, parallel_conf='device_tag: "cpu" device_name: "0:0-1"')

    with pytest.raises(FlowjobError, match=r"eager_nccl_all_reduce in job 'job'.*2 device"):
        job(np.arange(3, dtype=np.float32))


def test_current_global_function_desc_describes_the_traced_job():
    seen = {}
    config = flow.FunctionConfig()
    config.enable_auto_mixed_precision(False)

    @flow.global_function(type="train", function_config=config)
    def train(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        desc = flow.current_global_function_desc()
        seen.update(trainable=desc.IsTrainable(), amp=desc.enable_auto_mixed_precision,
                    has=desc.HasAttr("enable_auto_mixed_precision"), hasnt=desc.HasAttr("enable_inplace"))
        w = flow.get_variable("w", shape=(2,), initializer=flow.zeros_initializer())
        loss = flow.math.reduce_sum(x * w)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1])).minimize(loss)
        return loss

    train(np.ones(2, np.float32))
    assert seen == {"trainable": True, "amp": False, "has": True, "hasnt": False}
    with pytest.raises(FlowjobError, match=r"current_global_function_desc\(\) is only valid inside"):
        flow.current_global_function_desc()


def test_builtin_op_declares_an_op_once_and_calls_it_on_blobs():
    relu = flow.builtin_op("relu").Input("x").Output("y").Build()
    concat = flow.builtin_op("concat").Input("in", 2).Output("out").Attr("axis", 0).Build()

    @flow.global_function()
    def job(a: tp.Numpy.Placeholder((2,)), b: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        (y,) = relu(a)
        (z,) = concat.op(y, b)
        return z

    np.testing.assert_array_equal(job(np.array([-1, 2], np.float32), np.array([3, -4], np.float32)), [0, 2, 3, -4])
    with pytest.raises(OpBuildError, match=r"builtin_op\('relu'\) takes 1 blob\(s\) \(x=1\), got 2"):
        @flow.global_function()
        def wrong(a: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
            return relu(a, a)[0]

        wrong(np.zeros(2, np.float32))
    with pytest.raises(OpBuildError, match="call Build"):
        flow.builtin_op("relu").Input("x")(None)
