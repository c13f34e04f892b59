"""``flow.cast`` differentiates for every dtype, as legacy's: a float blob cast to an integer type, computed
on and cast back still gets a gradient; an op without a gradient rule that only integers reach ends the path."""
import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core.testing.modules import sibling

SHAPE = (3, 4)
RNG = np.random.default_rng(2)
X = RNG.integers(0, 10, SHAPE).astype(np.float32)
Y = RNG.integers(0, 10, SHAPE).astype(np.float32)
fresh_session = sibling(__file__, "op_surface_helpers").fresh_session  # each test in its own session


def sgd() -> object:
    return flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [1e-4]), momentum=0)


@pytest.mark.parametrize("dtype", [flow.int8, flow.int32, flow.int64, flow.double])
def test_an_integer_product_gets_gradients(dtype):
    # legacy's test_multiply: both factors cast to dtype, multiplied, cast back to float
    got = {}

    def keep(key):
        return lambda value: got.setdefault(key, value)

    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder(SHAPE), y: tp.Numpy.Placeholder(SHAPE)) -> tp.Numpy:
        x = x + flow.get_variable("vx", shape=(1,), initializer=flow.zeros_initializer())
        y = y + flow.get_variable("vy", shape=(1,), initializer=flow.zeros_initializer())
        x, y = flow.cast(x, dtype=dtype), flow.cast(y, dtype=dtype)
        out = flow.cast(flow.math.multiply(x, y), dtype=flow.float)
        sgd().minimize(out)
        for name, blob in (("x", x), ("y", y), ("out", out)):
            flow.watch_diff(blob, keep(name + "_diff"))
        return out

    np.testing.assert_array_equal(train(X, Y), X * Y)
    assert got["x_diff"].dtype == flow.convert_oneflow_dtype_to_numpy_dtype(dtype)
    np.testing.assert_array_equal(got["x_diff"], got["out_diff"] * Y)
    np.testing.assert_array_equal(got["y_diff"], got["out_diff"] * X)
    # through the casts, the variables get the summed gradient of the loss's 12 elements, scaled by 1/12
    np.testing.assert_allclose(flow.get_all_variables()["vx"].numpy(), -1e-4 * Y.sum() / Y.size, rtol=1e-5)


def test_a_mask_from_a_comparison_keeps_training():
    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder(SHAPE)) -> tp.Numpy:
        w = flow.get_variable("w", shape=SHAPE, initializer=flow.constant_initializer(1.0))
        v = x * w - 4.5
        # the comparison's int8 output gets a gradient through the cast, and has no rule: the path ends there
        loss = flow.math.reduce_sum(flow.cast(v > 0, dtype=flow.float) * v)
        sgd().minimize(loss)
        return loss

    mask = (X - 4.5 > 0).astype(np.float32)
    np.testing.assert_allclose(train(X), np.sum(mask * (X - 4.5)), rtol=1e-6)
    np.testing.assert_allclose(flow.get_all_variables()["w"].numpy(), 1.0 - 1e-4 * mask * X, rtol=1e-6)


def test_an_integer_loss_is_seeded_with_integer_ones():
    # legacy's tril/masked_fill tests: a float variable cast into an int32 blob whose op output is the loss
    got = {}

    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder(SHAPE, dtype=flow.int32)) -> tp.Numpy:
        v = flow.get_variable("v", shape=(1,), initializer=flow.zeros_initializer())
        x = x + flow.cast(v, dtype=flow.int32)
        out = flow.math.tril(x, 0)
        sgd().minimize(out)
        flow.watch_diff(x, lambda d: got.setdefault("x_diff", d))
        return out

    x = X.astype(np.int32)
    np.testing.assert_array_equal(train(x), np.tril(x))
    assert got["x_diff"].dtype == np.int32
    np.testing.assert_array_equal(got["x_diff"], np.tril(np.ones(SHAPE, np.int32)))
    # the variable's gradient: the kept elements' ones summed, cast back to float, scaled by 1/12 elements
    np.testing.assert_allclose(flow.get_all_variables()["v"].numpy(), [-1e-4 * np.tril(np.ones(SHAPE)).sum() / X.size],
                               rtol=1e-5)

