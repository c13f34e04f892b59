"""GPU ranks: gradients and variable broadcasts through NCCL (``cupy.cuda.nccl``), one device per rank.

At world setup every rank says what it lacks for NCCL (CuPy, CuPy's NCCL binding, a CUDA device);
``choose`` turns that and ``FLOWJOB_MPI_GRADIENTS`` into the path the whole world takes, so the
ranks never disagree on it. On the NCCL path each rank uses device ``local_rank % device_count``
(its rank among the ranks of its host, from MPI's ``COMM_TYPE_SHARED`` split), rank 0 makes the
NCCL unique id and MPI broadcasts it, and every rank joins one ``NcclCommunicator``.

A bucket's all-reduce then stays on the device: the scaled gradients are written into the bucket's
device buffer on the compute stream, an event recorded there orders ``ncclAllReduce`` (on a
dedicated stream) after them, and a second event, recorded after the reduction, is waited by the
compute stream before the optimizer's updates. Only jobs whose backend keeps arrays on the device
(``DEVICE_TAGS``) take it; a numpy rank's buckets stay host buffers reduced by MPI.

Everything CUDA-specific is reached through ``Runtime`` (CuPy's module and its ``cupy.cuda.nccl``),
which the tests replace with a double over numpy and MPI.
"""
from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from flowjob_core import switches
from flowjob_mpi.faults import WAITING
from flowjob_mpi.errors import MpiError

if TYPE_CHECKING:
    from flowjob_mpi.world import World

VARIABLE = "FLOWJOB_MPI_GRADIENTS"
DEVICE_TAGS = {"gpu"}  # backends whose arrays live on the CUDA device (flowjob-gpu's CuPy backend)
INSTALL_HINT = 'pip install "flowjob-mpi[nccl]" on a machine with a CUDA device'
# NCCL's names for the floating dtypes a gradient bucket may hold (cupy.cuda.nccl exports them)
BCAST_CHUNK_BYTES = 1 << 30  # CuPy's NcclCommunicator.bcast takes its count as a C int
FLOAT_TYPES = {"float16": "NCCL_FLOAT16", "float32": "NCCL_FLOAT32", "float64": "NCCL_FLOAT64"}


@dataclass
class Runtime:
    """What the NCCL path calls: ``cp`` (cupy: ``empty``, ``asarray``, ``asnumpy``, ``cuda.Device``,
    ``cuda.Stream``, ``cuda.Event``, ``cuda.get_current_stream``, ``cuda.runtime.getDeviceCount``),
    ``nccl`` (``cupy.cuda.nccl``: ``get_unique_id``, ``NcclCommunicator``, ``groupStart``, ``groupEnd``,
    the ``NCCL_*`` constants), ``pointer`` (a device array's address) and ``stream_pointer`` (a stream's handle, as
    NCCL's calls take it)."""

    cp: Any
    nccl: Any
    pointer: Callable[[Any], int] = field(default=lambda array: array.data.ptr)
    stream_pointer: Callable[[Any], int] = field(default=lambda stream: stream.ptr)


def load_runtime() -> tuple[Runtime | None, str]:
    """CuPy's runtime, or None and the missing piece in words."""
    try:
        import cupy
    except Exception as exc:  # not installed, or a CUDA library it links to is absent
        return None, f"CuPy cannot be imported ({exc}); {INSTALL_HINT}"
    try:
        from cupy.cuda import nccl
    except Exception as exc:
        return None, (f"CuPy {cupy.__version__} has no NCCL binding (cupy.cuda.nccl: {exc}); "
                      f"install NCCL (nvidia-nccl-cu12)")
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:
        return None, f"CuPy sees no CUDA device ({exc})"
    if count < 1:
        return None, "CuPy sees no CUDA device"
    return Runtime(cupy, nccl), ""


_loader: Callable[[], tuple[Runtime | None, str]] = load_runtime


def use_runtime(runtime: Runtime) -> None:
    """Make the next world setup use ``runtime`` (a test double) instead of CuPy's."""
    global _loader
    _loader = lambda: (runtime, "")  # noqa: E731


def requested() -> str:
    """``FLOWJOB_MPI_GRADIENTS``: "nccl", "mpi", or "" (unset: the rule decides)."""
    return switches.current().mpi_gradients  # a value not understood is a ConfigError naming the variable


def choose(asked: str, missing: Sequence[str]) -> str:
    """The world's gradient path from the request and each rank's missing piece ("" where none):
    ``mpi`` when asked; else NCCL when every rank has CuPy, its NCCL and a device; else MPI, unless
    NCCL was asked for, which then fails naming the first rank that lacks something and what."""
    if asked == "mpi":
        return "mpi"
    lacking = [(rank, piece) for rank, piece in enumerate(missing) if piece]
    if not lacking:
        return "nccl"
    if asked == "nccl":
        rank, piece = lacking[0]
        raise MpiError(f"{VARIABLE}=nccl, but rank {rank} of {len(missing)} cannot use NCCL: {piece} "
                       f"(or set {VARIABLE}=mpi to all-reduce host buffers with MPI)")
    return "mpi"


def local_rank(comm: Any) -> int:
    """This rank's number among the ranks of its host (MPI's shared-memory split)."""
    from mpi4py import MPI

    local = comm.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        return int(local.Get_rank())
    finally:
        local.Free()


