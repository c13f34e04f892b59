"""Legacy v0.3/v0.4 flow.repeat / flow.acc against numpy: legacy's own test (acc(repeat(a, 3), 3) == a * 3),
regions of several ops, nested counts, random ops drawing per tick, gradients through a repeated region
(dx and a repeated variable updated by SGD), and the errors legacy's time shapes raised: inputs ticking at
different rates, results that tick more than once per call, counts that do not divide, bad arguments."""
from __future__ import annotations

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core import OpBuildError
from flowjob_core.testing.modules import sibling

RNG = np.random.default_rng(11)

_helpers = sibling(__file__, "op_surface_helpers")
fresh_session, value, sgd = _helpers.fresh_session, _helpers.value, _helpers.sgd


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_legacy_repeat_acc_is_a_times_n(dtype) -> None:
    names = {}

    @flow.global_function()
    def RepeatAccJob(a: tp.Numpy.Placeholder((3, 4), dtype=flow.float if dtype == np.float32 else flow.double)
                     ) -> tp.Numpy:
        r = flow.repeat(a, 3)
        out = flow.acc(r, 3)
        names["repeat"], names["acc"] = r.lbn, out.lbn
        return out

    x = RNG.random((3, 4)).astype(dtype)
    y = RepeatAccJob(x)
    assert y.dtype == dtype and np.array_equal(y, x * 3)
    assert names["repeat"].startswith("Repeat_") and names["acc"].startswith("Acc_")


def test_a_region_of_several_ops_runs_once_per_tick() -> None:
    @flow.global_function()
    def region(x: tp.Numpy.Placeholder((2, 5))) -> tp.Numpy:
        w = flow.get_variable("w", shape=(5,), initializer=flow.constant_initializer(0.5))
        h = flow.math.tanh(flow.repeat(x, 4) * flow.repeat(w, 4) + 1.0)  # 1.0 is a constant: it joins any tick
        positive = flow.cast(h > 0.5, flow.float)
        return flow.acc(h * positive, 4, name="summed")

    x = RNG.standard_normal((2, 5)).astype(np.float32)
    h = np.tanh(x * 0.5 + 1.0)
    np.testing.assert_allclose(region(x), 4 * h * (h > 0.5), rtol=1e-6)


def test_names_and_counts_one_are_kept() -> None:
    @flow.global_function()
    def once(x: tp.Numpy.Placeholder((3,))) -> tp.Numpy:
        return flow.acc(flow.repeat(x, 1, name="r1") * 2.0, 1, name="a1")

    x = RNG.random(3).astype(np.float32)
    np.testing.assert_array_equal(once(x), x * 2)


def test_nested_repeats_multiply_and_acc_sums_consecutive_ticks() -> None:
    @flow.global_function()
    def nested(x: tp.Numpy.Placeholder((4,))) -> tp.Numpy:
        inner = flow.repeat(flow.repeat(x, 2), 3) * 1.5  # 6 ticks
        return flow.acc(flow.acc(inner, 3), 2)

    @flow.global_function()
    def at_once(x: tp.Numpy.Placeholder((4,))) -> tp.Numpy:
        return flow.acc(flow.repeat(flow.repeat(x, 2), 3), 6)

    x = RNG.random(4)
    x = x.astype(np.float32)
    np.testing.assert_allclose(nested(x), x * 1.5 * 6, rtol=1e-6)
    np.testing.assert_allclose(at_once(x), x * 6, rtol=1e-6)


def test_unseeded_random_ops_draw_per_tick() -> None:
    @flow.global_function()
    def draws(p: tp.Numpy.Placeholder((2000,))) -> tp.Numpy:
        return flow.acc(flow.random.bernoulli(flow.repeat(p, 4)), 4)

    counts = draws(np.full(2000, 0.5, np.float32))
    assert set(np.unique(counts)) <= {0.0, 1.0, 2.0, 3.0, 4.0}
    # one draw repeated would give only 0 and 4
    assert np.isin(counts, [1.0, 2.0, 3.0]).mean() > 0.5


def _seeded_counts() -> np.ndarray:
    flow.clear_default_session()

    @flow.global_function()
    def seeded(p: tp.Numpy.Placeholder((2000,))) -> tp.Numpy:
        return flow.acc(flow.random.bernoulli(flow.repeat(p, 4), seed=5), 4)

    return seeded(np.full(2000, 0.5, np.float32))


