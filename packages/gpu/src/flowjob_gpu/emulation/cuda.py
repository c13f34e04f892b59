"""The emulated ``cupy.cuda``: one device (id 0), streams and events that are always done (every
emulated kernel runs to its end before it returns), memory pools that hold nothing (numpy allocates).

Stream capture and graphs are emulated (``capture.py``): ``Stream.begin_capture``/``end_capture`` record the
device work issued on the stream without running it, and ``cupy.cuda.graph.Graph.launch`` replays it into the
same memory; host transfers and synchronizations on a capturing stream raise ``CUDARuntimeError`` and
invalidate the capture, as CUDA's runtime does. What else needs a real device (raw memory, compilers,
handles, the rest of ``cupy.cuda.graph``) is present and refuses."""
from __future__ import annotations

import __future__
import contextlib
import threading
import time
import warnings
from typing import Any, Iterator

from flowjob_gpu.emulation import capture, host_traffic
from flowjob_gpu.emulation.modules import EmulatedModule
from flowjob_gpu.emulation.runtime_errors import CUDARuntimeError
from flowjob_gpu.emulation.names import snapshot
from flowjob_gpu.emulation.unemulated import Unemulated, UnemulatedModule, complete_class, not_emulated

DEVICE_COUNT = 1




def _check_device(device_id: int) -> None:
    if not 0 <= device_id < DEVICE_COUNT:
        raise CUDARuntimeError("cudaErrorInvalidDevice: invalid device ordinal (flowjob's emulated CuPy has "
                               f"{DEVICE_COUNT} device)")


class Device:
    """A CUDA device: the emulation has one, id 0."""

    def __init__(self, device: Any = None) -> None:
        self._id = 0 if device is None else int(device)

    @property
    def id(self) -> int:
        return self._id

    def use(self) -> None:
        _check_device(self._id)

    def synchronize(self) -> None:
        _check_device(self._id)
        refuse_during_capture("Device.synchronize()")

    def __enter__(self) -> "Device":
        self.use()
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, Device) and other.id == self._id

    def __hash__(self) -> int:
        return hash(self._id)

    def __repr__(self) -> str:
        return f"<CUDA Device {self._id}>"


CAPTURED_EVENT = "cudaErrorCapturedEvent: operation not permitted on an event last recorded in a capturing stream"


class Event:
    """A CUDA event; recording it notes the host clock (the work before it is already done). One recorded
    on a capturing stream is part of the graph: waiting on it, or timing it, raises as in CUDA."""

    def __init__(self, block: bool = False, disable_timing: bool = False, interprocess: bool = False) -> None:
        self._time: float | None = None
        self._timing = not disable_timing
        self._captured = False

    @property
    def done(self) -> bool:
        self._check_not_captured()
        return True

    def record(self, stream: Any = None) -> None:
        stream = stream if stream is not None else get_current_stream()
        self._captured = getattr(stream, "_capture", None) is not None
        self._time = time.perf_counter()

    def synchronize(self) -> None:
        self._check_not_captured()

    def _check_not_captured(self) -> None:
        if self._captured:
            raise CUDARuntimeError(CAPTURED_EVENT)


class _Current(threading.local):
    """The stream each thread runs on (a stack, for nested ``with stream:``)."""

    # None where a thread never used a stream: read from the class, so that the check every emulated
    # operation makes (``recorder``) raises and catches no AttributeError
    stack: "list[Stream] | None" = None


_current = _Current()


