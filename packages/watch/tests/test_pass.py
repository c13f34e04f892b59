"""The watch pass and watch_scope on jobs made of core's own ops (no op or typing package needed)."""
import numpy as np
import pytest

import flowjob_core
from flowjob_core import FlowjobError, add_loss, apply, get_variable
from flowjob_watch import watch, watch_diff, watch_scope
from flowjob_watch.sinks import Sink

X = np.array([1.0, -2.0, 3.0], np.float32)


def twice(x, name=None):
    return apply("scalar_mul", [x], {"scalar": 2.0}, name=name)


class Steps(Sink):
    def __init__(self):
        self.events = []

    def consume(self, value, blob_def, *, diff=False):
        self.events.append(("value", blob_def.lbn, diff))

    def end_step(self, job):
        self.events.append(("end", job))


def test_handlers_in_watch_order_one_fetch_per_value(define, kinds):
    order = []

    def job(x: kinds.Array((3,))) -> None:
        y = twice(x, name="y")
        watch(y, lambda v: order.append(("y", v.tolist())))  # no typing package: a plain ndarray
        watch(x, lambda v: order.append(("x", v.tolist())))
        watch(y, lambda v: order.append(("y2", type(v).__name__)))

    fn = define(job)
    fn(X)
    assert order == [("y", [2, -4, 6]), ("x", [1, -2, 3]), ("y2", "ndarray")]
    assert [n.op for n in fn.plan().order].count("fetch") == 2


def test_end_step_once_per_step_after_the_sinks_last_value(define, kinds, session):
    sink = Steps()

    def job(x: kinds.Array((3,))) -> kinds.Later:
        y = twice(x, name="y")
        watch(x, sink)
        watch(y, lambda v: None)
        watch(y, sink=sink)

    fn = define(job)
    fn(X)
    fn(X)
    session.sync()
    step = [("value", fn.plan().job.placeholders[0].lbn, False), ("value", "y/out_0", False), ("end", "job")]
    assert sink.events == step * 2


def test_watch_scope_order_rule(define, kinds):
    values, grads = {}, {}

    def job(x: kinds.Array((3,))) -> None:
        with watch_scope(values, grads):
            w = get_variable("S-weight", shape=(3,), initializer=lambda s, d, r: np.ones(s, d))
            h = apply("add_n", [x, w], name="S_matmul")
            b = get_variable("S-bias", shape=(3,), initializer=lambda s, d, r: np.zeros(s, d))
            out = apply("add_n", [h, b], name="S_bias_add")
        add_loss(twice(out))

    define(job, "train")(X)
    assert list(values) == ["S-bias/out", "S-weight/out", "S_matmul/out_0", "S_bias_add/out_0"]
    assert list(grads) == ["S_matmul/out_0", "S_bias_add/out_0", "S-bias/out", "S-weight/out"]
    assert all(isinstance(e["blob"], np.ndarray) for e in values.values())  # no typing: plain arrays
    np.testing.assert_array_equal(grads["S-weight/out"]["blob"], [2, 2, 2])  # raw: seed ones times 2


def test_watch_diff_without_gradient_fails_when_planned(define, kinds):
    def job(x: kinds.Array((3,))) -> None:
        w = get_variable("w", shape=(3,), initializer=lambda s, d, r: np.ones(s, d))
        unrelated = twice(x)
        watch_diff(unrelated, lambda g: None)
        add_loss(apply("add_n", [x, w]))

    with pytest.raises(FlowjobError, match=r"watch_diff\('ScalarMul_\d+/out_0'\) has no gradient"):
        define(job, "train")(X)


def test_watch_of_a_blob_of_another_job(define, kinds):
    other = {}

    def first(x: kinds.Array((3,))) -> None:
        other["blob"] = x

    def second(x: kinds.Array((3,))) -> None:
        watch(other["blob"], print)

    define(first)(X)
    with pytest.raises(FlowjobError, match=r"belongs to job 'first', not to 'second'"):
        define(second)(X)
    assert flowjob_core.maybe_builder() is None
