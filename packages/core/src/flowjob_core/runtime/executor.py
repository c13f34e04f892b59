"""The session's executor: steps run in call order, results and callbacks delivered in order.

One worker thread, started on the first asynchronous call, takes steps from a bounded queue
(a caller blocks instead of memory growing). A synchronous call made while nothing is in
flight runs in the caller's thread, saving the hand-off. Errors raised by callbacks and
handlers, and failures of steps nobody waits for, are kept and raised at the session's
next synchronous point (a waited-for result, ``sync``, close). A synchronous call that finds
such an error kept when its turn comes raises it instead of running: its own work is neither
done on a state the failure left nor lost silently. Each kept error carries a note naming the
call it came from (``call #3 of global function 'train'``).

Signals (Ctrl-C): a call is counted as outstanding in the same step, held from stop signals, as it
is queued or started, so a ``KeyboardInterrupt`` raised while the caller waits for room in the queue
leaves no call counted that never runs (``sync`` and close would wait for it for ever). A step run in
the main thread holds the stop signals until its compute ends (``held_signals``): its updates are
all written or none. Steps take turns with ``between_steps`` fairly (``step_gate``).
"""
from __future__ import annotations

import collections
import threading
from typing import Any, Callable, ContextManager

from flowjob_core.runtime.held_signals import HeldSignals, NothingHeld
from flowjob_core.runtime.step_gate import StepGate

_NOTHING_HELD = NothingHeld()


class PendingCall:
    """The outcome of one job call: values once the step and its watch handlers have run.

    Cheap for the common case, a synchronous call run inline: the event a waiter blocks on is
    made only when someone waits for a call that is not done yet.
    """

    __slots__ = ("_done", "_event", "_values", "_error", "_callbacks", "_listeners", "_lock", "_executor", "label",
                 "_sync")

    def __init__(self, executor: "Executor", label: str = "a call", sync: bool = False) -> None:
        self.label = label  # "call #3 of global function 'train'": what error notes name
        self._sync = sync
        self._done = False
        self._event: threading.Event | None = None
        self._values: Any = None
        self._error: BaseException | None = None
        self._callbacks: list[Callable[[Any], None]] | None = None
        self._listeners: list[Callable[["PendingCall"], None]] | None = None
        self._lock = executor._pending_lock  # one lock per executor: the critical sections are a few lines
        self._executor = executor

    def done(self) -> bool:
        return self._done

    def _wait_done(self) -> None:
        if self._done:
            return
        with self._lock:
            if self._done:
                return
            event = self._event
            if event is None:
                event = self._event = threading.Event()
        event.wait()

    def wait(self) -> Any:
        """Block until the step is done; raise its error, if it failed (a synchronous point)."""
        self._executor.wait_for(self)
        if self._error is not None:
            self._executor.claim(self)  # delivered here: not raised again at the next sync point
            raise self._error
        self._executor.raise_pending()  # a synchronous point: errors callbacks left surface here
        return self._values

    def add_done_callback(self, fn: Callable[[Any], None]) -> None:
        """Run ``fn(values)`` once the step succeeded: on the executor, or at once if it already did.

        An error ``fn`` raises is kept for the next synchronous point.
        """
        if not self._done:
            with self._lock:
                if not self._done:
                    if self._callbacks is None:
                        self._callbacks = []
                    self._callbacks.append(fn)
                    return
        self._executor.run_callback(fn, self)

    def on_done(self, fn: Callable[["PendingCall"], None]) -> None:
        """Call ``fn(self)`` once the call is done, failed or not (bridges to other event loops).

        ``fn`` runs on the thread that finishes the call and must not block or raise.
        """
        if not self._done:
            with self._lock:
                if not self._done:
                    if self._listeners is None:
                        self._listeners = []
                    self._listeners.append(fn)
                    return
        fn(self)

    def _resolve(self, values: Any, error: BaseException | None) -> None:
        if error is not None:
            self._executor.note_failure(self)  # before anyone can wait: a waiter claims it
        with self._lock:
            self._values, self._error = values, error
            callbacks, self._callbacks = self._callbacks, None
            listeners, self._listeners = self._listeners, None
            self._done = True
            event = self._event
        if event is not None:
            event.set()
        if callbacks:
            for fn in callbacks:
                self._executor.run_callback(fn, self)
        if listeners:
            for listener in listeners:
                try:
                    listener(self)
                except BaseException as exc:
                    self._executor.report(exc)