class Stream:
    """A CUDA stream; work on it is done when it returns, so ``synchronize`` has nothing to wait for, except
    while it captures (``begin_capture``): then its work is recorded, and synchronizing raises."""

    null: "Stream"

    def __init__(self, null: bool = False, non_blocking: bool = False, ptds: bool = False,
                 priority: int | None = None) -> None:
        self._null = null
        self._non_blocking = non_blocking
        self._ptds = ptds
        self._priority = priority or 0
        self.device_id = 0
        self._capture: Any = None  # a capture.Capture between begin_capture and end_capture
        # the stream's handle as a library takes it (cuDNN's set_stream): 0 for the null stream, else a number unique
        # to the stream while it lives (an instance attribute in CuPy too)
        self.ptr = 0 if null else id(self)

    @property
    def ptds(self) -> bool:
        return self._ptds

    @property
    def priority(self) -> int:
        return self._priority

    @property
    def is_non_blocking(self) -> bool:
        return self._non_blocking

    @property
    def done(self) -> bool:
        refuse_during_capture("Stream.done", self)
        return True

    def synchronize(self) -> None:
        refuse_during_capture("Stream.synchronize()", self)

    def record(self, event: Event | None = None) -> Event:
        event = event if event is not None else Event()
        event.record(self)
        return event

    def wait_event(self, event: Event) -> None:
        return None

    def begin_capture(self, mode: int | None = None) -> None:
        """Record the device work issued on this stream, from now until ``end_capture``, instead of running it
        (``mode``: CUDA's capture mode; the emulation keeps the relaxed mode's rules, CuPy's default)."""
        capture.begin(self, mode)

    def end_capture(self) -> Any:
        """The ``cupy.cuda.graph.Graph`` of the work recorded since ``begin_capture``."""
        return capture.end(self, Stream.null, get_current_stream)

    def is_capturing(self) -> bool:
        if self._capture is None:
            return False
        if self._capture.error is not None:  # CuPy's answer for cudaStreamCaptureStatusInvalidated
            raise RuntimeError("the stream capture has been invalidated")
        return True

    def use(self) -> "Stream":
        stack = _stack()
        if stack:
            stack[-1] = self
        else:
            stack.append(self)
        return self

    def __enter__(self) -> "Stream":
        _stack().append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _stack().pop()

    def __eq__(self, other: Any) -> bool:
        return self is other or (isinstance(other, Stream) and self._null and other._null)

    def __hash__(self) -> int:
        return 0 if self._null else id(self)

    def __repr__(self) -> str:
        return "<Stream null>" if self._null else f"<Stream {id(self):#x}>"


Stream.null = Stream(null=True)


def _stack() -> list[Stream]:
    stack = _current.stack
    if stack is None:
        stack = _current.stack = []
    return stack


def get_current_stream(device_id: int = -1) -> Stream:
    """The stream this thread runs on (``Stream.null`` unless one is in use)."""
    stack = _stack()
    return stack[-1] if stack else Stream.null


def recorder() -> Any:
    """The capture that records the device work issued now (a ``capture.Capture``): the current stream's while
    it captures, else None. This is every emulated operation's check, so it is kept cheap; inside an operation
    being recorded it is None too: the operations it calls are its own parts, not recorded again."""
    stack = _current.stack
    if stack:
        capture = stack[-1]._capture
        if capture is not None and not capture.running:
            return capture
    return None


def refuse_during_capture(what: str, stream: Stream | None = None) -> None:
    """Raise (and invalidate the capture) where ``what``, a host transfer or synchronization, is issued on a
    capturing stream (``stream``, or the current one)."""
    capture = recorder() if stream is None else stream._capture
    if capture is not None and not capture.running:
        capture.refuse(what)
    if capture is None:  # inside a recorded op it is that op's part: a launch replays it, and counts it then
        host_traffic.note(what)


def get_elapsed_time(start_event: Event, end_event: Event) -> float:
    """Milliseconds between two recorded events."""
    start_event._check_not_captured()
    end_event._check_not_captured()
    if start_event._time is None or end_event._time is None:
        raise CUDARuntimeError("cudaErrorInvalidResourceHandle: an event was not recorded")
    return (end_event._time - start_event._time) * 1000.0


class MemoryPointer:
    """A device pointer: only its address (``ptr``, numpy's buffer address here) and device are emulated."""

    def __init__(self, mem: Any, offset: int) -> None:
        raise not_emulated("cupy.cuda.MemoryPointer(...)", "it works on device memory (a real GPU has it)")

    @classmethod
    def _at(cls, address: int) -> "MemoryPointer":
        pointer = object.__new__(cls)
        pointer._ptr = address
        return pointer

    @property
    def ptr(self) -> int:
        return self._ptr

    @property
    def device_id(self) -> int:
        return 0

    @property
    def device(self) -> Device:
        return Device(0)


class MemoryPool:
    """The device memory pool: the emulation's arrays are numpy's, so the pool holds no bytes."""

    def __init__(self, allocator: Any = None) -> None:
        self._limit = 0

    def used_bytes(self) -> int:
        return 0

    def free_bytes(self) -> int:
        return 0

    def total_bytes(self) -> int:
        return 0

    def n_free_blocks(self) -> int:
        return 0

    def free_all_blocks(self, stream: Any = None) -> None:
        return None

    def free_all_free(self) -> None:
        return None

    def malloc(self, size: int) -> MemoryPointer:
        # readable (``using_allocator(pool.malloc)`` works: the emulation only records the allocator), refusing
        raise not_emulated("cupy.cuda.MemoryPool.malloc", "it allocates device memory (a real GPU has it)")

    def get_limit(self) -> int:
        return self._limit

    def set_limit(self, size: int | None = None, fraction: float | None = None) -> None:
        if size is not None and fraction is not None:
            raise ValueError("size and fraction cannot be specified at one time")
        self._limit = int(size or 0)


