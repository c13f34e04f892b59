"""A test double of the CUDA runtime flowjob_mpi.nccl calls: CuPy's few names over numpy, and a
``cupy.cuda.nccl`` whose communicator resolves the buffer addresses it is given (host memory here)
and sums or broadcasts them with MPI. Streams and events do nothing but log what they were asked,
so a test can check the order: scale on the compute stream, record, the NCCL stream waits, reduce,
record, the compute stream waits.

``install(device_count)`` makes the next world setup use it; ``LOG`` holds the calls.
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
_ids = itertools.count(1)
DTYPES = {"NCCL_FLOAT16": np.float16, "NCCL_FLOAT32": np.float32, "NCCL_FLOAT64": np.float64, "NCCL_UINT8": np.uint8}


class Stream:
    def __init__(self, non_blocking: bool = False, ptr: int | None = None) -> None:
        self.ptr = next(_ids) if ptr is None else ptr
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
        assert sendbuf == recvbuf and op == "NCCL_SUM"
        self.comm.Allreduce(self.mpi.IN_PLACE, _array(recvbuf, count, datatype), op=self.mpi.SUM)
        LOG.append(["allReduce", count, datatype, stream])

    def bcast(self, buff: int, count: int, datatype: str, root: int, stream: int) -> None:
        self.comm.Bcast(_array(buff, count, datatype), root=root)
        LOG.append(["bcast", count, datatype, root, stream])


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
    module = SimpleNamespace(get_unique_id=get_unique_id, NcclCommunicator=Communicator, NCCL_SUM="NCCL_SUM",
                             groupStart=lambda: LOG.append(["groupStart"]), groupEnd=lambda: LOG.append(["groupEnd"]),
                             **{name: name for name in DTYPES})
    nccl.use_runtime(nccl.Runtime(cp, module, pointer=lambda array: array.ctypes.data))
    if cpu:
        nccl.DEVICE_TAGS.add("cpu")  # the numpy backend's arrays stand for device arrays
