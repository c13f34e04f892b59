"""Legacy's library test ops called as legacy's op tests call them, through ``flow.user_op_builder`` by their
legacy names, in real global functions: values, dynamic rows, gradients, placements and refusals."""
from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

import flowjob_core as fc
import flowjob_typing as tp
from flowjob_core.api.placement import placement
from flowjob_core.api.user_op import user_op_builder
from flowjob_core.testing.modules import sibling

probe = sibling(__file__, "grad_probe")


def _op(op_type: str, name: str, inputs: dict[str, Any] | None = None, outputs: int = 1, **attrs: Any) -> Any:
    builder = user_op_builder(name).Op(op_type)
    for arg, blob in (inputs or {}).items():
        builder = builder.Input(arg, [blob])
    builder = builder.Output("out", outputs)
    for key, value in attrs.items():
        builder = builder.Attr(key, value)
    return builder.Build().InferAndTryRun().RemoteBlobList()


def test_legacy_names_add_the_records_and_sources_write_what_legacy_wrote() -> None:
    @fc.global_function()
    def sources() -> tp.Numpy:
        (out,) = _op("TestSource", "src")
        return out

    np.testing.assert_array_equal(sources(), np.arange(5.0))
    assert [n.op for n in sources.ensure_traced().nodes if n.name == "src"] == ["test_source"]


def test_random_source_draws_legacys_cpu_stream_step_after_step() -> None:
    @fc.global_function()
    def draws() -> tp.Numpy:
        (out,) = _op("TestRandomSource", "rand", seed=0)
        return out

    # legacy's own test: std::mt19937(0) through uniform_real_distribution<float>, five draws a step
    np.testing.assert_allclose(draws(), [0.5488136, 0.59284467, 0.7151894, 0.8442659, 0.6027634], rtol=1e-6)
    np.testing.assert_allclose(draws(), [0.85794574, 0.54488325, 0.84725183, 0.42365485, 0.62356377], rtol=1e-6)


def test_dynamic_source_holds_three_of_its_five_rows() -> None:
    seen = {}

    @fc.global_function()
    def dynamic() -> tp.ListNumpy:
        (seen["out"],) = _op("TestDynamicSource", "dyn")
        return seen["out"]

    (rows,) = dynamic()
    np.testing.assert_array_equal(rows, [0.0, 1.0, 2.0])
    assert seen["out"].is_dynamic and seen["out"].shape == (5,)


@pytest.mark.parametrize("ids,out_num,want", [
    ("0:0-1", 10, [0, 1, 2, 3, 4, 0, 1, 2, 3, 4]),
    ("0:0-2", 10, [0, 1, 2, 3, 0, 1, 2, 0, 1, 2]),  # legacy's balanced split: the first share is longer
    ("0:0", 4, [0, 1, 2, 3]),
])
def test_fixed_out_num_source_counts_on_each_device_of_its_placement(ids: str, out_num: int, want: list) -> None:
    @fc.global_function()
    def shares() -> tp.Numpy:
        with placement("cpu", ids):
            (out,) = _op("TestSourceMultiGpuFixedOutNum", "shares", out_num=out_num)
        return out

    np.testing.assert_array_equal(shares(), want)