class PinnedMemoryPool:
    """The pinned host memory pool: it holds no bytes in the emulation."""

    def __init__(self, allocator: Any = None) -> None:
        return None

    def n_free_blocks(self) -> int:
        return 0

    def free_all_blocks(self) -> None:
        return None


DEFAULT_MEMORY_POOL = MemoryPool()
DEFAULT_PINNED_MEMORY_POOL = PinnedMemoryPool()
_allocators: dict[str, Any] = {"device": DEFAULT_MEMORY_POOL, "pinned": DEFAULT_PINNED_MEMORY_POOL}


def set_allocator(allocator: Any = None) -> None:
    """Recorded only: numpy allocates the emulation's memory."""
    _allocators["device"] = allocator


def get_allocator() -> Any:
    return _allocators["device"]


def set_pinned_memory_allocator(allocator: Any = None) -> None:
    _allocators["pinned"] = allocator


@contextlib.contextmanager
def using_allocator(allocator: Any = None) -> Iterator[None]:
    before = _allocators["device"]
    _allocators["device"] = allocator
    try:
        yield
    finally:
        _allocators["device"] = before


for _cls in (Device, Event, Stream, MemoryPool, PinnedMemoryPool, MemoryPointer):
    complete_class(_cls, snapshot().classes[f"cupy.cuda.{_cls.__name__}"])


def _device_count() -> int:
    return DEVICE_COUNT


def _get_device() -> int:
    return 0


def _set_device(device: int) -> None:
    _check_device(device)


def _device_synchronize() -> None:
    refuse_during_capture("cupy.cuda.runtime.deviceSynchronize()")


def is_available() -> bool:
    return True


def build_runtime() -> EmulatedModule:
    """``cupy.cuda.runtime``: the device count and selection; the rest (raw CUDA calls) refuses."""
    names = snapshot().modules["cupy.cuda.runtime"]
    values: dict[str, Any] = {name: Unemulated(f"cupy.cuda.runtime.{name}") for name in names}
    values.update(getDeviceCount=_device_count, getDevice=_get_device, setDevice=_set_device,
                  deviceSynchronize=_device_synchronize, is_hip=False, CUDARuntimeError=CUDARuntimeError,
                  # CUDA's enums for stream capture (Stream.begin_capture's mode)
                  streamCaptureModeGlobal=0, streamCaptureModeThreadLocal=1, streamCaptureModeRelaxed=2,
                  streamCaptureStatusNone=0, streamCaptureStatusActive=1, streamCaptureStatusInvalidated=2)
    return EmulatedModule("cupy.cuda.runtime", values)


# cupy.cuda's own submodules beside runtime and graph: raw CUDA (compilers, handles), refusing
_SUBMODULES = ("common", "compiler", "cub", "device", "driver", "function", "memory", "memory_hook",
               "memory_hooks", "nvrtc", "nvtx", "pinned_memory", "profiler", "stream", "texture", "thrust")


def build() -> EmulatedModule:
    """The emulated ``cupy.cuda``."""
    names = snapshot().modules["cupy.cuda"]
    values: dict[str, Any] = {name: Unemulated(f"cupy.cuda.{name}") for name in names}
    values.update({name: UnemulatedModule(f"cupy.cuda.{name}") for name in _SUBMODULES})
    values.update(
        Device=Device, Event=Event, Stream=Stream, MemoryPool=MemoryPool, PinnedMemoryPool=PinnedMemoryPool,
        MemoryPointer=MemoryPointer, get_current_stream=get_current_stream, get_elapsed_time=get_elapsed_time,
        get_device_id=_get_device, is_available=is_available, set_allocator=set_allocator,
        get_allocator=get_allocator, set_pinned_memory_allocator=set_pinned_memory_allocator,
        using_allocator=using_allocator, runtime=build_runtime(), graph=capture.graph_module(), Graph=capture.Graph,
        # CuPy's module leaks these imports into its names; they are the standard library's
        annotations=__future__.annotations, contextlib=contextlib, warnings=warnings)
    return EmulatedModule("cupy.cuda", values)
