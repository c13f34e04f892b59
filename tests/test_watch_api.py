"""flow.watch and flow.watch_diff: handlers, conversions, variables before the update, raw gradients, errors."""
import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core import FlowjobError
from flowjob_typing import LocalBlob


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


X = np.array([[-1.0, 2.0, -3.0], [4.0, -5.0, 6.0]], np.float32)
P = tp.Numpy.Placeholder((2, 3))


def _sgd(lr=0.1, momentum=0.0):
    return flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [lr]), momentum=momentum)


def test_watch_of_the_input_equals_the_data():
    got = []

    @flow.global_function()
    def job(x: P) -> None:
        flow.watch(x, lambda v: got.append(v.numpy()))

    job(X)
    flow.sync_default_session()
    np.testing.assert_array_equal(got[0], X)


def test_handler_annotation_chooses_the_value():
    got = {}

    def as_numpy(v: tp.Numpy):
        got["numpy"] = v

    def as_list(v: tp.ListNumpy):
        got["list"] = v

    def as_list_list(v: tp.ListListNumpy):
        got["listlist"] = v

    def unannotated(v):
        got["local"] = v

    @flow.global_function()
    def job(x: P) -> tp.Numpy:
        y = flow.nn.relu(x)
        for handler in (as_numpy, as_list, as_list_list, unannotated):
            flow.watch(y, handler)
        return y

    job(X)  # a sync return: every handler has run
    relu = np.maximum(X, 0)
    assert isinstance(got["numpy"], np.ndarray)
    np.testing.assert_array_equal(got["numpy"], relu)
    np.testing.assert_array_equal(got["list"][0], relu)
    np.testing.assert_array_equal(got["listlist"][0][0], relu)
    assert isinstance(got["local"], LocalBlob)
    np.testing.assert_array_equal(got["local"].ndarray(), relu)
    assert got["local"].blob_def.lbn.endswith("/out_0")


def test_string_annotations_are_resolved():
    got = []
    namespace = {"tp": tp, "got": got}
    exec("def handler(v: 'tp.Numpy'):\n    got.append(type(v))", namespace)

    @flow.global_function()
    def job(x: P) -> tp.Numpy:
        flow.watch(x, namespace["handler"])
        return x

    job(X)
    assert got == [np.ndarray]


def test_prompt_and_default_printing(capsys):
    @flow.global_function()
    def job(x: P) -> tp.Numpy:
        flow.watch(x, "x is:")
        flow.watch(flow.nn.relu(x))
        return x

    job(X)
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "x is:"
    assert out[1].startswith("[[-1.  2. -3.]")
    assert out[3].startswith("[[0. 2. 0.]")


def test_each_step_gets_its_own_copy():
    got = []

    @flow.global_function()
    def job(x: P) -> None:
        flow.watch(flow.nn.relu(x), got.append)

    job(X)
    job(-X)
    flow.sync_default_session()
    np.testing.assert_array_equal(got[0].numpy(), np.maximum(X, 0))  # not overwritten by step 2
    np.testing.assert_array_equal(got[1].numpy(), np.maximum(-X, 0))


def test_handlers_fire_in_the_order_of_the_watch_calls():
    order = []

    @flow.global_function()
    def job(x: P) -> tp.Numpy:
        y = flow.nn.relu(x)
        flow.watch(y, lambda v: order.append("y"))
        flow.watch(x, lambda v: order.append("x"))
        flow.watch(y, lambda v: order.append("y again"))
        return y

    job(X)
    assert order == ["y", "x", "y again"]


def test_watching_costs_nothing_unused_and_one_copy_per_value_used():
    @flow.global_function()
    def plain(x: P) -> tp.Numpy:
        return flow.nn.relu(x)

    @flow.global_function()
    def watched(x: P) -> tp.Numpy:
        y = flow.nn.relu(x)
        flow.watch(y, lambda v: None)
        flow.watch(y, lambda v: None)
        return y

    plain(X)
    watched(X)
    plain_plan, watched_plan = plain.plan(), watched.plan()
    assert plain_plan.job.side_outputs == [] and plain_plan.side_consumers == []
    assert [n.op for n in plain_plan.order].count("fetch") == 0
    assert [n.op for n in watched_plan.order].count("fetch") == 1  # one copy, two handlers
    assert len(watched_plan.side_consumers) == 2
    assert watched_plan.kernel_count == plain_plan.kernel_count + 1


