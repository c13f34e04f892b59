"""Legacy op-test programs that add ops by their v0.4 type names through ``flow.user_op_builder``:
multi_square_sum, split_like (trained), dynamic_loss_scale_schedule (a legacy name of the optimizer
package's record), ``flow.experimental.square_sum``, ``indexed_slices_reduce_sum`` and
v0.3.4's ``fused_cast_scale`` with its input ``scalar``."""
from __future__ import annotations

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as oft
from flowjob_core.errors import OpBuildError
from flowjob_core.testing.modules import sibling

_helpers = sibling(__file__, "op_surface_helpers")


def test_multi_square_sum_by_its_legacy_name():
    flow.clear_default_session()
    x = np.random.default_rng(0).random((3, 4, 5)).astype(np.float32)

    @flow.global_function()
    def job(x: oft.Numpy.Placeholder((3, 4, 5))) -> oft.Numpy:
        xs = [x + 0.1 * i for i in range(7)]
        return (flow.user_op_builder("MultiSquareSum").Op("multi_square_sum").Input("x", xs).Output("y")
                .Build().InferAndTryRun().RemoteBlobList()[0])

    expected = sum(np.sum((x + np.float32(0.1 * i)) ** 2, dtype=np.float64) for i in range(7))
    np.testing.assert_allclose(job(x), [expected], rtol=1e-6)


def test_square_sum_and_indexed_slices_reduce_sum_in_experimental():
    flow.clear_default_session()
    rng = np.random.default_rng(1)
    indices = rng.integers(0, 8, 64).astype(np.int32)
    values = rng.random((64, 3)).astype(np.float32)

    @flow.global_function()
    def job(i: oft.Numpy.Placeholder((64,), dtype=flow.int32), v: oft.Numpy.Placeholder((64, 3))):
        return flow.experimental.square_sum(v), flow.experimental.indexed_slices_reduce_sum(i, v)

    square, (y_indices, y_values, num) = job(indices, values).get()
    assert square.numpy().shape == (1,)
    np.testing.assert_allclose(square.numpy(), [np.sum(values.astype(np.float64) ** 2)], rtol=1e-6)
    keys = np.unique(indices)
    assert num.numpy().dtype == np.int64 and num.numpy()[0] == keys.size
    np.testing.assert_array_equal(y_indices.numpy()[:keys.size], keys)
    assert not y_indices.numpy()[keys.size:].any() and not y_values.numpy()[keys.size:].any()
    np.testing.assert_allclose(y_values.numpy()[:keys.size], [values[indices == k].sum(0) for k in keys], rtol=1e-6)


def test_split_like_trains_and_sends_gradient_to_the_pieces_used():
    flow.clear_default_session()
    grads = []

    @flow.global_function(type="train")
    def job(x: oft.Numpy.Placeholder((5, 2))) -> oft.Numpy:
        v = flow.get_variable("v", shape=(5, 2), initializer=flow.constant_initializer(0.0))
        x = x + v
        likes = [flow.constant(0, dtype=flow.float, shape=(2, 7)), flow.constant(0, dtype=flow.float, shape=(3,))]
        y0, y1 = (flow.user_op_builder("split_like").Op("split_like").Input("in", [x]).Input("like", likes)
                  .Output("out", 2).Attr("axis", 0).Build().InferAndTryRun().RemoteBlobList())
        assert (tuple(y0.shape), tuple(y1.shape)) == ((2, 2), (3, 2))
        loss = flow.math.reduce_sum(y0 * 3.0)
        _helpers.sgd(loss)
        flow.watch_diff(x, lambda g: grads.append(g.copy()))
        return loss

    x = np.arange(10, dtype=np.float32).reshape(5, 2)
    np.testing.assert_allclose(job(x), 3 * x[:2].sum())
    np.testing.assert_array_equal(grads[0], np.concatenate([np.full((2, 2), 3.0), np.zeros((3, 2))]))


