"""A test double of the CUDA runtime flowjob_mpi.nccl calls: CuPy's few names over numpy, and a
``cupy.cuda.nccl`` whose communicator resolves the buffer addresses it is given (host memory here)
and sums or broadcasts them with MPI. Streams and events do nothing but log what they were asked,
so a test can check the order: scale on the compute stream, record, the NCCL stream waits, reduce,
record, the compute stream waits.

``install(device_count)`` makes the next world setup use it; ``LOG`` holds the calls.

The communicator has the calls flowjob_mpi.nccl_boxing makes too: ``allGather``, ``reduceScatter``, ``broadcast``,
``allReduce`` with ``NCCL_MAX``, and ``send``/``recv``, which it pairs at ``groupEnd`` (non-blocking MPI, posted
together, as NCCL runs a group's calls as one). ``install_emulated(device_count)`` puts it under flowjob-gpu's
emulated CuPy: jobs run on the emulated device, whose arrays' ``data.ptr`` is the numpy memory the communicator
resolves; the NCCL stream and the events are the emulation's, logging, and a stream that waits for an event
recorded in a capturing stream joins that capture, as in CUDA: a collective issued on it is then recorded into
the capture (logged ``captured``) and runs when the graph is launched.
"""
from __future__ import annotations

import ctypes
import itertools
import os
import threading
from types import SimpleNamespace
from typing import Any

import numpy as np

LOG: list[list[Any]] = []
STREAMS: dict[int, Any] = {}  # the double's streams by handle: a collective's stream argument is one
_ids = itertools.count(1)
DTYPES = {"NCCL_FLOAT16": np.float16, "NCCL_FLOAT32": np.float32, "NCCL_FLOAT64": np.float64, "NCCL_UINT8": np.uint8}


class Stream:
    def __init__(self, non_blocking: bool = False, ptr: int | None = None) -> None:
        self.ptr = next(_ids) if ptr is None else ptr
        STREAMS[self.ptr] = self
        LOG.append(["stream", self.ptr, non_blocking])

    def wait_event(self, event: "Event") -> None:
        LOG.append(["wait", self.ptr, event.id])


COMPUTE = Stream(ptr=0)  # CuPy's default (null) stream has address 0


class Event:
    def __init__(self, disable_timing: bool = False) -> None:
        self.id = next(_ids)
        self.done = True  # the double runs everything at once

    def record(self, stream: Stream) -> None:
        LOG.append(["record", self.id, stream.ptr])


class Device:
    def __init__(self, index: int) -> None:
        self.index = index

    def use(self) -> None:
        LOG.append(["use", self.index, threading.current_thread().name])

    def __enter__(self) -> "Device":
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


def _array(pointer: int, count: int, datatype: str) -> np.ndarray:
    dtype = np.dtype(DTYPES[datatype])
    raw = (ctypes.c_uint8 * (count * dtype.itemsize)).from_address(pointer)
    return np.frombuffer(raw, dtype=dtype)  # writable: ctypes memory


def _capture_of(stream: Any) -> Any:
    """The emulated stream capture ``stream`` takes part in (its own, or one it joined by waiting for an event
    recorded in it, as CUDA's fork and join), else None."""
    own = getattr(stream, "_capture", None)
    if own is not None:
        return own
    joined = getattr(stream, "joined", None)
    return joined if joined is not None and joined.stream._capture is joined else None


def _issue(name: str, stream: int, action: Any) -> None:
    """Run ``action`` (the collective, reduced with MPI) now, or, where its stream takes part in an emulated stream
    capture, record it into that capture: it runs when the graph is launched, in the graph's order."""
    if _group is not None:
        _group.append((name, stream, action))
        return
    capture = _capture_of(STREAMS.get(stream))
    if capture is None:
        action()
        return
    if capture.error is not None:
        from flowjob_gpu.emulation.capture import INVALIDATED
        from flowjob_gpu.emulation.runtime_errors import CUDARuntimeError
        raise CUDARuntimeError(INVALIDATED)
    capture.ops.append((action, (), {}, None))  # the emulation's op record: replayed by Graph.launch
    LOG.append(["captured", name, stream])


_group: list[tuple[str, int, Any]] | None = None  # the calls made between groupStart and groupEnd


def group_start() -> None:
    global _group
    LOG.append(["groupStart"])
    if _group is None:
        _group = []


def group_end() -> None:
    """The group's calls as one: broadcasts in order, then every receive and send posted at once (NCCL pairs a
    group's sends and receives; MPI's blocking calls would wait for each other)."""
    global _group
    LOG.append(["groupEnd"])
    calls, _group = _group or [], None
    if not calls:
        return

    def run() -> None:
        requests = []
        for _name, _stream, action in calls:
            result = action()
            if result is not None:
                requests.append(result)
        if requests:
            from mpi4py import MPI
            MPI.Request.Waitall(requests)

    _issue("group", calls[0][1], run)