def test_watch_of_a_variable_shows_the_value_used_by_that_step():
    seen = []

    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((4,))) -> tp.Numpy:
        w = flow.get_variable("w", shape=(4,), initializer=lambda s, d, r: np.ones(s, d))
        flow.watch(w, lambda v: seen.append(v.numpy().copy()))
        loss = x * w
        _sgd().minimize(loss)
        return w

    x = np.arange(4, dtype=np.float32)
    first = train(x)
    second = train(x)
    np.testing.assert_array_equal(seen[0], np.ones(4))  # before the first update
    np.testing.assert_array_equal(seen[1], second)
    np.testing.assert_allclose(seen[1], 1 - 0.1 * x / 4)  # SGD on the mean over the 4 loss elements
    np.testing.assert_array_equal(first, seen[0])


def test_watch_diff_shows_the_raw_gradient():
    seen = {}

    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((4,))) -> tp.Numpy:
        w = flow.get_variable("w", shape=(4,), initializer=lambda s, d, r: np.ones(s, d))
        loss = x * w
        flow.watch_diff(w, lambda g: seen.__setitem__("w", g.numpy()))
        flow.watch_diff(loss, lambda g: seen.__setitem__("loss", g.numpy()))
        _sgd().minimize(loss)
        return loss

    x = np.arange(4, dtype=np.float32)
    train(x)
    np.testing.assert_array_equal(seen["loss"], np.ones(4))  # the loss seed is ones
    np.testing.assert_array_equal(seen["w"], x)  # before the 1/4 scaling the optimizer uses


def test_watch_diff_of_a_minimized_variable_is_ones():
    seen = []

    @flow.global_function(type="train")
    def train() -> None:
        w = flow.get_variable("x", shape=(10,), initializer=lambda s, d, r: np.zeros(s, d))
        flow.watch_diff(w, lambda g: seen.append(g.numpy()))
        _sgd().minimize(w)

    train()
    flow.sync_default_session()
    np.testing.assert_array_equal(seen[0], np.ones(10))


def test_watch_diff_off_the_loss_path_is_a_clear_error():
    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((4,))) -> tp.Numpy:
        w = flow.get_variable("w", shape=(4,), initializer=lambda s, d, r: np.ones(s, d))
        side = flow.nn.relu(x)
        flow.watch_diff(side, lambda g: None)
        loss = x * w
        _sgd().minimize(loss)
        return loss

    with pytest.raises(FlowjobError, match=r"watch_diff\('Relu_\d+/out_0'\) has no gradient"):
        train(np.ones(4, np.float32))


def test_watch_diff_in_a_predict_job_is_a_clear_error():
    @flow.global_function()
    def job(x: P) -> tp.Numpy:
        flow.watch_diff(x, lambda g: None)
        return x

    with pytest.raises(FlowjobError, match=r"watch_diff needs a train job"):
        job(X)


def test_handler_must_take_one_parameter():
    @flow.global_function()
    def job(x: P) -> tp.Numpy:
        flow.watch(x, lambda a, b: None)
        return x

    with pytest.raises(FlowjobError, match=r"flow.watch\('Input_\d+/out'\): the handler '<lambda>' must take "
                                           r"exactly 1 parameter"):
        job(X)


def test_unsupported_handler_annotation():
    def handler(v: int):
        pass

    @flow.global_function()
    def job(x: P) -> tp.Numpy:
        flow.watch(x, handler)
        return x

    with pytest.raises(FlowjobError, match=r"handler 'handler'.*annotation <class 'int'> is not supported"):
        job(X)


def test_watch_needs_a_blob_of_the_job_being_traced():
    with pytest.raises(FlowjobError, match=r"only valid inside a @flow.global_function body"):
        flow.watch(X)

    @flow.global_function()
    def job(x: P) -> tp.Numpy:
        flow.watch(np.zeros(3), print)
        return x

    with pytest.raises(FlowjobError, match=r"expected a blob of job 'job', got ndarray"):
        job(X)


def test_bad_handler_type():
    @flow.global_function()
    def job(x: P) -> tp.Numpy:
        flow.watch(x, 42)
        return x

    with pytest.raises(FlowjobError, match=r"handler_or_prompt must be a callable, a string or None, got 42"):
        job(X)


def test_watched_dense_values_agree_with_numpy():
    got = {}

    @flow.global_function()
    def job(x: P) -> tp.Numpy:
        y = flow.layers.dense(x, 4, kernel_initializer=flow.random_uniform_initializer(),
                              bias_initializer=flow.random_uniform_initializer(), name="d")
        flow.watch(y, lambda v: got.__setitem__("y", v))
        return flow.nn.relu(y)

    @flow.global_function()
    def params() -> tp.Bundle[tp.Numpy]:  # the same variables, shared by name
        return [flow.get_variable("d-weight", shape=(4, 3)), flow.get_variable("d-bias", shape=(4,))]

    out = job(X)
    weight, bias = params()
    np.testing.assert_allclose(got["y"], X @ weight.T + bias, rtol=1e-6)
    np.testing.assert_array_equal(out, np.maximum(got["y"], 0))
