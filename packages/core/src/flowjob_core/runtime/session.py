"""The session: plugin manager, registries, variables, jobs and the executor.

There is no session at import; the default one is made on first use and replaced by
``flow.clear_default_session()``. Work still pending is finished when the interpreter exits.
"""
from __future__ import annotations

import atexit
import logging
import threading
import warnings
import weakref
from typing import TYPE_CHECKING, Any, ContextManager

import pluggy

from flowjob_core.config.function_config import SessionConfig
from flowjob_core import switches
from flowjob_core.runtime import exit_status
from flowjob_core.errors import ConfigError, FlowjobError
from flowjob_core.runtime.executor import Executor
from flowjob_core.plugins.host import gather_registries, make_plugin_manager
from flowjob_core.plugins.registry import Backend
from flowjob_core.runtime.variables import VariableStore

if TYPE_CHECKING:
    from flowjob_core.api.function import JobFunction

logger = logging.getLogger("flowjob.session")

THREAD_POOL_OPTION = "flow.config.compute_thread_pool_size"
"""The legacy option giving the host threads of a step, applied when the session chooses its backend."""


class Session:
    def __init__(self, pm: pluggy.PluginManager | None = None, config: SessionConfig | None = None) -> None:
        self.pm = pm if pm is not None else make_plugin_manager()
        self.registries = gather_registries(self.pm)
        self.config = config or SessionConfig()
        self.functions: dict[str, "JobFunction"] = {}
        self._errors: list[BaseException] = []
        self._errors_lock = threading.Lock()
        self.executor = Executor(self.report_error, self.raise_pending, self.config.max_in_flight)
        self._backend: Backend | None = None
        self._variables: VariableStore | None = None
        self._warned_tags: set[str] = set()  # placements warned about once: they run on self.backend
        self.closed = False
        exit_status.arm()  # before any session's exit handler, so that it runs after them
        _live_sessions.add(self)

    # devices --------------------------------------------------------------
    def requested_device(self) -> str:
        """The device tag this session's jobs run on: ``FLOWJOB_DEVICE``, else from flow.config."""
        forced = switches.current().device
        if forced:
            if not self.registries.backends.accepts(forced):
                raise ConfigError(f"FLOWJOB_DEVICE={self.registries.backends.unknown_tag_message(forced)}")
            return forced
        # legacy flow.config.gpu_device_num: GPUs where a gpu backend is registered, else the host
        if self.config.gpu_device_num == 0:
            return "cpu"
        return "gpu" if self.registries.backends.get("gpu") is not None else "cpu"

    @property
    def backend(self) -> Backend:
        """The backend every job of this session runs on, chosen on first use."""
        if self._backend is None:
            tag = self.requested_device()
            backend = self.pm.hook.flowjob_select_backend(device_tag=tag, backends=self.registries.backends)
            if backend is None:
                raise FlowjobError(f"no backend can run device {tag!r}; installed: "
                                   f"{[b.tag for b in self.registries.backends]}")
            pool_size = self.config.options.get(THREAD_POOL_OPTION)
            if pool_size and backend.lanes is not None:
                backend.lanes.configure(pool_size)
            self._backend = backend
        return self._backend

    @property
    def backend_chosen(self) -> bool:
        """Whether the session has chosen its backend (its first job was planned or a variable made)."""
        return self._backend is not None

    def note_device_request(self, device_tag: str) -> None:
        """Warn once per tag when a program places ops on a device other than the session's backend.

        A session runs every job on one backend, so such ops run there. Placements on a backend of
        host arrays (numpy's ``cpu``) are quiet, as legacy ``cpu`` scopes inside GPU jobs were; a
        GPU asked for where none is available warns as legacy CPU builds did.
        """
        backend = self.backend
        placed = self.registries.backends.get(device_tag)
        if device_tag == backend.tag or device_tag in self._warned_tags or (placed is not None and placed.host_arrays):
            return
        self._warned_tags.add(device_tag)
        if placed is None:
            warnings.warn(f"flowjob: no {device_tag.upper()} backend is available (flowjob-gpu with a CUDA device); "
                          f"{device_tag.upper()} placements run on the {backend.tag.upper()}", RuntimeWarning,
                          stacklevel=3)
        else:
            warnings.warn(f"flowjob: this session runs every job on its {backend.tag!r} backend, so ops placed on "
                          f"{device_tag!r} run there too (FLOWJOB_DEVICE={device_tag} runs the session on "
                          f"{device_tag!r})", RuntimeWarning, stacklevel=3)

    @property
    def variables(self) -> VariableStore:
        if self._variables is None:
            self._variables = VariableStore(self.backend, self.config.seed)
        return self._variables

    # jobs -----------------------------------------------------------------
    def register_function(self, fn: "JobFunction") -> None:
        self.functions[fn.name] = fn  # same name replaces the earlier one, as legacy did

    def trace_all(self) -> None:
        """Trace every defined job so that all variables exist (CheckPoint.init/load need them)."""
        for fn in list(self.functions.values()):
            fn.ensure_traced()

    # errors ---------------------------------------------------------------
    def report_error(self, exc: BaseException) -> None:
        with self._errors_lock:
            self._errors.append(exc)

    def raise_pending(self) -> None:
        """Raise the first error a callback or handler left, with its own traceback."""
        if not self._errors:
            return
        with self._errors_lock:
            if not self._errors:
                return
            first, rest = self._errors[0], self._errors[1:]
            self._errors = []
        if rest:
            first.add_note(f"flowjob: {len(rest)} more callback error(s) followed: {rest!r}")
        raise first

    def between_steps(self) -> ContextManager[Any]:
        """A context in which no step of this session runs: reading or assigning every variable inside
        it sees or makes the state of one point between two steps (checkpoints use it)."""
        return self.executor.between_steps()

    # lifecycle ------------------------------------------------------------
    def sync(self) -> None:
        self.executor.sync()
        if self._backend is not None:
            self._backend.synchronize()
        self.raise_pending()

    def close(self) -> None:
        if self.closed:
            return
        try:
            self.sync()
        finally:
            self.closed = True
            self.executor.close()
            _live_sessions.discard(self)


_live_sessions: "weakref.WeakSet[Session]" = weakref.WeakSet()
_default: Session | None = None
_default_lock = threading.Lock()
_atexit_registered = False


def get_default_session() -> Session:
    global _default, _atexit_registered
    with _default_lock:
        if _default is None or _default.closed:
            _default = Session()
            if not _atexit_registered:
                atexit.register(finish_all_sessions)
                _atexit_registered = True
        return _default


def clear_default_session() -> None:
    """Finish pending work and drop the default session: jobs and variable values are gone."""
    global _default
    with _default_lock:
        old, _default = _default, None
    if old is not None:
        old.close()


def sync_default_session() -> None:
    """Wait for every launched job and its callbacks; raise an error a callback left."""
    session = _default
    if session is not None:
        session.sync()


def finish_all_sessions() -> None:
    """Finish every live session's launched steps and close it (run at exit). A plugin whose own exit handler
    would stop what those steps read (flowjob-ofrecord's reader threads) calls it first: exit handlers run
    last-registered first, so theirs would otherwise run before this one."""
    for session in list(_live_sessions):
        try:
            session.close()
        except BaseException:  # the process is ending: report what a callback raised, never lose it
            logger.exception("an error was raised by a job callback or handler")
            exit_status.fail()  # and the exit status says so (flowjob_core/runtime/exit_status.py)
