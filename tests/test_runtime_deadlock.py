"""Watch handlers and callbacks that call jobs or sync: legacy could deadlock; these must finish.

Each scenario runs in a thread joined with a timeout, so a regression fails instead of hanging.
"""
import threading

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


P = tp.Numpy.Placeholder((2,))
X = np.array([1, -1], np.float32)


def finishes(scenario, timeout=20):
    box = {}

    def target():
        try:
            box["value"] = scenario()
        except BaseException as exc:  # handed to the test thread
            box["error"] = exc

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(timeout)
    assert not t.is_alive(), "deadlock"
    if "error" in box:
        raise box["error"]
    return box.get("value")


def _sync_job():
    @flow.global_function()
    def sync_job(x: P) -> tp.Numpy:
        return flow.nn.relu(x)
    return sync_job


def test_callback_job_with_watch_handlers():
    seen = []

    @flow.global_function()
    def job(x: P) -> tp.Callback[tp.Numpy]:
        flow.watch(x, lambda y: seen.append("handler"))
        return x

    def scenario():
        for _ in range(20):
            job(X)(lambda y: seen.append("callback"))
        flow.sync_default_session()

    finishes(scenario)
    assert seen == ["handler", "callback"] * 20


@pytest.mark.parametrize("outer_returns", ["sync", "callback", "none"])
def test_handler_that_calls_a_sync_job(outer_returns):
    sync_job = _sync_job()
    inner = []

    def handler(y: tp.Numpy):
        inner.append(sync_job(y).tolist())

    ann = {"sync": tp.Numpy, "callback": tp.Callback[tp.Numpy], "none": None}[outer_returns]

    def body(x: P):
        flow.watch(x, handler)
        return None if ann is None else x
    body.__annotations__["return"] = ann
    outer = flow.global_function()(body)

    def scenario():
        for _ in range(10):
            result = outer(X)
            if outer_returns == "callback":
                result(lambda y: None)
        flow.sync_default_session()

    finishes(scenario)
    assert inner == [[1, 0]] * 10


def test_callback_that_calls_a_sync_job():
    sync_job = _sync_job()
    got = []

    @flow.global_function()
    def job(x: P) -> tp.Callback[tp.Numpy]:
        return x

    def scenario():
        for _ in range(10):
            job(X)(lambda y: got.append(sync_job(y).tolist()))
        flow.sync_default_session()

    finishes(scenario)
    assert got == [[1, 0]] * 10


def test_handler_and_callback_that_sync_the_session():
    seen = []

    @flow.global_function()
    def job(x: P) -> tp.Callback[tp.Numpy]:
        flow.watch(x, lambda y: (flow.sync_default_session(), seen.append("handler")))
        return x

    def scenario():
        for _ in range(10):
            job(X)(lambda y: (flow.sync_default_session(), seen.append("callback")))
        flow.sync_default_session()

    finishes(scenario)
    assert seen == ["handler", "callback"] * 10


def test_callback_that_calls_the_same_callback_job():
    got = []

    @flow.global_function()
    def job(x: P) -> tp.Callback[tp.Numpy]:
        return x

    def chain(y, depth=0):
        got.append(depth)
        if depth < 5:
            job(y)(lambda z: chain(z, depth + 1))

    def scenario():
        job(X)(chain)
        flow.sync_default_session()

    finishes(scenario)
    assert got == [0, 1, 2, 3, 4, 5]


def test_callback_waiting_for_a_later_result_fails_instead_of_hanging():
    gate = threading.Event()
    later = {}

    @flow.global_function()
    def blocker(x: P) -> None:
        flow.watch(x, lambda y: gate.wait(10))

    @flow.global_function()
    def gated(x: P) -> tp.Callback[tp.Numpy]:
        return x

    @flow.global_function()
    def job(x: P):
        return x

    def scenario():
        blocker(X)  # holds the executor so that the later call is still queued when the callback runs
        gated(X)(lambda y: later["future"].get())
        later["future"] = job(X)
        gate.set()
        flow.sync_default_session()

    with pytest.raises(RuntimeError, match="waited for the result of a later call"):
        finishes(scenario)