def test_a_seeded_random_op_differs_per_tick_and_repeats_per_session() -> None:
    first, second = _seeded_counts(), _seeded_counts()
    np.testing.assert_array_equal(first, second)
    assert np.isin(first, [1.0, 2.0, 3.0]).mean() > 0.5


def test_gradients_flow_through_a_repeated_region_and_update_a_repeated_variable() -> None:
    n, lr = 3, 0.1
    x = RNG.standard_normal((4, 5)).astype(np.float32)
    w0 = RNG.standard_normal(5).astype(np.float32)
    got = {}

    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((4, 5))) -> tp.Numpy:
        v = flow.get_variable("v", shape=(4, 5), initializer=flow.zeros_initializer())
        w = flow.get_variable("w", shape=(5,), initializer=lambda shape, dtype, rng: w0.copy())
        xv = x + v
        flow.watch_diff(xv, lambda d: got.setdefault("dx", d.numpy()))
        h = flow.math.tanh(flow.repeat(xv, n) * flow.repeat(w, n))
        loss = flow.math.reduce_sum(h)  # ticks n times: the n ticks' gradients add up
        sgd(loss)
        return flow.acc(loss, n)

    total = train(x)
    flow.sync_default_session()
    t = np.tanh(x * w0)
    np.testing.assert_allclose(total, n * t.sum(), rtol=1e-5)
    np.testing.assert_allclose(got["dx"], n * (1 - t * t) * w0, rtol=1e-5, atol=1e-6)
    dw = n * ((1 - t * t) * x).sum(axis=0)
    np.testing.assert_allclose(value("w"), w0 - lr * dw, rtol=1e-5, atol=1e-6)


def test_a_loss_summed_by_acc_gives_the_same_update() -> None:
    n = 2
    x = RNG.standard_normal((3, 2)).astype(np.float32)

    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((3, 2))) -> tp.Numpy:
        w = flow.get_variable("w", shape=(2,), initializer=flow.constant_initializer(1.0))
        loss = flow.math.reduce_sum(flow.acc(flow.math.square(flow.repeat(x, n) * flow.repeat(w, n)), n))
        sgd(loss)
        return loss

    np.testing.assert_allclose(train(x), n * (x * x).sum(), rtol=1e-5)
    dw = n * (2 * x * x).sum(axis=0)
    np.testing.assert_allclose(value("w"), 1.0 - 0.1 * dw, rtol=1e-5)