def setup(world: World) -> Nccl | None:
    """Collective, at world setup: the NCCL communicator every rank joins, or None for the MPI path."""
    asked = requested()
    if asked == "mpi":
        return None
    runtime, missing = _loader()
    if choose(asked, world.comm.allgather(missing)) == "mpi":
        return None
    assert runtime is not None
    cuda = runtime.cp.cuda
    device = local_rank(world.comm) % cuda.runtime.getDeviceCount()
    cuda.Device(device).use()
    _current_in_new_threads(runtime, device)
    uid = runtime.nccl.get_unique_id() if world.rank == 0 else None
    WAITING.enter("the exchange of the NCCL unique id")
    try:
        uid = world.comm.bcast(uid, root=0)
        comm = runtime.nccl.NcclCommunicator(world.size, uid, world.rank)  # blocks until every rank joined
    finally:
        WAITING.leave()
    return Nccl(runtime, comm, device, world.size)


def _current_in_new_threads(runtime: Runtime, device: int) -> None:
    """CuPy's current device is per thread, and a new thread starts on device 0: every thread started
    from now on (the executor's, a reader's) makes the rank's device current before its first line,
    through threading's profile hook, which then hands over to any hook set before."""
    previous: Any = threading.getprofile()

    def first_event(frame: Any, event: str, arg: Any) -> Any:
        runtime.cp.cuda.Device(device).use()
        sys.setprofile(previous)  # this thread's hook: done after its first event
        return previous(frame, event, arg) if previous is not None else None

    threading.setprofile(first_event)


class Nccl:
    """This rank's NCCL communicator, its device and the stream its collectives run on."""

    def __init__(self, runtime: Runtime, comm: Any, device: int, size: int) -> None:
        self.runtime, self.comm, self.device, self.size = runtime, comm, device, size
        with runtime.cp.cuda.Device(device):
            self.stream = runtime.cp.cuda.Stream(non_blocking=True)  # off the compute stream: overlaps it

    def serves(self, backend: Any) -> bool:
        """Whether a job on ``backend`` keeps its gradients on the device, where NCCL reads them."""
        return backend.tag in DEVICE_TAGS

    def bucket(self, inputs: Sequence[Any]) -> DeviceBucket:
        return DeviceBucket(self, inputs)

    def dtype(self, dtype: np.dtype) -> Any:
        name = FLOAT_TYPES.get(np.dtype(dtype).name)
        if name is None:
            raise MpiError(f"NCCL all-reduces floating buckets of {sorted(FLOAT_TYPES)}, not {np.dtype(dtype)}")
        return getattr(self.runtime.nccl, name)

    def broadcast(self, arrays: list[np.ndarray]) -> None:
        """Each host array overwritten in place by rank 0's: copied to the device, broadcast by NCCL as bytes
        (any dtype) in one group, copied back."""
        cp, nccl = self.runtime.cp, self.runtime.nccl
        with cp.cuda.Device(self.device):
            device = [cp.asarray(np.ascontiguousarray(a).reshape(-1).view(np.uint8)) for a in arrays]
            self.stream.wait_event(_recorded(cp, cp.cuda.get_current_stream()))  # the copies are made first
            stream = self.runtime.stream_pointer(self.stream)
            nccl.groupStart()
            for buffer in device:
                address = self.runtime.pointer(buffer)
                for start in range(0, buffer.size, BCAST_CHUNK_BYTES):  # bcast's count is a C int
                    count = min(BCAST_CHUNK_BYTES, buffer.size - start)
                    self.comm.bcast(address + start, count, nccl.NCCL_UINT8, 0, stream)
            nccl.groupEnd()
            _wait(_recorded(cp, self.stream), "the NCCL broadcast of rank 0's variables")
            for array, buffer in zip(arrays, device):
                array[...] = cp.asnumpy(buffer).view(array.dtype).reshape(array.shape)


def _recorded(cp: Any, stream: Any) -> Any:
    event = cp.cuda.Event(disable_timing=True)
    event.record(stream)
    return event


def _wait(event: Any, what: str) -> None:
    """The host waits for ``event``, polling, so the fault watchdog (a Python thread) can still end a
    rank whose peer left while NCCL waits for it forever."""
    WAITING.enter(what)
    while not event.done:
        time.sleep(50e-6)
    WAITING.leave()


class DeviceBucket:
    """One bucket of gradients on the device: its buffer, each gradient's view, and its two events."""

    def __init__(self, nccl: Nccl, inputs: Sequence[Any]) -> None:
        cp = nccl.runtime.cp
        self.nccl, self.cp = nccl, cp
        dtype = inputs[0].dtype
        self.datatype = nccl.dtype(dtype)
        offsets = np.cumsum([0] + [x.size for x in inputs]).tolist()
        with cp.cuda.Device(nccl.device):
            self.buffer = cp.empty(offsets[-1], dtype=dtype)
        self.pieces = [self.buffer[offsets[i]:offsets[i + 1]].reshape(x.shape) for i, x in enumerate(inputs)]
        self.done: Any = None

    def start(self, grads: Sequence[Any], weights: Sequence[Any]) -> None:
        """Scale the gradients into the buffer (compute stream), then sum it over ranks on NCCL's stream
        once the compute stream got there."""
        cp, nccl = self.cp, self.nccl
        with cp.cuda.Device(nccl.device):
            for piece, grad, weight in zip(self.pieces, grads, weights):
                cp.multiply(grad, weight, out=piece)
            nccl.stream.wait_event(_recorded(cp, cp.cuda.get_current_stream()))
            nccl.comm.allReduce(nccl.runtime.pointer(self.buffer), nccl.runtime.pointer(self.buffer), self.buffer.size,
                                self.datatype, nccl.runtime.nccl.NCCL_SUM, nccl.runtime.stream_pointer(nccl.stream))
            self.done = _recorded(cp, nccl.stream)

    def finish(self, what: str) -> None:
        """The compute stream ordered after the sum (the updates read it); the host waits for it too, so a
        peer that left is noticed (``_wait``)."""
        with self.cp.cuda.Device(self.nccl.device):
            self.cp.cuda.get_current_stream().wait_event(self.done)
        _wait(self.done, what)
