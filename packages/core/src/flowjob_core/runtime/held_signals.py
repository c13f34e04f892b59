"""Stop signals held off while a step writes the session's state, so a step is all or nothing to them.

A signal's Python handler runs in the main thread between two bytecodes: Ctrl-C during a step run in
that thread raised ``KeyboardInterrupt`` between two variables' updates, leaving some variables of the
next step and the rest of this one (and a checkpoint saved in the ``except KeyboardInterrupt`` block
kept that mix). While a :class:`HeldSignals` is held, the Python handlers of SIGINT, SIGTERM and SIGHUP
are replaced by one that notes the signal; when it is released the handlers are put back and each
noted signal is handed to its handler, so ``KeyboardInterrupt`` is raised at the end of the step.

A second signal of the same kind while held is handed over at once (a step that never ends, say one
waiting for data that never comes, can still be stopped); its exception notes that the step was
stopped in the middle. Only the main thread runs signal handlers (and may install them): elsewhere,
and for signals without a Python handler (ignored, or the default that ends the process), holding
does nothing. A hold inside a hold does nothing either: the outer one delivers.
"""
from __future__ import annotations

import signal
import threading
from types import FrameType, TracebackType
from typing import Any, Callable

try:  # the C functions: ``signal.getsignal``/``signal.signal`` convert to and from enums, 5-10 µs a call
    import _signal as _c_signal  # type: ignore[import-not-found]  # (no stub: CPython's C half of signal)
except ImportError:  # another interpreter
    _c_signal = signal

_STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))

Handler = Callable[[int, "FrameType | None"], Any]


class HeldSignals:
    """``hold()`` ... ``release()`` (or ``with``): the stop signals arriving in between are delivered at
    ``release()``. ``release()`` is idempotent; it raises what a delivered handler raises."""

    __slots__ = ("_saved", "_handlers", "_noted")

    def __init__(self) -> None:
        self._saved: list[int] = []  # signals whose handler this hold replaced, not yet put back
        self._handlers: dict[int, Handler] = {}
        self._noted: list[tuple[int, FrameType | None]] = []

    def hold(self) -> "HeldSignals":
        if threading.current_thread() is not threading.main_thread():
            return self
        try:
            for signum in _STOP_SIGNALS:
                handler = _c_signal.getsignal(signum)
                if not callable(handler) or isinstance(getattr(handler, "__self__", None), HeldSignals):
                    continue  # no Python handler, or held already by an outer hold
                self._handlers[signum] = handler
                _c_signal.signal(signum, self._note)  # (a signal already pending goes to ``handler`` first)
                self._saved.append(signum)
        except BaseException:  # a pending signal's handler raised: put back what was replaced already
            self.release()
            raise
        return self

    def _note(self, signum: int, frame: FrameType | None) -> None:
        if self._saved and any(noted == signum for noted, _ in self._noted):  # asked twice: stop now
            self._restore()
            self._noted = []
            try:
                self._handlers[signum](signum, frame)
            except BaseException as exc:
                exc.add_note(f"flowjob: a second {signal.Signals(signum).name} stopped a step in the middle; "
                             f"its updates may be written in part (one signal waits for the step's end)")
                raise
            return
        self._noted.append((signum, frame))

    def _restore(self) -> None:
        # one at a time: putting a handler back first runs what is pending, which may be noted here still
        while self._saved:
            signum = self._saved.pop()
            _c_signal.signal(signum, self._handlers[signum])

    def release(self) -> None:
        """Put the handlers back, then hand each noted signal to its handler, in arrival order."""
        if not self._saved:
            return
        self._restore()
        noted, self._noted = self._noted, []
        for signum, frame in noted:  # the first that raises ends the delivery
            self._handlers[signum](signum, frame)

    def __enter__(self) -> "HeldSignals":
        return self.hold()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()


class NothingHeld:
    """What a step off the main thread gets: ``release()`` does nothing."""

    __slots__ = ()

    def release(self) -> None:
        pass
