"""The session's executor: steps run in call order, results and callbacks delivered in order.

One worker thread, started on the first asynchronous call, takes steps from a bounded queue
(a caller blocks instead of memory growing). A synchronous call made while nothing is in
flight runs in the caller's thread, saving the hand-off. Errors raised by callbacks and
handlers are kept and raised at the session's next synchronous point.
"""
from __future__ import annotations

import queue
import threading
from typing import Any, Callable

Delivery = Callable[[], Any]


class PendingCall:
    """The outcome of one job call: values once the step and its watch handlers have run."""

    __slots__ = ("_event", "_values", "_error", "_callbacks", "_lock", "_executor", "_detached")

    def __init__(self, executor: "Executor") -> None:
        self._event = threading.Event()
        self._values: Any = None
        self._error: BaseException | None = None
        self._callbacks: list[Callable[[Any], None]] = []
        self._lock = threading.Lock()
        self._executor = executor
        self._detached = False

    def detach(self) -> None:
        """Nobody will wait for this call: a failure of its step goes to the next synchronous point."""
        with self._lock:
            self._detached = True
            failed = self._event.is_set() and self._error is not None
        if failed:
            self._executor.report(self._error)

    def done(self) -> bool:
        return self._event.is_set()

    def wait(self) -> Any:
        """Block until the step is done; raise its error, if it failed."""
        self._executor.wait_for(self)
        if self._error is not None:
            raise self._error
        self._executor.raise_pending()  # a synchronous point: errors callbacks left surface here
        return self._values

    def add_done_callback(self, fn: Callable[[Any], None]) -> None:
        """Run ``fn(values)`` once the step is done: on the executor, or at once if it already is."""
        with self._lock:
            if not self._event.is_set():
                self._callbacks.append(fn)
                return
        self._executor.run_callback(fn, self)

    def _resolve(self, values: Any, error: BaseException | None) -> None:
        with self._lock:
            self._values, self._error = values, error
            callbacks, self._callbacks = self._callbacks, []
            self._event.set()
            detached = self._detached
        if error is not None and detached:
            self._executor.report(error)
        for fn in callbacks:
            self._executor.run_callback(fn, self)


class Executor:
    def __init__(self, report_error: Callable[[BaseException], None], raise_pending: Callable[[], None],
                 max_in_flight: int = 8) -> None:
        self._report_error = report_error
        self.raise_pending = raise_pending
        self._queue: queue.Queue = queue.Queue(maxsize=max_in_flight)
        self._cond = threading.Condition()
        self._outstanding = 0
        self._run_lock = threading.RLock()
        self._worker: threading.Thread | None = None
        self._local = threading.local()
        self._closed = False

    # submission -----------------------------------------------------------
    def submit(self, compute: Callable[[], Any], deliver: Callable[[Any], Any], *, wait: bool) -> PendingCall:
        """Schedule a call after every earlier one.

        ``compute()`` runs the step (one at a time, under the run lock); ``deliver(raw)`` then
        runs the watch handlers and returns the call's values, outside the lock so a handler
        may itself call a job.
        """
        pending = PendingCall(self)
        if self._closed:
            raise RuntimeError("the session is closed; flow.clear_default_session() made a new one")
        in_worker = threading.current_thread() is self._worker
        with self._cond:
            inline = in_worker or (wait and self._outstanding == 0)
            self._outstanding += 1
        if inline:
            # a callback calling a job must not wait for the worker that runs it
            self._execute(compute, deliver, pending)
        else:
            self._ensure_worker()
            self._queue.put((compute, deliver, pending))
        return pending

    def _ensure_worker(self) -> None:
        if self._worker is None:
            self._worker = threading.Thread(target=self._loop, name="flowjob-executor", daemon=True)
            self._worker.start()

    def _loop(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            self._execute(*item)

    def _execute(self, compute: Callable[[], Any], deliver: Callable[[Any], Any], pending: PendingCall) -> None:
        depth = getattr(self._local, "depth", 0)
        self._local.depth = depth + 1
        try:
            try:
                with self._run_lock:
                    raw = compute()
                values = deliver(raw)
                error = None
            except BaseException as exc:  # delivered to the caller or kept for the next sync point
                values, error = None, exc
            pending._resolve(values, error)
        finally:
            self._local.depth = depth
            with self._cond:
                self._outstanding -= 1
                self._cond.notify_all()

    def report(self, exc: BaseException) -> None:
        self._report_error(exc)

    def run_callback(self, fn: Callable[[Any], None], pending: PendingCall) -> None:
        if pending._error is not None:
            return  # the step failed: the error was kept for the caller, no value to hand over
        try:
            fn(pending._values)
        except BaseException as exc:
            self._report_error(exc)

    # waiting --------------------------------------------------------------
    def wait_for(self, pending: PendingCall) -> None:
        if threading.current_thread() is self._worker and not pending.done():
            raise RuntimeError("a callback waited for a later call's result on the executor thread")
        pending._event.wait()

    def sync(self) -> None:
        """Wait for every call made so far (a callback's own call excluded) and its callbacks."""
        mine = getattr(self._local, "depth", 0)
        with self._cond:
            self._cond.wait_for(lambda: self._outstanding <= mine)

    @property
    def outstanding(self) -> int:
        return self._outstanding

    def close(self) -> None:
        if self._closed:
            return
        self.sync()
        self._closed = True
        if self._worker is not None:
            self._queue.put(None)
            if threading.current_thread() is not self._worker:
                self._worker.join(timeout=5)
