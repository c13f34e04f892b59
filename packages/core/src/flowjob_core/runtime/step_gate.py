"""The lock between a session's steps, handed over fairly.

Every step's compute runs under one re-entrant lock; ``between_steps()`` takes the same lock so that
what its body reads or writes of the session's state (a checkpoint's copy of every variable, a load)
is of one point between two steps. A plain lock is not fair: a thread running steps back to back
releases it and takes it again before a waiting thread wakes, so a save from another thread would
wait until training stops. Here a thread asking for the time between steps is counted first, and a
step does not start while anyone is counted: the waiter gets the lock when the step in progress ends.

A step's thread that itself holds the lock (a step run inside ``between_steps``) never waits for
others: they wait for the lock it holds.
"""
from __future__ import annotations

import threading
from types import TracebackType


class StepGate:
    """``step()`` around each step's compute, ``between_steps()`` around work that must see no step."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._turns = threading.Condition(threading.Lock())
        self._waiting = 0  # threads waiting in between_steps(): steps not yet started let them go first
        self._held = threading.local()  # how deep this thread is inside between_steps()

    def step(self) -> "threading.RLock":
        """The lock a step's compute runs under (``with gate.step(): ...``), taken after any waiting
        ``between_steps()`` has had its turn. Costs one attribute read when nobody waits."""
        if self._waiting and not getattr(self._held, "depth", 0):
            with self._turns:
                self._turns.wait_for(lambda: not self._waiting)
        return self._lock

    def between_steps(self) -> "_BetweenSteps":
        """Hold every step off while the body runs; waits for at most the step in progress. Re-entrant."""
        return _BetweenSteps(self)

    def _enter(self) -> None:
        held = self._held
        depth = getattr(held, "depth", 0)
        if depth:
            self._lock.acquire()  # re-entered: this thread holds it already
        else:
            with self._turns:
                self._waiting += 1
            try:
                self._lock.acquire()
            finally:
                with self._turns:
                    self._waiting -= 1
                    if not self._waiting:
                        self._turns.notify_all()  # steps held back for this turn
        held.depth = depth + 1

    def _exit(self) -> None:
        self._held.depth -= 1
        self._lock.release()


class _BetweenSteps:
    __slots__ = ("_gate",)

    def __init__(self, gate: StepGate) -> None:
        self._gate = gate

    def __enter__(self) -> None:
        self._gate._enter()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._gate._exit()