def test_multi_input_gradient_is_its_gradient_ops_ones_and_twos() -> None:
    session = probe.session_with_probe()
    try:
        @probe.job(session)
        def train(x1: tp.Numpy.Placeholder((2, 3)), x2: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
            y = user_op_builder("multi").Op("TestMultiInput").Input("x1", [x1]).Input("x2", [x2]).Output("y") \
                .Build().InferAndTryRun().SoleOutputBlob()
            fc.add_loss(y)
            probe.probe(x1, "x1")
            probe.probe(x2, "x2")
            return y

        x1, x2 = np.full((2, 3), 5.0, np.float32), np.full((2, 3), -7.0, np.float32)
        np.testing.assert_array_equal(train(x1, x2), x1)
        np.testing.assert_array_equal(probe.RESULTS["x1"], np.ones((2, 3)))
        np.testing.assert_array_equal(probe.RESULTS["x2"], np.full((2, 3), 2.0))
    finally:
        session.close()


def test_ccrelu_differentiates_through_its_own_gradient_op() -> None:
    session = probe.session_with_probe()
    try:
        @probe.job(session)
        def train(x: tp.Numpy.Placeholder((4,))) -> tp.Numpy:
            (y,) = _op("ccrelu", "cc", {"in": x})
            fc.add_loss(y)
            probe.probe(x, "x")
            return y

        x = np.array([-2.0, -0.5, 0.5, 3.0], np.float32)
        np.testing.assert_array_equal(train(x), np.maximum(x, 0))
        np.testing.assert_array_equal(probe.RESULTS["x"], [0.0, 0.0, 1.0, 1.0])
        assert ("cc_grad", "ccrelu_grad") in {(n.name, n.op) for n in train.plan().job.nodes}  # legacy's grad op
    finally:
        session.close()


def test_cpu_only_relu_is_placed_on_the_cpu_under_a_gpu_placement() -> None:
    seen = {}

    @fc.global_function()
    def relu(x: tp.Numpy.Placeholder((2, 2))) -> tp.Numpy:
        with placement("gpu", "0:0"):
            (seen["cpu"],) = _op("cpu_only_relu_test", "host_relu", {"in": x})
            (seen["gpu"],) = _op("ccrelu", "device_relu", {"in": x})
        return seen["cpu"]

    x = np.array([[-1.0, 2.0], [3.0, -4.0]], np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # gpu placements run on the cpu without a gpu backend
        np.testing.assert_array_equal(relu(x), np.maximum(x, 0))
    assert seen["cpu"].parallel_conf.device_tag() == "cpu" and seen["gpu"].parallel_conf.device_tag() == "gpu"


def test_attribute_ops_give_the_dtypes_and_shapes_they_name() -> None:
    @fc.global_function()
    def typed(x: tp.Numpy.Placeholder((2, 2))) -> tp.Numpy:
        (out,) = _op("TestDataTypeAttr", "typed", {"in": x}, output_type=fc.dtypes.int8)
        return out

    @fc.global_function()
    def listed(x: tp.Numpy.Placeholder((2, 2))) -> tuple[tp.Numpy, tp.Numpy]:
        return _op("TestListDataTypeAndListShapeAndListStringAttr", "listed", {"in": x}, outputs=2,
                   out_shapes=[(4, 4), (1, 3)], out_types=[fc.dtypes.float64, fc.dtypes.uint8], string_list=["s"])

    got = typed(np.array([[1.0, 2.0], [3.0, 4.0]], np.float32))
    assert got.dtype == np.int8 and got.tolist() == [[1, 2], [3, 4]]
    wide, narrow = listed(np.zeros((2, 2), np.float32))
    assert (wide.shape, wide.dtype, narrow.shape, narrow.dtype) == ((4, 4), np.float64, (1, 3), np.uint8)
    assert not wide.any() and not narrow.any()


@pytest.mark.parametrize("op,attrs,match", [
    ("TestReshape", {"shape": [3, 3]}, "cannot make 8 elements"),
    ("TestReshape", {"shape": [8]}, "keeps the rank"),
    ("TestListDataTypeAndListShapeAndListStringAttr",
     {"out_shapes": [(1,)], "out_types": [fc.dtypes.float32], "string_list": []}, "non-empty list of str"),
    ("test_user_op_attr_auto_type", {"int1": 2 ** 31, "int2": 0}, "int1, an int32 attribute"),
    ("TestDataTypeAttr", {}, "needs the attribute output_type"),
])
def test_bad_attributes_are_refused_naming_the_op(op: str, attrs: dict, match: str) -> None:
    @fc.global_function()
    def bad(x: tp.Numpy.Placeholder((2, 4))) -> tp.Numpy:
        return _op(op, "bad", {"in": x}, **attrs)[0]

    with pytest.raises(fc.OpBuildError, match=rf"op 'bad'.*{match}"):
        bad(np.zeros((2, 4), np.float32))


def test_reshape_refuses_a_smaller_mirrored_feed_naming_the_op() -> None:
    @fc.global_function()
    def reshape(x: tp.ListNumpy.Placeholder((4, 2))) -> tp.ListNumpy:
        (out,) = _op("TestReshape", "resh", {"in": x}, shape=[2, 4])
        return out

    (full,) = reshape([np.arange(8, dtype=np.float32).reshape(4, 2)])
    np.testing.assert_array_equal(full, np.arange(8).reshape(2, 4))
    with pytest.raises(fc.FlowjobError, match="op .resh. .test_reshape.* fixed at trace time"):
        reshape([np.zeros((2, 2), np.float32)])