class Executor:
    def __init__(self, report_error: Callable[[BaseException], None], raise_pending: Callable[[], None],
                 max_in_flight: int = 8) -> None:
        self._report_error = report_error
        self._raise_pending = raise_pending
        self._max_queued = max_in_flight
        self._queued: collections.deque = collections.deque()  # (compute, deliver, pending), None: stop
        self._cond_lock = threading.Lock()  # taken directly (a C call) where nothing waits or notifies
        self._cond = threading.Condition(self._cond_lock)
        self._room = threading.Condition(self._cond_lock)  # the queue has room
        self._ready = threading.Condition(self._cond_lock)  # the queue has an item
        self._outstanding = 0
        self._gate = StepGate()
        self._worker: threading.Thread | None = None
        self._local = threading.local()
        self._closed = False
        self._failed: list[PendingCall] = []  # failed steps nobody has waited for yet, in call order
        self._failed_lock = threading.Lock()
        self._pending_lock = threading.Lock()
        self._sync_waiters = 0  # threads in sync(): only then does finishing a call notify
        self._calls = 0  # calls submitted, for the labels error notes name

    # submission -----------------------------------------------------------
    def submit(self, compute: Callable[[], Any], deliver: Callable[[Any], Any], *, wait: bool,
               what: str = "a job") -> PendingCall:
        """Schedule a call after every earlier one.

        ``compute()`` runs the step (one at a time, under the run lock); ``deliver(raw)`` then
        runs the watch handlers and returns the call's values, outside the lock so a handler
        may itself call a job. ``what`` names the job in error notes (``global function 'f'``).
        """
        if self._closed:
            raise RuntimeError("the session is closed; flow.clear_default_session() made a new one")
        worker = self._worker
        in_worker = worker is not None and threading.current_thread() is worker
        pending = PendingCall(self, what, wait)
        held = HeldSignals()
        with self._cond:
            if self._sync_waiters and not in_worker and not getattr(self._local, "depth", 0):
                # another thread's sync waits for the calls made so far: a new call from outside any call waits
                # for it to end, else a thread calling jobs back to back could keep the sync waiting forever
                # (a call's own callbacks and handlers go on: the sync may be waiting for that very call)
                self._cond.wait_for(lambda: not self._sync_waiters)
            inline = in_worker or (wait and self._outstanding == 0)
            if not inline:
                while len(self._queued) >= self._max_queued:  # a caller blocks instead of memory growing
                    self._room.wait()
            # nothing is counted before here, so an interrupt while waiting leaves no trace; from here the
            # count and the hand-over (the queue, or the inline step's end) are one step to a signal
            held.hold()
            self._outstanding += 1
            self._calls += 1
            pending.label = f"call #{self._calls} of {what}"
            if not inline:
                if self._worker is None:
                    self._worker = threading.Thread(target=self._loop, name="flowjob-executor", daemon=True)
                    self._worker.start()
                self._queued.append((compute, deliver, pending))
                self._ready.notify()
        if inline:
            # a callback calling a job must not wait for the worker that runs it
            self._execute(compute, deliver, pending, held)
        else:
            held.release()  # the call is queued: a signal noted meanwhile is raised here
        return pending

    def _loop(self) -> None:
        while True:
            with self._cond_lock:
                while not self._queued:
                    self._ready.wait()
                item = self._queued.popleft()
                self._room.notify()
            if item is None:
                return
            self._execute(*item)

    def _execute(self, compute: Callable[[], Any], deliver: Callable[[Any], Any], pending: PendingCall,
                 held: HeldSignals | NothingHeld = _NOTHING_HELD) -> None:
        """Run one counted call; ``held``: the stop signals held since it was counted (inline in the main
        thread), released once its compute ends, so a signal noted meanwhile is raised after the updates."""
        local = self._local
        depth = getattr(local, "depth", 0)
        local.depth = depth + 1
        outer, local.current = getattr(local, "current", None), pending
        try:
            try:
                try:
                    if pending._sync:
                        self._raise_kept_before(pending)
                    with self._gate.step():
                        raw = compute()
                finally:
                    held.release()
                values = deliver(raw)
                error = None
            except BaseException as exc:  # delivered to the caller or kept for the next sync point
                values, error = None, exc
                if not pending._sync and not getattr(exc, "_flowjob_named", False):  # nobody waits: say whose
                    _note(exc, f"flowjob: {pending.label} failed")
            pending._resolve(values, error)
        finally:
            local.depth = depth
            local.current = outer
            with self._cond_lock:
                self._outstanding -= 1
                if self._sync_waiters:
                    self._cond.notify_all()

    def between_steps(self) -> ContextManager[Any]:
        """Hold every step off while the body runs (the lock each step's compute takes), so what the
        body reads or writes of the session's state is of one point between two steps, whichever
        thread runs them. Waits for at most the step in progress, however fast another thread calls
        steps (``step_gate``); in the main thread the body is held from stop signals, so a load's
        assignments are all made or none. Re-entrant: a step's own thread may hold it."""
        return _BetweenSteps(self._gate)

    # errors ---------------------------------------------------------------
    def report(self, exc: BaseException) -> None:
        """Keep ``exc`` (a callback's or handler's) for the next synchronous point, naming the call it ran for."""
        current = getattr(self._local, "current", None)
        if current is not None and not getattr(exc, "_flowjob_named", False):
            _note(exc, f"flowjob: raised by a callback or watch handler of {current.label}")
        self._report_error(exc)

    def _raise_kept_before(self, pending: PendingCall) -> None:
        """A synchronous call's turn: an error kept from an earlier call is raised in its place."""
        try:
            self.raise_pending()
        except BaseException as exc:
            _note(exc, f"flowjob: raised at {pending.label}, which therefore did not run")
            raise

    def note_failure(self, pending: PendingCall) -> None:
        with self._failed_lock:
            self._failed.append(pending)

    def claim(self, pending: PendingCall) -> None:
        """The caller received this call's failure itself."""
        with self._failed_lock:
            if pending in self._failed:
                self._failed.remove(pending)

    def _flush_failures(self) -> None:
        if not self._failed:
            return
        with self._failed_lock:
            failed, self._failed = self._failed, []
        for pending in failed:
            self._report_error(pending._error)  # type: ignore[arg-type]

    def raise_pending(self) -> None:
        """A synchronous point: raise the first kept error (unclaimed step failures included)."""
        self._flush_failures()
        self._raise_pending()

    def run_callback(self, fn: Callable[[Any], None], pending: PendingCall) -> None:
        if pending._error is not None:
            return  # the step failed: the error was kept for the caller, no value to hand over
        try:
            fn(pending._values)
        except BaseException as exc:
            if not getattr(exc, "_flowjob_named", False):
                _note(exc, f"flowjob: raised by a callback of {pending.label}")
            self._report_error(exc)

    # waiting --------------------------------------------------------------
    def wait_for(self, pending: PendingCall) -> None:
        if threading.current_thread() is self._worker and not pending.done():
            raise RuntimeError("a callback or watch handler waited for the result of a later call; that call "
                               "runs after the callback on the same thread, so the wait could never end")
        pending._wait_done()

    def sync(self) -> None:
        """Wait for every call made so far (a callback's own call excluded) and its callbacks.

        On the executor thread every earlier call is done already and later ones cannot start
        until the current callback returns, so there is nothing to wait for (legacy deadlocked).
        """
        if threading.current_thread() is not self._worker:
            mine = getattr(self._local, "depth", 0)
            with self._cond:
                self._sync_waiters += 1
                try:
                    self._cond.wait_for(lambda: self._outstanding <= mine)
                finally:
                    self._sync_waiters -= 1
                    if not self._sync_waiters:
                        self._cond.notify_all()  # calls held back while it waited
        self._flush_failures()

    @property
    def outstanding(self) -> int:
        return self._outstanding

    def close(self) -> None:
        if self._closed:
            return
        self.sync()
        self._closed = True
        if self._worker is not None:
            with self._cond_lock:
                self._queued.append(None)
                self._ready.notify()
            if threading.current_thread() is not self._worker:
                self._worker.join(timeout=5)


class _BetweenSteps:
    """The gate's time between steps, and in it the stop signals held (taken after the wait for the gate,
    so a signal still stops a thread waiting for a long step)."""

    __slots__ = ("_between", "_held")

    def __init__(self, gate: StepGate) -> None:
        self._between = gate.between_steps()
        self._held = HeldSignals()

    def __enter__(self) -> None:
        self._between.__enter__()
        try:
            self._held.hold()
        except BaseException:  # a signal pending from before the hold
            self._between.__exit__(None, None, None)
            raise

    def __exit__(self, *exc_info: Any) -> None:
        try:
            self._held.release()
        finally:
            self._between.__exit__(None, None, None)


def _note(exc: BaseException, text: str) -> None:
    """Name the call an error came from, once (an error passed on through several calls keeps its first note)."""
    try:
        exc.add_note(text)
        exc._flowjob_named = True  # type: ignore[attr-defined]
    except (AttributeError, TypeError):  # an exception type that refuses attributes keeps its note only
        pass