@pytest.mark.parametrize("count, steps, period, expected", [
    (1, 1, 1, (0, 50.0)),    # a non-finite gradient: counter reset, scale halved
    (0, 1, 1, (0, 200.0)),   # the period reached (legacy counts steps >= period): scale doubled
    (0, 1, 10, (2, 100.0)),  # a good step short of the period
])
def test_dynamic_loss_scale_schedule_by_its_legacy_name(count, steps, period, expected):
    flow.clear_default_session()

    def variables():
        good = flow.get_variable("good_step_counter", shape=(1,), dtype=flow.int64,
                                 initializer=flow.constant_initializer(steps, dtype=flow.int64))
        scale = flow.get_variable("loss_scale", shape=(1,), initializer=flow.constant_initializer(100.0))
        return good, scale

    @flow.global_function()
    def schedule(count: oft.Numpy.Placeholder((1,), dtype=flow.int64)):
        good, scale = variables()
        op = (flow.user_op_builder("dynamic_schedule").Op("dynamic_loss_scale_schedule")
              .Input("count_not_finite", [count]).Input("loss_scale", [scale]).Input("good_step_counter", [good])
              .Attr("increment_period", period).Attr("multiplier", 2.0).Build())
        assert op._conf.op_type == "optim_dynamic_loss_scale_schedule"  # the job records the record's name
        op.InferAndTryRun()

    @flow.global_function()
    def fetch():
        return variables()

    schedule(np.array([count], np.int64))
    good, scale = fetch().get()
    assert (int(good.numpy()[0]), float(scale.numpy()[0])) == expected



def _fused_cast_scale_v034(x, scalar, name):
    # v0.3.4's test_fused_cast_scale.py: the scale's input was called "scalar" (v0.4: "scale_by_tensor")
    return (flow.user_op_builder(name).Op("fused_cast_scale").Input("x", [x]).Input("scalar", [scalar])
            .Output("y").Build().InferAndTryRun().RemoteBlobList()[0])


def test_fused_cast_scale_takes_v034s_input_name_scalar():
    flow.clear_default_session()
    func_config = flow.FunctionConfig()
    func_config.default_data_type(flow.float)
    func_config.enable_fuse_cast_scale(True)

    @flow.global_function(type="predict", function_config=func_config)
    def FusedCastScaleJob():
        with flow.scope.placement("cpu", "0:0"):
            x = flow.get_variable("in", shape=(5, 4, 3), dtype=flow.float,
                                  initializer=flow.random_uniform_initializer(), trainable=True)
            scale = flow.get_variable("scale", shape=(1,), dtype=flow.float,
                                      initializer=flow.random_uniform_initializer(), trainable=False)
            loss = flow.cast(x, dtype=flow.double)
            loss = _fused_cast_scale_v034(loss, flow.cast(scale, dtype=flow.float), name="fused_cast_scale")
            flow.watch(x, lambda b: seen.setdefault("x", b.numpy()))
            flow.watch(scale, lambda b: seen.setdefault("scale", b.numpy()))
            return flow.cast(loss, dtype=flow.float)

    seen = {}
    of_out = FusedCastScaleJob().get()
    np.testing.assert_allclose(of_out.numpy(), seen["x"] * seen["scale"], rtol=1e-5, atol=1e-5)


def test_fused_cast_scale_refuses_both_names_at_once():
    @flow.global_function()
    def job(x: oft.Numpy.Placeholder((2,)), s: oft.Numpy.Placeholder((1,))) -> oft.Numpy:
        return (flow.user_op_builder("both").Op("fused_cast_scale").Input("x", [x]).Input("scalar", [s])
                .Input("scale_by_tensor", [s]).Output("y").Build().InferAndTryRun().RemoteBlobList()[0])

    with pytest.raises(OpBuildError, match="'scale_by_tensor' is given twice"):
        job(np.ones(2, np.float32), np.ones(1, np.float32))
