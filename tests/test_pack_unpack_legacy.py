"""Legacy v0.3/v0.4 flow.unpack / flow.pack against numpy: legacy's own test (pack(unpack(a, 3), 3) == a),
row-wise functions run per slice and joined back, mixing with repeat/acc and nesting, gradients (unpack's is
pack, pack's is unpack), micro-batched training (unpack + per-tick losses give the full-batch gradient), and
the errors: a count that does not divide axis 0 or the ticks, results ticking more than once, bad arguments."""
from __future__ import annotations

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core import OpBuildError
from flowjob_core.testing.modules import sibling

RNG = np.random.default_rng(23)

_helpers = sibling(__file__, "op_surface_helpers")
value, sgd = _helpers.value, _helpers.sgd


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_legacy_unpack_pack_gives_back_the_input(dtype) -> None:
    names = {}

    @flow.global_function()
    def UnpackPackJob(a: tp.Numpy.Placeholder((3, 4), dtype=flow.float if dtype == np.float32 else flow.double)
                      ) -> tp.Numpy:
        u = flow.unpack(a, 3)
        out = flow.pack(u, 3)
        names["unpack"], names["pack"], names["shape"] = u.lbn, out.lbn, (tuple(u.shape), tuple(out.shape))
        return out

    x = RNG.random((3, 4)).astype(dtype)
    y = UnpackPackJob(x)
    assert y.dtype == dtype and np.array_equal(y, x)
    assert names["unpack"].startswith("Unpack_") and names["pack"].startswith("Pack_")
    assert names["shape"] == ((1, 4), (3, 4))


def test_a_row_wise_function_per_slice_joins_back_to_the_function_of_the_batch() -> None:
    n = 4
    x = RNG.standard_normal((8, 5)).astype(np.float32)
    w0 = RNG.standard_normal((5, 3)).astype(np.float32)

    def f(x, w):
        return flow.nn.softmax(flow.math.tanh(flow.matmul(x, w)) * 2.0)

    @flow.global_function()
    def sliced(x: tp.Numpy.Placeholder((8, 5))) -> tp.Numpy:
        w = flow.get_variable("w", shape=(5, 3), initializer=lambda shape, dtype, rng: w0.copy())
        return flow.pack(f(flow.unpack(x, n), flow.repeat(w, n)), n)

    @flow.global_function()
    def whole(x: tp.Numpy.Placeholder((8, 5))) -> tp.Numpy:
        w = flow.get_variable("w", shape=(5, 3), initializer=lambda shape, dtype, rng: w0.copy())
        return f(x, w)

    h = np.exp(np.tanh(x @ w0) * 2.0)
    expected = h / h.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(sliced(x), expected, rtol=1e-5)
    np.testing.assert_allclose(sliced(x), whole(x), rtol=1e-6)


