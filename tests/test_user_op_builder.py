"""flow.user_op_builder on ops registered by plugins: the swish example plugin in a train job, built-in
ops by their legacy argument names, and the errors a wrong configuration gets."""
from __future__ import annotations

from typing import Tuple

import flowjob_swish
import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core import ConfigError, OpBuildError
from flowjob_core.testing import check_grads
from flowjob_core.testing.modules import sibling

_helpers = sibling(__file__, "op_surface_helpers")
fresh_session = _helpers.fresh_session

def _swish(x: np.ndarray, beta: float) -> np.ndarray:
    return x / (1.0 + np.exp(-beta * x))


def _swish_grad(x: np.ndarray, beta: float) -> np.ndarray:
    s = 1.0 / (1.0 + np.exp(-beta * x))
    return s + beta * x * s * (1.0 - s)


def _builder_swish(x, beta: float, name: str = "my_swish"):
    return (flow.user_op_builder(name).Op("swish").Input("x", [x]).Output("out").Attr("beta", beta)
            .Build().InferAndTryRun().RemoteBlobList()[0])


def _train(how: str, x: np.ndarray, init: np.ndarray) -> tuple[list, np.ndarray, list]:
    """Three SGD steps on sum(swish(x @ w)), the op added through the builder or the plugin's function."""
    flow.clear_default_session()
    grads = []

    @flow.global_function(type="train")
    def train(images: tp.Numpy.Placeholder((6, 4))) -> tp.Numpy:
        w = flow.get_variable("w", shape=(4, 3), initializer=flow.constant_initializer(0.0))
        h = flow.matmul(images, w)
        y = _builder_swish(h, 1.5) if how == "builder" else flowjob_swish.swish(h, beta=1.5)
        loss = flow.math.reduce_sum(y)
        _helpers.sgd(loss)
        flow.watch_diff(w, lambda g: grads.append(g.copy()))
        return loss

    flow.load_variables({"w": init})
    losses = [train(x) for _ in range(3)]
    return losses, _helpers.value("w"), grads


def test_swish_through_the_builder_trains_like_the_plugin_function():
    """Same program twice: the builder and flowjob_swish.swish give bitwise the same losses, gradients and
    weights, and the weight gradient matches numpy's."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 4)).astype(np.float32)
    init = rng.standard_normal((4, 3)).astype(np.float32)
    (bl, bw, bg), (fl, fw, fg) = _train("builder", x, init), _train("function", x, init)
    for a, b in [*zip(bl, fl), *zip(bg, fg), (bw, fw)]:
        np.testing.assert_array_equal(a, b)
    h = x.astype(np.float64) @ init
    np.testing.assert_allclose(bg[0], x.T.astype(np.float64) @ _swish_grad(h, 1.5), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(bl[0], _swish(h, 1.5).sum(), rtol=1e-5)
    assert bl[-1] < bl[0]  # plain SGD on sum(swish) lowers it


def test_the_swish_record_passes_the_gradient_kit():
    """The builder adds the plugin's own record, so its gradient rule is the one the kit checks."""
    x = np.random.default_rng(1).standard_normal((3, 4))
    check_grads("swish", [x], {"beta": 1.5})


def test_the_node_carries_the_builder_name_and_attributes():
    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
        return _builder_swish(x, 0.5, name="named_swish")

    x = np.linspace(-2, 2, 6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_allclose(job(x), _swish(x.astype(np.float64), 0.5), rtol=1e-6)
    (node,) = [n for n in job.ensure_traced().nodes if n.op == "swish"]
    assert (node.name, node.attrs, node.outputs) == ("named_swish", {"beta": 0.5}, ("named_swish/out_0",))


def test_builtin_ops_by_their_legacy_argument_names():
    """The documentation's argmax example, a list input (add_n) and an op with several outputs (split)."""
    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((2, 6))) -> Tuple[tp.Numpy, tp.Numpy]:
        index = (flow.user_op_builder("myargmax").Op("argmax").Input("in", [x]).Output("out")
                 .Build().InferAndTryRun().RemoteBlobList()[0])
        total = (flow.consistent_user_op_builder("sum3").Op("add_n").Input("in", [x, x, x]).Output("out")
                 .Build().InferAndTryRun().SoleOutputBlob())
        return index, total

    x = np.array([[1, 5, 2, 0, 3, 4], [9, 1, 8, 2, 7, 3]], np.float32)
    index, total = job(x)
    np.testing.assert_array_equal(index, [1, 0])
    np.testing.assert_array_equal(total, 3 * x)


def _trace_error(body, match: str) -> None:
    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
        return body(x)

    with pytest.raises(OpBuildError, match=match):
        job(np.ones((2, 3), np.float32))


@pytest.mark.parametrize("body, match", [
    (lambda x: flow.user_op_builder("a").Op("swsh"),
     r"job 'job', user op 'a' \(swsh\) at .*test_user_op_builder.py:\d+: no op 'swsh' is registered.*"
     r"did you mean 'swish'"),
    (lambda x: flow.user_op_builder("b").Op("swish").Input("in", [x]),
     r"user op 'b' \(swish\).*: op 'swish' has no input 'in'; its inputs: x"),
    (lambda x: flow.user_op_builder("c").Op("swish").Input("x", [x]).Attr("alpha", 1.0),
     r"user op 'c' \(swish\).*: op 'swish' has no attribute 'alpha'; its attributes: beta"),
    (lambda x: flow.user_op_builder("d").Input("y", [x]).Op("swish").Build(),
     r"op 'swish' has no input 'y'"),
    (lambda x: flow.user_op_builder("e").Input("x", [x]).Build(), r"user op 'e'.*call Op\(op_type_name\) before Build"),
    (lambda x: flow.user_op_builder("f").Op("swish").Input("x", [x]).Output("out", num=2).Build().InferAndTryRun(),
     r"Output calls declare 2 output\(s\) \(out=2\), the op has 1"),
    (lambda x: flow.user_op_builder("g").Op("swish").Input("x", [x]).Build().RemoteBlobList(),
     r"call InferAndTryRun\(\) before asking for its output blobs"),
    (lambda x: flow.user_op_builder("h").Op("split").Input("x", [x]).Attr("axis", 1).Attr("sizes", [1, 1, 1])
     .Build().InferAndTryRun().SoleOutputBlob(), r"SoleOutputBlob needs exactly one output, the op has 3"),
    (lambda x: flow.user_op_builder("i").Op("swish").Input("x", x), r"takes a list of blobs, got Blob"),
    (lambda x: flow.user_op_builder("j").Op("swish").Input("x", [x, x]).Build().InferAndTryRun(),
     r"job 'job', op 'j' \(swish\) at .*: swish takes one input, got 2"),
])
def test_wrong_configurations_name_the_job_op_and_argument(body, match):
    _trace_error(body, match)

    @flow.global_function()
    def after(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
        return _builder_swish(x, 1.0)

    assert after(np.zeros((2, 3), np.float32)).shape == (2, 3)  # the session goes on


def test_outside_a_job():
    with pytest.raises(Exception, match=r"flow.user_op_builder\('x'\) is only valid inside a @flow.global_function"):
        flow.user_op_builder("x")


def test_load_library_points_to_the_plugin_guide():
    with pytest.raises(ConfigError, match=r"load_library\('libmy_op.so'\): flowjob runs no compiled OneFlow op "
                                          r"libraries.*the plugin guide examples/plugins/flowjob-swish/README.md"):
        flow.config.load_library("libmy_op.so")