def _usable() -> None:
    @flow.global_function()
    def fine(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        return flow.acc(flow.repeat(x, 2), 2)

    np.testing.assert_array_equal(fine(np.ones(2, np.float32)), [2.0, 2.0])


def test_inputs_ticking_at_different_rates_are_an_error_naming_op_counts_and_line() -> None:
    @flow.global_function()
    def mixed(x: tp.Numpy.Placeholder((3,))) -> tp.Numpy:
        w = flow.get_variable("w", shape=(3,), initializer=flow.ones_initializer())
        return flow.acc(flow.math.add(flow.repeat(x, 3), w, name="mix"), 3)

    with pytest.raises(OpBuildError) as info:
        mixed(np.ones(3, np.float32))
    message = str(info.value)
    assert "job 'mixed'" in message and "'mix'" in message
    assert "3 times" in message and "'w/out' once" in message
    assert "test_repeat_acc_legacy.py:" in message
    _usable()


def test_repeat_of_one_input_and_acc_of_the_other_do_not_mix() -> None:
    @flow.global_function()
    def mixed(x: tp.Numpy.Placeholder((3,))) -> tp.Numpy:
        r = flow.repeat(x, 2)
        return flow.acc(r, 2) + r

    with pytest.raises(OpBuildError, match=r"tick at different rates.*once.*2 times"):
        mixed(np.ones(3, np.float32))
    _usable()


def test_a_returned_blob_ticking_more_than_once_is_an_error() -> None:
    @flow.global_function()
    def returns_ticks(x: tp.Numpy.Placeholder((3,))) -> tp.Numpy:
        return flow.repeat(x, 3, name="rep") * 2.0

    with pytest.raises(OpBuildError, match=r"job 'returns_ticks' returns .* ticks 3 times .*flow\.acc\(blob, 3\)"):
        returns_ticks(np.ones(3, np.float32))
    _usable()


def test_a_watched_blob_ticking_more_than_once_is_an_error() -> None:
    @flow.global_function()
    def watches(x: tp.Numpy.Placeholder((3,))) -> tp.Numpy:
        r = flow.repeat(x, 2)
        flow.watch(r, lambda v: None)
        return flow.acc(r, 2)

    with pytest.raises(OpBuildError, match=r"job 'watches' watches .* ticks 2 times"):
        watches(np.ones(3, np.float32))
    _usable()


def test_an_acc_count_that_does_not_divide_the_ticks_is_an_error() -> None:
    @flow.global_function()
    def uneven(x: tp.Numpy.Placeholder((3,))) -> tp.Numpy:
        return flow.acc(flow.repeat(x, 6), 4, name="acc4")

    with pytest.raises(OpBuildError, match=r"'acc4' \(acc\).*max_acc_num=4 does not divide the 6 ticks"):
        uneven(np.ones(3, np.float32))

    @flow.global_function()
    def unrepeated(x: tp.Numpy.Placeholder((3,))) -> tp.Numpy:
        return flow.acc(x, 2)

    with pytest.raises(OpBuildError, match=r"max_acc_num=2 does not divide the 1 ticks"):
        unrepeated(np.ones(3, np.float32))
    _usable()


@pytest.mark.parametrize("count", [0, -2, 2.5, True, None])
def test_counts_must_be_positive_ints(count) -> None:
    @flow.global_function()
    def bad_repeat(x: tp.Numpy.Placeholder((3,))) -> tp.Numpy:
        return flow.acc(flow.repeat(x, count), 1)

    with pytest.raises(OpBuildError, match=r"job 'bad_repeat', flow.repeat at .*repeat_num must be an int >= 1"):
        bad_repeat(np.ones(3, np.float32))

    @flow.global_function()
    def bad_acc(x: tp.Numpy.Placeholder((3,))) -> tp.Numpy:
        return flow.acc(x, count)

    with pytest.raises(OpBuildError, match=r"flow.acc at .*max_acc_num must be an int >= 1"):
        bad_acc(np.ones(3, np.float32))
    _usable()


def test_inputs_must_be_blobs() -> None:
    @flow.global_function()
    def not_blob(x: tp.Numpy.Placeholder((3,))) -> tp.Numpy:
        return flow.repeat(np.ones(3), 2)

    with pytest.raises(TypeError, match="flow.repeat: input must be a blob, got ndarray"):
        not_blob(np.ones(3, np.float32))
    _usable()


def test_the_planner_sees_a_plain_graph_of_clones() -> None:
    @flow.global_function(type="train")
    def unrolled(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
        w = flow.get_variable("w", shape=(3,), initializer=flow.ones_initializer())
        loss = flow.math.reduce_sum(flow.math.sigmoid(flow.repeat(x, 3) * flow.repeat(w, 3), name="act"))
        sgd(loss)
        return flow.acc(loss, 3, name="total")

    unrolled(np.ones((2, 3), np.float32))
    nodes = {n.name: n for n in unrolled.plan().job.nodes}
    assert "acc" not in {n.op for n in nodes.values()}
    total = nodes["total"]
    assert total.op == "add_n" and len(total.inputs) == 3 and len(set(total.inputs)) == 3
    assert {"act-tick1", "act-tick2"} <= set(nodes) and "act-tick3" not in nodes
    # the gradient of repeat(w, 3) sums the three ticks' gradients
    assert any(n.op == "add_n" and len(n.inputs) == 3 and n.name != "total" for n in nodes.values())


def test_a_job_without_repeat_or_acc_is_left_as_traced() -> None:
    from flowjob_ops.passes import repeat_acc

    @flow.global_function()
    def plain(x: tp.Numpy.Placeholder((3,))) -> tp.Numpy:
        return flow.math.tanh(x) + 1.0

    plain(np.ones(3, np.float32))
    job = plain.plan().job.copy()
    before = list(job.nodes)
    repeat_acc.run(job, None)
    assert job.nodes == before
