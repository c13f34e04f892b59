# no "from __future__ import annotations": the signatures below use local names
"""The lean call path: a synchronous call run inline makes no Event; waiting for an unfinished call
(from another thread, or on a later call's result) still blocks and wakes; sync still waits."""
import threading
import time

import numpy as np

from flowjob_core import JobFunction, apply
from flowjob_core.runtime.executor import Executor, PendingCall


def _later_job(session, toy):
    def job(x: toy.Array((2,))) -> toy.Later:
        return apply("twice", [x])
    return JobFunction(job, "predict", None, session)


def test_inline_call_makes_no_event():
    ex = Executor(lambda exc: None, lambda: None)
    pending = ex.submit(lambda: 1, lambda raw: raw + 1, wait=True)
    assert pending.done() and pending._event is None
    assert pending.wait() == 2
    ex.close()


def test_waiting_for_an_unfinished_call_blocks_until_it_is_done():
    ex = Executor(lambda exc: None, lambda: None)
    gate = threading.Event()
    pending = ex.submit(lambda: gate.wait(5) and 7, lambda raw: raw, wait=False)  # on the worker thread
    assert isinstance(pending, PendingCall) and not pending.done()
    got = []
    waiter = threading.Thread(target=lambda: got.append(pending.wait()))
    waiter.start()
    time.sleep(0.05)
    assert not got
    gate.set()
    waiter.join(5)
    assert got == [7] and pending.done()
    ex.close()


def test_callbacks_and_listeners_added_before_and_after_completion(session, toy):
    fn = _later_job(session, toy)
    seen = []
    gate = threading.Event()
    blocker = session.executor.submit(lambda: gate.wait(5), lambda raw: raw, wait=False)
    pending = fn(np.ones(2, np.float32))  # queued behind the blocker
    pending.add_done_callback(lambda values: seen.append(("cb", float(values[0][0]))))
    pending.on_done(lambda p: seen.append(("listener", p.done())))
    gate.set()
    session.sync()
    assert blocker.done()
    assert seen == [("cb", 2.0), ("listener", True)]
    pending.add_done_callback(lambda values: seen.append(("late", float(values[0][0]))))
    pending.on_done(lambda p: seen.append(("late listener", p.done())))
    assert seen[-2:] == [("late", 2.0), ("late listener", True)]


def test_sync_from_another_thread_waits_for_queued_calls(session, toy):
    fn = _later_job(session, toy)
    gate = threading.Event()
    session.executor.submit(lambda: gate.wait(5), lambda raw: raw, wait=False)
    results = [fn(np.full(2, i, np.float32)) for i in range(5)]
    finished = []
    syncer = threading.Thread(target=lambda: (session.sync(), finished.append(all(r.done() for r in results))))
    syncer.start()
    time.sleep(0.05)
    assert not finished  # still blocked behind the gate
    gate.set()
    syncer.join(5)
    assert finished == [True]
    assert session.executor.outstanding == 0
