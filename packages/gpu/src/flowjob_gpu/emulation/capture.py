"""Stream capture and graph replay on the emulated device (``Stream.begin_capture``, ``cupy.cuda.graph.Graph``).

While a stream captures, nothing runs on it, as on a GPU: every device operation issued with it current is
recorded by ``Capture.record`` (the emulated function, its arguments, the arrays it returned), and memory
does not change; arrays it returns hold poison (NaN, all-ones bits, True) until the graph is launched.
``Graph.launch`` replays the operations in order: each recomputes from the current contents of the arrays
it was given at capture and writes into the memory of the arrays it returned then (the graph replays into
the same addresses), so a caller that forgets to launch, or expects an array made before the capture to be
replaced, sees what a GPU would show.

Host transfers and synchronizations during capture (``float(a)``, ``a.get()``, ``cupy.asarray(host)``,
``stream.synchronize()``, data-dependent shapes such as ``nonzero``) raise ``cudaErrorStreamCaptureUnsupported``
and invalidate the capture, whose ``end_capture`` then raises ``cudaErrorStreamCaptureInvalidated``.

The hot path stays out of here: ``cuda.recorder()`` returns ``None`` unless the current stream captures.
This module sits below the stream and array modules (they call it; it imports neither): it knows an emulated
array by its ``_capture_memory()``, the numpy memory behind it, and is handed the streams it needs.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from flowjob_gpu.emulation.runtime_errors import CUDARuntimeError
from flowjob_gpu.emulation.unemulated import UnemulatedModule, complete_class, not_emulated

UNSUPPORTED = "cudaErrorStreamCaptureUnsupported: operation not permitted when stream is capturing"
INVALIDATED = "cudaErrorStreamCaptureInvalidated: operation failed due to a previous error during capture"
ILLEGAL_STATE = "cudaErrorIllegalState: the operation cannot be performed in the present state"

# one recorded operation: the emulated function, its arguments (capture-time objects) and what it returned
Op = tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any], Any]


class Capture:
    """What one stream records between ``begin_capture`` and ``end_capture``."""

    __slots__ = ("stream", "mode", "ops", "error", "running")

    def __init__(self, stream: Any, mode: int) -> None:
        self.stream = stream
        self.mode = mode
        self.ops: list[Op] = []
        self.error: str | None = None  # what invalidated the capture
        self.running = False  # inside a recorded op: the ops it calls are its own, not recorded again

    def refuse(self, what: str) -> None:
        """``what`` (a host transfer or synchronization) is issued on the capturing stream: it invalidates the
        capture and raises, as CUDA's runtime refuses it."""
        if self.error is not None:
            raise CUDARuntimeError(INVALIDATED)
        self.error = what
        raise CUDARuntimeError(f"{UNSUPPORTED} ({what} during stream capture, on flowjob's emulated CuPy)")

    def record(self, op: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Record ``op(*args, **kwargs)`` (an emulated function) and return its result, poisoned.

        numpy runs it now, for the shapes and dtypes of its results, but the memory it was given is put back
        afterwards: on a GPU the kernel only runs when the graph is launched."""
        if self.error is not None:
            raise CUDARuntimeError(INVALIDATED)
        inputs = _arrays((args, kwargs), [])
        saved = [(a, a.copy()) for a in inputs if a.flags.writeable]
        self.running = True
        try:
            with np.errstate(all="ignore"):  # inputs made during the capture hold garbage until the launch
                result = op(*args, **kwargs)
        finally:
            self.running = False
            for memory, before in saved:
                np.copyto(memory, before)
        _poison(result, inputs)
        # the containers as they are now: the launch's arguments are fixed at capture, as a kernel's are
        self.ops.append((op, _frozen(args), _frozen(kwargs), result))
        return result

    def add(self, graph: "Graph") -> None:
        """A graph launched on the capturing stream: its operations join this capture (a child graph)."""
        if self.error is not None:
            raise CUDARuntimeError(INVALIDATED)
        self.ops.append((graph._replay, (), {}, None))


def _memory(value: Any) -> np.ndarray | None:
    """The numpy memory behind an emulated array (or its ``flat`` iterator); None for anything else."""
    memory = getattr(type(value), "_capture_memory", None)
    return None if memory is None else memory(value)


def _arrays(value: Any, found: list[np.ndarray]) -> list[np.ndarray]:
    """The memory of the emulated arrays in ``value`` (arguments: also in tuples, lists and dicts)."""
    kind = type(value)
    memory = _memory(value)
    if memory is not None:
        found.append(memory)
    elif kind is tuple or kind is list:
        for item in value:
            _arrays(item, found)
    elif kind is dict:
        for item in value.values():
            _arrays(item, found)
    return found


def _frozen(value: Any) -> Any:
    """``value`` with its lists, tuples and dicts copied (not the arrays in them)."""
    kind = type(value)
    if kind is tuple or kind is list:
        return kind(map(_frozen, value))
    if kind is dict:
        return {key: _frozen(item) for key, item in value.items()}
    return value


def _poison(result: Any, inputs: list[np.ndarray]) -> None:
    """Fill the new arrays of ``result`` (not views of ``inputs``) with garbage: on a GPU they hold nothing
    yet, their kernel has not run."""
    memory = _memory(result)
    if memory is not None:
        if memory.flags.writeable and memory.size and not any(np.may_share_memory(memory, i) for i in inputs):
            memory[...] = _garbage(memory.dtype)
    elif isinstance(result, (tuple, list)):
        for item in result:
            _poison(item, inputs)


def _garbage(dtype: np.dtype) -> Any:
    if dtype.kind in "fc":
        return np.nan
    if dtype.kind == "b":
        return True
    return np.array(-1).astype(dtype)  # all bits set, as memory nobody wrote may hold


def _store(captured: Any, recomputed: Any) -> None:
    """Write the values of a replayed op's result into the memory of its capture-time result."""
    target = _memory(captured)
    if target is not None:
        source = _memory(recomputed)
        source = np.asarray(recomputed) if source is None else source
        if source is target or not target.flags.writeable or _same_memory(source, target):
            return  # a view of its input, an out= argument, itself, or a read-only broadcast of a constant
        np.copyto(target, source)
    elif isinstance(captured, (tuple, list)):
        for c, r in zip(captured, recomputed):
            _store(c, r)


def _same_memory(a: np.ndarray, b: np.ndarray) -> bool:
    return (a.__array_interface__["data"][0] == b.__array_interface__["data"][0] and a.shape == b.shape
            and a.strides == b.strides)


class Graph:
    """A captured CUDA graph (``cupy.cuda.graph.Graph``), made by ``Stream.end_capture``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # CuPy refuses too (with RuntimeError, which NotImplementedError is)
        raise not_emulated("cupy.cuda.Graph()", "a graph is made by Stream.end_capture(), as in CuPy")

    @classmethod
    def _of(cls, ops: list[Op], null: Any, current: Callable[[], Any]) -> "Graph":
        graph = object.__new__(cls)
        graph._ops, graph._null, graph._current = ops, null, current
        return graph

    def launch(self, stream: Any = None) -> None:
        """Replay the recorded operations on ``stream`` (the current one if None); done when it returns. On
        a capturing stream, the graph's operations join that capture instead."""
        stream = stream if stream is not None else self._current()
        if stream._capture is not None:
            stream._capture.add(self)
            return
        self._replay()

    def upload(self, stream: Any = None) -> None:
        """Nothing to upload: the emulated graph lives in host memory."""
        return None

    def debug_dot_str(self, flags: int = 0) -> str:
        raise not_emulated("cupy.cuda.Graph.debug_dot_str", "it prints the CUDA graph's nodes")

    def _replay(self) -> None:
        # the replayed ops run at once: the null stream, never capturing, is current while they do
        with self._null:
            for op, args, kwargs, result in self._ops:
                _store(result, op(*args, **kwargs))


def graph_module() -> Any:
    """``cupy.cuda.graph``: ``Graph``; its other names refuse, as before the emulation had graphs."""
    module = UnemulatedModule("cupy.cuda.graph")
    module.Graph = Graph
    return module


def begin(stream: Any, mode: int | None) -> None:
    """``stream.begin_capture(mode)``."""
    if stream._null:
        raise RuntimeError("cannot capture on the default (legacy) stream")  # CuPy's words
    if stream._capture is not None:
        raise CUDARuntimeError(f"{ILLEGAL_STATE} (the stream captures already)")
    stream._capture = Capture(stream, 2 if mode is None else int(mode))  # CuPy's default: relaxed


def end(stream: Any, null: Any, current: Callable[[], Any]) -> Graph:
    """``stream.end_capture()``: the graph, or CUDARuntimeError where the capture was invalidated. ``null`` and
    ``current``: the null stream (graphs replay with it current) and the function giving the current one."""
    capture = stream._capture
    if capture is None:
        raise CUDARuntimeError(f"{ILLEGAL_STATE} (the stream is not capturing)")
    stream._capture = None
    if capture.error is not None:
        raise CUDARuntimeError(INVALIDATED)
    return Graph._of(capture.ops, null, current)


# CuPy's Graph also shows its CUDA handles
complete_class(Graph, frozenset({"launch", "upload", "debug_dot_str", "graph", "graphExec"}))
