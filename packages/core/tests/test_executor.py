# no "from __future__ import annotations": the signatures below use local names
"""The executor: call order, bounded queue, the inline path, errors kept for the next sync point."""
import threading
import time

import numpy as np
import pytest

from flowjob_core import JobFunction, apply
from flowjob_core.runtime.executor import Executor


def _later_job(session, toy):
    def job(x: toy.Array((2,))) -> toy.Later:
        return apply("twice", [x])
    return JobFunction(job, "predict", None, session)


def test_callbacks_arrive_in_call_order(session, toy):
    fn = _later_job(session, toy)
    seen = []
    for i in range(1000):
        fn(np.full(2, i, np.float32)).add_done_callback(lambda values: seen.append(int(values[0][0])))
    session.sync()
    assert seen == [2 * i for i in range(1000)]


def test_inputs_are_copied_at_call_time(session, toy):
    fn = _later_job(session, toy)
    data = np.ones(2, np.float32)
    got = []
    pending = fn(data)
    data[:] = 100  # the caller reuses its array at once
    pending.add_done_callback(lambda values: got.append(values[0].copy()))
    session.sync()
    np.testing.assert_array_equal(got[0], [2, 2])


def test_callback_error_is_raised_at_the_next_sync_point(session, toy):
    fn = _later_job(session, toy)

    def bad(values):
        raise KeyError("from a callback")
    fn(np.ones(2, np.float32)).add_done_callback(bad)
    with pytest.raises(KeyError, match="from a callback") as info:
        session.sync()
    assert any(frame.name == "bad" for frame in __import__("traceback").extract_tb(info.value.__traceback__))
    session.sync()  # reported once, then the session is clean
    done = []
    fn(np.ones(2, np.float32)).add_done_callback(lambda v: done.append(True))
    session.sync()
    assert done == [True]


def test_step_error_of_a_call_nobody_waits_for_surfaces_at_sync(session, toy):
    def job(x: toy.Array((2,))) -> toy.Later:
        return apply("boom", [x])
    JobFunction(job, "predict", None, session)(np.ones(2, np.float32))
    with pytest.raises(Exception, match="boom"):
        session.sync()


def test_sync_call_waits_for_earlier_async_ones(session, toy):
    slow = []

    def sync_job(x: toy.Array((2,))) -> toy.Sync:
        return apply("twice", [x])
    sync_fn = JobFunction(sync_job, "predict", None, session)
    async_fn = _later_job(session, toy)
    for _ in range(5):
        async_fn(np.ones(2, np.float32)).add_done_callback(lambda v: (time.sleep(0.01), slow.append(1)))
    sync_fn(np.ones(2, np.float32))
    assert len(slow) == 5


def test_queue_is_bounded():
    errors = []
    ex = Executor(errors.append, lambda: None, max_in_flight=2)
    gate = threading.Event()
    for _ in range(3):  # one running (blocked) and two queued fill it
        ex.submit(lambda: gate.wait(5), lambda raw: raw, wait=False)
    t = threading.Thread(target=lambda: ex.submit(lambda: None, lambda raw: raw, wait=False))
    t.start()
    t.join(0.2)
    assert t.is_alive()  # the fourth caller blocks instead of memory growing
    gate.set()
    t.join(5)
    ex.sync()
    assert not t.is_alive() and not errors
    ex.close()


def test_a_sync_is_not_kept_waiting_by_calls_made_after_it():
    # a thread calling jobs back to back kept a checkpoint's sync waiting forever: a call made while
    # another thread syncs now waits for that sync instead of joining what it waits for
    ex = Executor(lambda e: None, lambda: None)
    gate = threading.Event()
    events: list[str] = []
    ex.submit(lambda: gate.wait(5), lambda raw: raw, wait=False)  # runs on the worker until the gate opens

    def sync() -> None:
        ex.sync()
        events.append("sync returned")

    syncer = threading.Thread(target=sync)
    syncer.start()
    deadline = time.monotonic() + 5
    while not ex._sync_waiters and time.monotonic() < deadline:
        time.sleep(0.001)
    assert ex._sync_waiters == 1
    later = threading.Thread(target=lambda: ex.submit(lambda: events.append("later call ran"), lambda raw: raw,
                                                      wait=True).wait())
    later.start()
    later.join(0.2)
    assert later.is_alive() and not events  # held back while the sync waits
    gate.set()
    syncer.join(5)
    later.join(5)
    assert events == ["sync returned", "later call ran"]
    ex.close()


def test_sync_call_with_nothing_in_flight_runs_in_the_caller():
    ex = Executor(lambda e: None, lambda: None)
    where = []
    ex.submit(lambda: where.append(threading.current_thread()), lambda raw: raw, wait=True).wait()
    assert where == [threading.current_thread()] and ex._worker is None
    ex.close()


def test_a_callback_may_call_a_sync_job_without_deadlock(session, toy):
    def sync_job(x: toy.Array((2,))) -> toy.Sync:
        return apply("twice", [x])
    sync_fn = JobFunction(sync_job, "predict", None, session)
    async_fn = _later_job(session, toy)
    results = []
    async_fn(np.ones(2, np.float32)).add_done_callback(
        lambda v: results.append(sync_fn(np.full(2, 3, np.float32))))
    t = threading.Thread(target=session.sync)
    t.start()
    t.join(10)
    assert not t.is_alive(), "deadlock"
    np.testing.assert_array_equal(results[0], [6, 6])
