"""Runtime order: steps in call order, bounded in-flight work, what waits for what."""
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core import get_default_session


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


P = tp.Numpy.Placeholder((1,))


def _one(i):
    return np.full(1, i, np.float32)


def test_callbacks_of_1000_async_calls_arrive_in_call_order():
    @flow.global_function()
    def job(x: P) -> tp.Callback[tp.Numpy]:
        return flow.nn.relu(x)

    seen = []
    for i in range(1000):
        job(_one(i))(lambda y: seen.append(int(y[0])))
    flow.sync_default_session()
    assert seen == list(range(1000))


def test_steps_of_different_functions_run_in_call_order():
    order = []

    def note(tag):
        return lambda y: order.append((tag, int(y[0])))

    @flow.global_function()
    def a(x: P) -> tp.Callback[tp.Numpy]:
        return x

    @flow.global_function()
    def b(x: P) -> None:
        flow.watch(x, note("b"))

    @flow.global_function()
    def c(x: P):
        return x

    for i in range(50):
        a(_one(i))(note("a"))
        b(_one(i))
        c(_one(i)).async_get(lambda blob, i=i: order.append(("c", int(blob.numpy()[0]))))
    flow.sync_default_session()
    assert order == [(tag, i) for i in range(50) for tag in "abc"]


def test_a_sync_return_comes_after_that_calls_watch_handlers_and_earlier_calls():
    seen = []

    def slow(y: tp.Numpy):
        time.sleep(0.002)
        seen.append(int(y[0]))

    @flow.global_function()
    def later(x: P) -> None:
        flow.watch(x, slow)

    @flow.global_function()
    def now(x: P) -> tp.Numpy:
        flow.watch(x, slow)
        return x

    for i in range(5):
        later(_one(i))
    assert now(_one(99))[0] == 99
    assert seen == [0, 1, 2, 3, 4, 99]


def test_callback_return_comes_back_at_once():
    gate = threading.Event()

    def blocked(y: tp.Numpy):
        gate.wait(10)

    @flow.global_function()
    def job(x: P) -> tp.Callback[tp.Numpy]:
        flow.watch(x, blocked)
        return x

    got = []
    t0 = time.perf_counter()
    job(_one(1))(got.append)
    assert time.perf_counter() - t0 < 5 and got == []
    gate.set()
    flow.sync_default_session()
    assert len(got) == 1


def test_in_flight_calls_are_bounded_and_the_caller_blocks():
    session = get_default_session()
    limit = session.config.max_in_flight
    gate = threading.Event()

    @flow.global_function()
    def job(x: P) -> None:
        flow.watch(x, lambda y: gate.wait(10))

    calls = []

    def caller():
        for i in range(limit + 5):
            job(_one(i))
            calls.append(i)

    t = threading.Thread(target=caller)
    t.start()
    t.join(0.5)
    assert t.is_alive(), "the caller should block once the queue is full"
    assert limit <= len(calls) <= limit + 2  # the queue plus the step under way
    gate.set()
    t.join(10)
    assert not t.is_alive() and len(calls) == limit + 5
    flow.sync_default_session()


def test_sync_default_session_waits_for_every_callback():
    @flow.global_function()
    def job(x: P) -> tp.Callback[tp.Numpy]:
        return x

    done = []
    for i in range(20):
        job(_one(i))(lambda y: (time.sleep(0.001), done.append(1)))
    flow.sync_default_session()
    assert len(done) == 20


def _run(program):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(program)], capture_output=True, text=True,
                          timeout=120)


def test_interpreter_exit_waits_for_pending_callbacks_and_handlers():
    result = _run("""
        import time
        import numpy as np
        import oneflow as flow
        import oneflow.typing as tp

        def slow(y: tp.Numpy):
            time.sleep(0.01)
            print("handler", int(y[0]), flush=True)

        @flow.global_function()
        def job(x: tp.Numpy.Placeholder((1,))) -> tp.Callback[tp.Numpy]:
            flow.watch(x, slow)
            return x

        for i in range(5):
            job(np.full(1, i, np.float32))(lambda y: print("callback", int(y[0]), flush=True))
        print("main done", flush=True)
    """)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[-10:] == [line for i in range(5) for line in (f"handler {i}", f"callback {i}")]
    assert "main done" in lines
