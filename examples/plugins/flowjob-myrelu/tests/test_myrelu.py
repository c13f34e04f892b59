"""flowjob-myrelu: the conformance suite over its ops, and the legacy program of the documentation run unchanged."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import strategies as st

import flowjob_myrelu.plugin
from flowjob_core.errors import ConfigError
from flowjob_core.testing import OpCase, conformance_suite
from flowjob_core.testing import strategies as fst


def myrelu_case(draw: st.DrawFn) -> tuple[list[np.ndarray], dict]:
    x = draw(fst.arrays(fst.small_shapes())).astype(draw(st.sampled_from([np.float32, np.float64])))
    x[np.abs(x) < 1e-3] = 0.5  # away from the kink, where a numeric gradient would straddle it
    return [x], {}


def myrelu_grad_case(draw: st.DrawFn) -> tuple[list[np.ndarray], dict]:
    (x,), _ = myrelu_case(draw)
    return [np.maximum(x, 0), draw(fst.arrays(x.shape)).astype(x.dtype)], {}


CASES = [
    OpCase("myrelu", myrelu_case, reference=lambda x: np.maximum(x, 0)),
    OpCase("myrelu_grad", myrelu_grad_case, reference=lambda y, dy: np.where(y > 0, dy, 0), wrt=()),
]

test_op_gradients, test_op_forward, test_ops_covered = conformance_suite(CASES, plugin="myrelu")


# the documentation's legacy program, as written for final_relu.so (needs the face: flowjob) --------------
def myrelu(input_blob):  # the legacy wrapper, unchanged
    import oneflow as flow

    op = (
        flow.user_op_builder("op_myrelu")
        .Op("myrelu")
        .Input("in", [input_blob])
        .Output("out")
        .Build()
    )
    return op.InferAndTryRun().SoleOutputBlob()


def test_the_legacy_program_runs_unchanged() -> None:
    flow = pytest.importorskip("oneflow", reason="the job test needs the face package (flowjob)")
    tp = pytest.importorskip("oneflow.typing")
    flow.clear_default_session()
    flow.config.load_library("final_relu.so")
    flow.config.load_library("/opt/build/final_relu.so")  # only the file name is compared

    @flow.global_function()
    def MyJob(x: tp.Numpy.Placeholder((5,), dtype=flow.float32)) -> tp.Numpy:  # noqa: N802 (legacy name)
        return myrelu(x)

    out = MyJob(np.array([-2, -1, 0, 1, 2], dtype=np.float32))
    np.testing.assert_array_equal(out, [0, 0, 0, 1, 2])


def test_training_through_the_ported_op() -> None:
    flow = pytest.importorskip("oneflow", reason="the job test needs the face package (flowjob)")
    tp = pytest.importorskip("oneflow.typing")
    flow.clear_default_session()
    seen = {}

    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((4,), dtype=flow.float32)) -> tp.Numpy:
        w = flow.get_variable("w", shape=(4,), initializer=flow.constant_initializer(1.0))
        flow.watch_diff(w, lambda d: seen.setdefault("dw", d))
        loss = flow.math.reduce_sum(myrelu(x * w))
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1])).minimize(loss)
        return loss

    train(np.array([-1, 2, -3, 4], dtype=np.float32))
    np.testing.assert_allclose(seen["dw"], [0, 2, 0, 4])


def test_a_library_no_plugin_declares_is_refused_with_the_porting_path() -> None:
    flow = pytest.importorskip("oneflow", reason="needs the face package (flowjob)")
    flow.clear_default_session()
    with pytest.raises(ConfigError, match=r"'libother\.so'.*final_relu\.so.*flowjob_op_libraries"):
        flow.config.load_library("libother.so")


def test_the_plugin_declares_its_library() -> None:
    assert flowjob_myrelu.plugin.flowjob_op_libraries() == ["final_relu.so"]