class Communicator:
    def __init__(self, ndev: int, commId: tuple, rank: int) -> None:  # noqa: N803 (CuPy's argument names)
        from mpi4py import MPI

        self.mpi = MPI
        self.comm = MPI.COMM_WORLD
        assert isinstance(commId, tuple), "CuPy's NcclCommunicator takes the id as a tuple"
        ids = self.comm.allgather(commId)  # NCCL would hang on different ids: the double refuses them
        assert len(set(ids)) == 1 and len(commId) == 128, "ranks joined with different NCCL unique ids"
        assert ndev == self.comm.Get_size() and rank == self.comm.Get_rank()
        LOG.append(["communicator", ndev, rank, list(commId[:4])])

    def allReduce(self, sendbuf: int, recvbuf: int, count: int, datatype: str, op: str, stream: int) -> None:  # noqa: N802
        assert op in ("NCCL_SUM", "NCCL_MAX")

        def run() -> None:
            received = _array(recvbuf, count, datatype)
            sent = self.mpi.IN_PLACE if sendbuf == recvbuf else _array(sendbuf, count, datatype).copy()
            self.comm.Allreduce(sent, received, op=self.mpi.SUM if op == "NCCL_SUM" else self.mpi.MAX)

        LOG.append(["allReduce", count, datatype, stream, op])
        _issue("allReduce", stream, run)

    def bcast(self, buff: int, count: int, datatype: str, root: int, stream: int) -> None:
        def run() -> None:
            self.comm.Bcast(_array(buff, count, datatype), root=root)

        LOG.append(["bcast", count, datatype, root, stream])
        _issue("bcast", stream, run)

    def broadcast(self, sendbuf: int, recvbuf: int, count: int, datatype: str, root: int, stream: int) -> None:
        def run() -> None:
            received = _array(recvbuf, count, datatype)
            if self.comm.Get_rank() == root:  # NCCL reads sendbuf on the root only
                received[...] = _array(sendbuf, count, datatype)
            self.comm.Bcast(received, root=root)

        LOG.append(["broadcast", count, datatype, root, stream])
        _issue("broadcast", stream, run)

    def allGather(self, sendbuf: int, recvbuf: int, count: int, datatype: str, stream: int) -> None:  # noqa: N802
        def run() -> None:
            self.comm.Allgather(_array(sendbuf, count, datatype).copy(),
                                _array(recvbuf, count * self.comm.Get_size(), datatype))

        LOG.append(["allGather", count, datatype, stream])
        _issue("allGather", stream, run)

    def reduceScatter(self, sendbuf: int, recvbuf: int, recvcount: int, datatype: str, op: str,  # noqa: N802
                      stream: int) -> None:
        assert op == "NCCL_SUM"

        def run() -> None:
            sent = _array(sendbuf, recvcount * self.comm.Get_size(), datatype).copy()
            self.comm.Reduce_scatter_block(sent, _array(recvbuf, recvcount, datatype), op=self.mpi.SUM)

        LOG.append(["reduceScatter", recvcount, datatype, op, stream])
        _issue("reduceScatter", stream, run)

    def send(self, sendbuf: int, count: int, datatype: str, peer: int, stream: int) -> None:
        assert _group is not None, "the double pairs sends and receives inside groupStart/groupEnd only"

        def run() -> Any:
            return self.comm.Isend(_array(sendbuf, count, datatype).copy(), dest=peer, tag=77)

        LOG.append(["send", count, datatype, peer, stream])
        _issue("send", stream, run)

    def recv(self, recvbuf: int, count: int, datatype: str, peer: int, stream: int) -> None:
        assert _group is not None, "the double pairs sends and receives inside groupStart/groupEnd only"

        def run() -> Any:
            return self.comm.Irecv(_array(recvbuf, count, datatype), source=peer, tag=77)

        LOG.append(["recv", count, datatype, peer, stream])
        _issue("recv", stream, run)


def get_unique_id() -> tuple[int, ...]:
    LOG.append(["get_unique_id"])
    return tuple(os.urandom(128))


