"""Stop signals and the executor: held until a step's compute ends (``held_signals``), never leaving a call
counted that was not queued, and the lock between steps handed over fairly (``step_gate``)."""
import signal
import threading
import time

import pytest

from flowjob_core.runtime import held_signals
from flowjob_core.runtime.executor import Executor
from flowjob_core.runtime.held_signals import HeldSignals
from flowjob_core.runtime.step_gate import StepGate


def _executor(max_in_flight: int = 8) -> Executor:
    kept: list[BaseException] = []

    def raise_kept() -> None:
        if kept:
            raise kept.pop(0)

    return Executor(kept.append, raise_kept, max_in_flight)


def test_a_signal_while_held_is_raised_at_the_release():
    reached = []
    with pytest.raises(KeyboardInterrupt):
        with HeldSignals():
            signal.raise_signal(signal.SIGINT)
            reached.append("after the signal")
    assert reached == ["after the signal"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_hold_inside_a_hold_leaves_the_delivery_to_the_outer_one():
    order = []
    with pytest.raises(KeyboardInterrupt):
        with HeldSignals():
            with HeldSignals():
                signal.raise_signal(signal.SIGINT)
            order.append("inner released")
    assert order == ["inner released"]


def test_ignored_and_default_dispositions_are_left_alone():
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        with HeldSignals():
            assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
            assert signal.getsignal(signal.SIGINT) is not signal.default_int_handler  # held
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_a_handler_raising_as_the_hold_begins_leaves_nothing_replaced(monkeypatch):
    real = held_signals._c_signal

    class PendingTerm:  # installing a handler first runs the pending ones: SIGTERM's raises then
        getsignal = staticmethod(real.getsignal)

        @staticmethod
        def signal(signum, handler):
            if signum == signal.SIGTERM and isinstance(getattr(handler, "__self__", None), HeldSignals):
                raise SystemExit("SIGTERM's own handler ran")
            return real.signal(signum, handler)

    previous = signal.signal(signal.SIGTERM, lambda signum, frame: None)  # a Python handler: held too
    monkeypatch.setattr(held_signals, "_c_signal", PendingTerm)
    try:
        with pytest.raises(SystemExit):
            HeldSignals().hold()
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # SIGINT's hold was undone
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_a_synchronous_step_in_the_main_thread_ends_before_the_interrupt():
    executor = _executor()
    written = []

    def compute():
        written.append(1)
        signal.raise_signal(signal.SIGINT)  # Ctrl-C between two writes of the step
        written.append(2)
        return "values"

    with pytest.raises(KeyboardInterrupt):
        executor.submit(compute, lambda raw: raw, wait=True).wait()
    assert written == [1, 2]
    assert executor.outstanding == 0
    executor.close()


def test_an_interrupt_while_waiting_for_room_in_the_queue_leaves_nothing_counted():
    executor = _executor(max_in_flight=1)
    release = threading.Event()
    ran = []

    def slow():
        release.wait(30)
        ran.append(1)

    main = threading.main_thread().ident
    timer = threading.Timer(0.5, lambda: signal.pthread_kill(main, signal.SIGINT))
    timer.start()
    launched = 0
    with pytest.raises(KeyboardInterrupt):
        for _ in range(100):  # one runs, one waits in the queue, the third launch blocks until the interrupt
            executor.submit(slow, lambda raw: raw, wait=False)
            launched += 1
    timer.join()
    assert launched == 2
    release.set()
    synced = threading.Thread(target=executor.sync)
    synced.start()
    synced.join(timeout=30)
    assert not synced.is_alive(), "sync waits for a call that was never queued"
    assert ran == [1, 1] and executor.outstanding == 0
    executor.close()


def test_a_thread_between_steps_goes_before_the_next_step_of_a_thread_running_them():
    gate = StepGate()
    steps = []
    in_step = threading.Event()
    go_on = threading.Event()
    stop = threading.Event()

    def trainer():
        while not stop.is_set():
            with gate.step():
                steps.append(len(steps))
                if len(steps) == 1:
                    in_step.set()
                    go_on.wait(10)  # the first step lasts until the other thread asked for its turn

    thread = threading.Thread(target=trainer)
    thread.start()
    in_step.wait(10)
    asked = threading.Thread(target=lambda: (time.sleep(0.2), go_on.set()))
    asked.start()
    with gate.between_steps():  # asks while the first step runs
        seen = len(steps)
    stop.set()
    thread.join(10)
    asked.join()
    assert seen == 1  # the step in progress, no later one


def test_a_step_inside_between_steps_of_its_own_thread_does_not_wait_for_others():
    gate = StepGate()

    def between_steps():
        with gate.between_steps():
            pass

    waiting = threading.Thread(target=between_steps)
    with gate.between_steps():
        waiting.start()
        while not gate._waiting:
            time.sleep(0.01)
        with gate.step():  # this thread holds the lock the other waits for: it goes on
            pass
    waiting.join(10)
    assert not waiting.is_alive()