def test_acc_of_the_slices_sums_them_and_repeat_then_pack_tiles() -> None:
    @flow.global_function()
    def summed(x: tp.Numpy.Placeholder((6, 2))) -> tp.Numpy:
        return flow.acc(flow.unpack(x, 3), 3)

    @flow.global_function()
    def tiled(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
        return flow.pack(flow.repeat(x, 3), 3)

    x = RNG.random((6, 2)).astype(np.float32)
    np.testing.assert_allclose(summed(x), x[0:2] + x[2:4] + x[4:6], rtol=1e-6)
    y = RNG.random((2, 3)).astype(np.float32)
    np.testing.assert_array_equal(tiled(y), np.concatenate([y, y, y]))


def test_nested_unpacks_cut_consecutive_slices() -> None:
    @flow.global_function()
    def nested(x: tp.Numpy.Placeholder((12, 2))) -> tp.Numpy:
        inner = flow.unpack(flow.unpack(x, 2), 3)  # 6 ticks of 2 rows, tick 3*t + j = rows of (t, j)
        return flow.pack(flow.pack(inner * 2.0, 3), 2)

    @flow.global_function()
    def at_once(x: tp.Numpy.Placeholder((12, 2))) -> tp.Numpy:
        return flow.pack(flow.unpack(flow.unpack(x, 2), 3) + 1.0, 6)

    x = RNG.random((12, 2)).astype(np.float32)
    np.testing.assert_allclose(nested(x), x * 2.0, rtol=1e-6)
    np.testing.assert_allclose(at_once(x), x + 1.0, rtol=1e-6)


def test_a_repeated_input_joins_the_slices() -> None:
    @flow.global_function()
    def scaled(x: tp.Numpy.Placeholder((4, 3)), s: tp.Numpy.Placeholder((1, 3))) -> tp.Numpy:
        return flow.pack(flow.unpack(x, 4) * flow.repeat(s, 4), 4)

    x = RNG.random((4, 3)).astype(np.float32)
    s = RNG.random((1, 3)).astype(np.float32)
    np.testing.assert_allclose(scaled(x, s), x * s, rtol=1e-6)


def test_gradients_of_unpack_and_pack_are_each_other() -> None:
    n = 3
    x = RNG.standard_normal((6, 4)).astype(np.float32)
    c = RNG.standard_normal((6, 4)).astype(np.float32)
    got = {}

    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((6, 4)), c: tp.Numpy.Placeholder((6, 4))) -> tp.Numpy:
        v = flow.get_variable("v", shape=(6, 4), initializer=flow.zeros_initializer())
        xv = x + v
        flow.watch_diff(xv, lambda d: got.setdefault("dx", d.numpy()))
        packed = flow.pack(flow.math.square(flow.unpack(xv, n)), n)
        loss = flow.math.reduce_sum(packed * c)
        sgd(loss)
        return loss

    np.testing.assert_allclose(train(x, c), (x * x * c).sum(), rtol=1e-5)
    flow.sync_default_session()
    np.testing.assert_allclose(got["dx"], 2 * x * c, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(value("v"), -0.1 * 2 * x * c, rtol=1e-5, atol=1e-6)


def _train_step(micro: int | None, x: np.ndarray, labels: np.ndarray, w0: np.ndarray) -> tuple[float, np.ndarray]:
    flow.clear_default_session()

    @flow.global_function(type="train")
    def step(x: tp.Numpy.Placeholder((8, 5)), labels: tp.Numpy.Placeholder((8,), dtype=flow.int32)) -> tp.Numpy:
        w = flow.get_variable("w", shape=(5, 3), initializer=lambda shape, dtype, rng: w0.copy())
        if micro is None:
            logits = flow.matmul(x, w)
            lab = labels
        else:  # micro-batches of 8 / micro rows, the gradients of their losses summed by repeat's gradient;
            # the cross entropy's gradient reuses its forward's label split, which must be its own tick's
            logits = flow.matmul(flow.unpack(x, micro), flow.repeat(w, micro))
            lab = flow.unpack(labels, micro)
        loss = flow.math.reduce_sum(flow.nn.sparse_softmax_cross_entropy_with_logits(lab, logits))
        sgd(loss)
        return loss if micro is None else flow.acc(loss, micro)

    total = float(step(x, labels))
    flow.sync_default_session()
    return total, value("w")


@pytest.mark.parametrize("micro", [2, 4, 8])
def test_micro_batches_of_unpack_give_the_full_batch_update(micro) -> None:
    x = RNG.standard_normal((8, 5)).astype(np.float32)
    labels = RNG.integers(0, 3, 8).astype(np.int32)
    w0 = RNG.standard_normal((5, 3)).astype(np.float32)
    full_loss, full_w = _train_step(None, x, labels, w0)
    loss, w = _train_step(micro, x, labels, w0)
    # the numpy reference: softmax cross entropy summed over the batch
    logits = x @ w0
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    expected_loss = -np.log(p[np.arange(8), labels]).sum()
    onehot = np.eye(3, dtype=np.float32)[labels]
    np.testing.assert_allclose(full_loss, expected_loss, rtol=1e-5)
    np.testing.assert_allclose(loss, expected_loss, rtol=1e-5)
    np.testing.assert_allclose(w, w0 - 0.1 * x.T @ (p - onehot), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(w, full_w, rtol=1e-5, atol=1e-6)


def _conv_step(micro: int | None, x: np.ndarray, w0: np.ndarray) -> np.ndarray:
    flow.clear_default_session()

    @flow.global_function(type="train")
    def conv_step(x: tp.Numpy.Placeholder((4, 2, 6, 6))) -> tp.Numpy:
        w = flow.get_variable("w", shape=(3, 2, 3, 3), initializer=lambda shape, dtype, rng: w0.copy())
        if micro is not None:
            x, w = flow.unpack(x, micro), flow.repeat(w, micro)
        y = flow.nn.conv2d(x, w, strides=1, padding="SAME")
        loss = flow.math.reduce_sum(flow.math.square(y))
        sgd(loss)
        return loss if micro is None else flow.acc(loss, micro)

    conv_step(x)
    flow.sync_default_session()
    return value("w")


def test_micro_batched_conv_training_gives_the_full_batch_update() -> None:
    # conv's filter gradient may reuse its forward node's work: each tick's clone names its own tick's forward
    x = RNG.standard_normal((4, 2, 6, 6)).astype(np.float32)
    w0 = (RNG.standard_normal((3, 2, 3, 3)) * 0.1).astype(np.float32)
    np.testing.assert_allclose(_conv_step(4, x, w0), _conv_step(None, x, w0), rtol=1e-4, atol=1e-5)


def test_the_planner_sees_slices_and_one_concat() -> None:
    @flow.global_function()
    def unrolled(x: tp.Numpy.Placeholder((6, 2))) -> tp.Numpy:
        return flow.pack(flow.math.exp(flow.unpack(x, 3, name="cut"), name="act"), 3, name="join")

    x = RNG.random((6, 2)).astype(np.float32)
    np.testing.assert_allclose(unrolled(x), np.exp(x), rtol=1e-6)
    nodes = {n.name: n for n in unrolled.plan().job.nodes}
    assert {"cut", "cut-tick1", "cut-tick2", "act-tick2"} <= set(nodes) and "act-tick3" not in nodes
    assert [nodes[k].attrs["part"] for k in ("cut", "cut-tick1", "cut-tick2")] == [0, 1, 2]
    join = nodes["join"]
    assert join.op == "concat" and join.attrs == {"axis": 0} and len(join.inputs) == 3


def _usable() -> None:
    @flow.global_function()
    def fine(x: tp.Numpy.Placeholder((4,))) -> tp.Numpy:
        return flow.pack(flow.unpack(x, 2) * 2.0, 2)

    np.testing.assert_array_equal(fine(np.arange(4, dtype=np.float32)), [0.0, 2.0, 4.0, 6.0])


def test_a_count_that_does_not_divide_axis_0_is_an_error_naming_job_op_and_line() -> None:
    @flow.global_function()
    def uneven(x: tp.Numpy.Placeholder((5, 2))) -> tp.Numpy:
        return flow.pack(flow.unpack(x, 2), 2)

    with pytest.raises(OpBuildError) as info:
        uneven(np.ones((5, 2), np.float32))
    message = str(info.value)
    assert "job 'uneven'" in message and "flow.unpack" in message and "test_pack_unpack_legacy.py:" in message
    assert "unpack_num=2 does not divide axis 0" in message and "(5, 2)" in message
    _usable()


def test_a_pack_count_that_does_not_divide_the_ticks_is_an_error() -> None:
    @flow.global_function()
    def uneven_pack(x: tp.Numpy.Placeholder((6, 2))) -> tp.Numpy:
        return flow.pack(flow.unpack(x, 3), 2, name="pack2")

    with pytest.raises(OpBuildError, match=r"job 'uneven_pack', op 'pack2' \(pack\) at .*test_pack_unpack_legacy\.py:"
                                           r".*pack_num=2 does not divide the 3 ticks"):
        uneven_pack(np.ones((6, 2), np.float32))

    @flow.global_function()
    def unpacked_never(x: tp.Numpy.Placeholder((6, 2))) -> tp.Numpy:
        return flow.pack(x, 2)

    with pytest.raises(OpBuildError, match=r"pack_num=2 does not divide the 1 ticks"):
        unpacked_never(np.ones((6, 2), np.float32))
    _usable()


def test_a_returned_slice_ticking_more_than_once_is_an_error() -> None:
    @flow.global_function()
    def returns_ticks(x: tp.Numpy.Placeholder((6, 2))) -> tp.Numpy:
        return flow.unpack(x, 3, name="cut") + 1.0

    with pytest.raises(OpBuildError, match=r"job 'returns_ticks' returns .* ticks 3 times .*flow\.pack\(blob, 3\)"):
        returns_ticks(np.ones((6, 2), np.float32))
    _usable()


def test_a_slice_mixed_with_an_unsliced_input_is_an_error() -> None:
    @flow.global_function()
    def mixed(x: tp.Numpy.Placeholder((4, 2)), y: tp.Numpy.Placeholder((2, 2))) -> tp.Numpy:
        return flow.pack(flow.math.add(flow.unpack(x, 2), y, name="mix"), 2)

    with pytest.raises(OpBuildError, match=r"job 'mixed', op 'mix' .*tick at different rates.*2 times.*once"):
        mixed(np.ones((4, 2), np.float32), np.ones((2, 2), np.float32))
    _usable()


@pytest.mark.parametrize("count", [0, -2, 2.5, True, None])
def test_counts_must_be_positive_ints(count) -> None:
    @flow.global_function()
    def bad_unpack(x: tp.Numpy.Placeholder((4,))) -> tp.Numpy:
        return flow.pack(flow.unpack(x, count), 1)

    with pytest.raises(OpBuildError, match=r"job 'bad_unpack', flow.unpack at .*unpack_num must be an int >= 1"):
        bad_unpack(np.ones(4, np.float32))

    @flow.global_function()
    def bad_pack(x: tp.Numpy.Placeholder((4,))) -> tp.Numpy:
        return flow.pack(x, count)

    with pytest.raises(OpBuildError, match=r"flow.pack at .*pack_num must be an int >= 1"):
        bad_pack(np.ones(4, np.float32))
    _usable()


def test_scalars_and_non_blobs_are_refused() -> None:
    @flow.global_function()
    def scalar(x: tp.Numpy.Placeholder((4,))) -> tp.Numpy:
        return flow.pack(flow.unpack(flow.reshape(flow.math.reduce_sum(x), ()), 1), 1)  # a 0-d blob

    with pytest.raises(OpBuildError, match=r"flow.unpack at .*must have rank >= 1"):
        scalar(np.ones(4, np.float32))

    @flow.global_function()
    def not_blob(x: tp.Numpy.Placeholder((4,))) -> tp.Numpy:
        return flow.unpack(np.ones(4), 2)

    with pytest.raises(TypeError, match="flow.unpack: input must be a blob, got ndarray"):
        not_blob(np.ones(4, np.float32))
    _usable()