def install(device_count: int, cpu: bool = True) -> None:
    """Make flowjob_mpi.nccl use this double, with ``device_count`` devices per host; ``cpu``: for jobs on the
    cpu backend too (the double's "device" arrays are numpy arrays)."""
    from flowjob_mpi import nccl

    # the double's "device" arrays are numpy arrays: its jobs run on the numpy backend, also where a GPU (or
    # the emulated one, FLOWJOB_GPU_EMULATION=1) would be the default device
    os.environ["FLOWJOB_DEVICE"] = "cpu"
    cuda = SimpleNamespace(Device=Device, Stream=Stream, Event=Event, get_current_stream=lambda: COMPUTE,
                           runtime=SimpleNamespace(getDeviceCount=lambda: device_count))
    cp = SimpleNamespace(cuda=cuda, empty=np.empty, multiply=np.multiply, asarray=lambda a: np.array(a, copy=True),
                         asnumpy=lambda a: np.array(a, copy=True))
    nccl.use_runtime(nccl.Runtime(cp, _module(), pointer=lambda array: array.ctypes.data,
                                  stream_pointer=lambda stream: stream.ptr))
    if cpu:
        nccl.DEVICE_TAGS.add("cpu")  # the numpy backend's arrays stand for device arrays


def _module() -> SimpleNamespace:
    """The double's ``cupy.cuda.nccl``."""
    return SimpleNamespace(get_unique_id=get_unique_id, NcclCommunicator=Communicator, NCCL_SUM="NCCL_SUM",
                           NCCL_MAX="NCCL_MAX", groupStart=group_start, groupEnd=group_end,
                           **{name: name for name in DTYPES})


def install_emulated(device_count: int) -> None:
    """Make flowjob_mpi.nccl use this double's NCCL on emulated GPU ranks: jobs run on flowjob-gpu's emulated CuPy
    (``FLOWJOB_GPU_EMULATION=1``), whose arrays are the device arrays NCCL is given (their ``data.ptr`` is the
    numpy memory behind them); the NCCL stream and the events are the emulation's, logging what they are asked
    and joining a stream capture as CUDA's do (``EmulatedStream``)."""
    from flowjob_mpi import nccl

    from flowjob_gpu.emulation import cuda

    os.environ["FLOWJOB_GPU_EMULATION"] = "1"
    os.environ.pop("FLOWJOB_DEVICE", None)
    waits = cuda.Stream.wait_event

    def wait_event(stream: Any, event: Any) -> None:  # the compute stream's waits for the double's events, logged
        if hasattr(event, "id") and not hasattr(stream, "handle"):
            LOG.append(["wait", 0, event.id])
        waits(stream, event)

    cuda.Stream.wait_event = wait_event
    nccl.use_runtime(nccl.Runtime(_EmulatedCupy(device_count), _module(), stream_pointer=lambda stream: stream.ptr))


class _EmulatedCupy:
    """The emulated CuPy, with the double's devices (any count), logging streams and events in ``cuda``."""

    def __init__(self, device_count: int) -> None:
        from flowjob_gpu.emulation.factory import emulated_cupy

        self._cupy = emulated_cupy()
        stream_class, event_class = _emulated_classes()
        self.cuda = SimpleNamespace(Device=Device, Stream=stream_class, Event=event_class,
                                    get_current_stream=self._cupy.cuda.get_current_stream,
                                    runtime=SimpleNamespace(getDeviceCount=lambda: device_count))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cupy, name)


def _emulated_classes() -> tuple[type, type]:
    from flowjob_gpu.emulation import cuda

    class EmulatedStream(cuda.Stream):  # type: ignore[misc]
        """An emulated stream with a handle (the emulation's has none) that joins the capture of a stream it waits
        for (an event recorded in a capturing stream), as a CUDA stream does."""

        def __init__(self, null: bool = False, non_blocking: bool = False) -> None:
            super().__init__(null=null, non_blocking=non_blocking)
            self.handle = next(_ids)
            self.ptr = self.handle  # an instance attribute, as CuPy's and the emulation's
            self.joined: Any = None
            STREAMS[self.handle] = self
            LOG.append(["stream", self.handle, non_blocking])

        def wait_event(self, event: Any) -> None:
            if getattr(event, "capture", None) is not None:
                self.joined = event.capture
            LOG.append(["wait", self.handle, event.id])

    class EmulatedEvent(cuda.Event):  # type: ignore[misc]
        def __init__(self, block: bool = False, disable_timing: bool = False, interprocess: bool = False) -> None:
            super().__init__(block=block, disable_timing=disable_timing, interprocess=interprocess)
            self.id = next(_ids)
            self.capture: Any = None

        def record(self, stream: Any = None) -> None:
            stream = stream if stream is not None else cuda.get_current_stream()
            super().record(stream)
            self.capture = _capture_of(stream)
            LOG.append(["record", self.id, getattr(stream, "handle", 0), self.capture is not None])

    return EmulatedStream, EmulatedEvent
