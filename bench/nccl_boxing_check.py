"""The device check's NCCL step: flowjob_mpi.nccl_boxing's collectives through CuPy's NCCL on one GPU, a world of
one rank (an NCCL communicator of size 1, where each collective is a copy on the device), checked against numpy;
then an all-gather, a reduce-scatter and an all-to-all recorded into a CUDA graph by stream capture (NCCL 2.9 and
later capture collectives) and launched after their input changed. ``python bench/nccl_boxing_check.py
[--emulated]``; one line a check, exit 1 if any failed.

What one device can tell: CuPy's NCCL binding is there and takes the calls as nccl_boxing makes them (argument
order, counts, types, stream handles), the events order the NCCL stream with the compute stream, the staging
copies put axes where they belong, and a capture of NCCL calls launches. What it cannot: anything between two
ranks (the tests' NCCL double covers that on the CPU, packages/mpi/tests/test_nccl_boxing.py).

``--emulated`` runs the same checks on flowjob-gpu's emulated CuPy with a one-rank NCCL of this script's own
(copies between the addresses it is given; a call on a capturing stream is recorded into the capture), so a
script error shows on every CPU run.
"""
from __future__ import annotations

import argparse
import ctypes
import sys
from typing import Any

import numpy as np

from check_report import check, failures



class OneRankNccl:
    """``cupy.cuda.nccl`` for a world of one on the emulated CuPy: each collective copies its bytes."""

    NCCL_SUM, NCCL_MAX, NCCL_UINT8, NCCL_FLOAT16, NCCL_FLOAT32, NCCL_FLOAT64 = range(6)
    SIZES = {NCCL_UINT8: 1, NCCL_FLOAT16: 2, NCCL_FLOAT32: 4, NCCL_FLOAT64: 8}

    def __init__(self, cp: Any) -> None:
        self.cp, self.group, self.sends = cp, 0, []
        outer = self

        class Communicator:
            def __init__(self, ndev: int, uid: Any, rank: int) -> None:
                assert (ndev, rank) == (1, 0), "a world of one"

            def allReduce(self, send: int, recv: int, count: int, dtype: int, op: int, stream: int) -> None:  # noqa: N802
                outer.copy(recv, send, count * outer.SIZES[dtype])

            def allGather(self, send: int, recv: int, count: int, dtype: int, stream: int) -> None:  # noqa: N802
                outer.copy(recv, send, count * outer.SIZES[dtype])

            def reduceScatter(self, send: int, recv: int, count: int, dtype: int, op: int,  # noqa: N802
                              stream: int) -> None:
                outer.copy(recv, send, count * outer.SIZES[dtype])

            def broadcast(self, send: int, recv: int, count: int, dtype: int, root: int, stream: int) -> None:
                outer.copy(recv, send, count * outer.SIZES[dtype])

            def send(self, send: int, count: int, dtype: int, peer: int, stream: int) -> None:
                assert outer.group and peer == 0
                outer.sends.append((send, count * outer.SIZES[dtype]))

            def recv(self, recv: int, count: int, dtype: int, peer: int, stream: int) -> None:
                assert outer.group and peer == 0
                send, size = outer.sends.pop(0)
                assert size == count * outer.SIZES[dtype]
                outer.copy(recv, send, size)

        self.NcclCommunicator = Communicator

    def copy(self, to: int, source: int, size: int) -> None:
        """The copy, now; or recorded into the capture of the current stream (nccl_boxing calls NCCL inside the
        compute stream's capture, which its NCCL stream joined through an event)."""
        if to == source:
            return
        capture = getattr(self.cp.cuda.get_current_stream(), "_capture", None)
        if capture is None:
            ctypes.memmove(to, source, size)
        else:
            capture.ops.append((lambda: ctypes.memmove(to, source, size), (), {}, None))

    def get_unique_id(self) -> tuple[int, ...]:
        return (0,) * 128

    def groupStart(self) -> None:  # noqa: N802
        self.group += 1

    def groupEnd(self) -> None:  # noqa: N802
        self.group -= 1


def world_of_one(emulated: bool) -> tuple[Any, Any, str]:
    """CuPy (or the emulated one), flowjob_mpi.nccl's ``Nccl`` of a one-rank communicator on device 0, and which
    NCCL it is in words."""
    from flowjob_mpi import nccl

    if emulated:
        from flowjob_gpu.emulation.factory import emulated_cupy

        cp = emulated_cupy()
        streams: dict[int, Any] = {}

        def handle(stream: Any) -> int:
            streams[id(stream)] = stream
            return id(stream)

        runtime = nccl.Runtime(cp, OneRankNccl(cp), stream_pointer=handle)
    else:
        runtime, missing = nccl.load_runtime()
        if runtime is None:
            raise RuntimeError(missing)
        cp = runtime.cp
    cp.cuda.Device(0).use()
    communicator = runtime.nccl.NcclCommunicator(1, runtime.nccl.get_unique_id(), 0)
    version = getattr(runtime.nccl, "get_version", lambda: "(version unknown)")
    which = "this script's one-rank NCCL" if emulated else f"NCCL {version()}"
    return cp, nccl.Nccl(runtime, communicator, 0, 1), f"{which}, CuPy {cp.__version__}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--emulated", action="store_true", help="the emulated CuPy and a one-rank NCCL of its own")
    args = parser.parse_args()
    made: list[Any] = []
    check("a one-rank NCCL communicator", lambda: made.extend(world_of_one(args.emulated)) or made[2])
    if not made:
        sys.exit(1)
    cp, nccl, _ = made
    from flowjob_mpi.nccl_boxing import DeviceBoxing

    boxing = DeviceBoxing(nccl, cp, "the device check's collectives")
    rng = np.random.default_rng(0)
    host = rng.standard_normal((4, 6, 8)).astype(np.float32)

    def same(got: Any, want: np.ndarray) -> str:
        np.testing.assert_array_equal(cp.asnumpy(got), want)
        return f"{want.shape} {want.dtype}"

    x = cp.asarray(host)
    check("all_gather axis 0", lambda: same(boxing.all_gather(x, cp.empty_like(x), 0), host))
    check("all_gather axis 2, staged", lambda: same(boxing.all_gather(x, cp.empty_like(x), 2), host))
    check("all_gather of a strided view", lambda: same(boxing.all_gather(x[:, ::2], cp.empty((4, 3, 8), np.float32),
                                                                         1), host[:, ::2]))
    check("all_gather of uneven rows (grouped broadcasts)", lambda: same(boxing.all_gather_counts(
        x, cp.empty_like(x), 1, [6], cp.empty((6, 4, 8), np.float32), cp.empty((6, 4, 8), np.float32)), host))
    check("reduce_scatter axis 1, staged", lambda: same(boxing.reduce_scatter(x, cp.empty_like(x), 1), host))
    check("all_reduce sum", lambda: same(boxing.all_reduce(cp.asarray(host)), host))
    check("all_reduce max", lambda: same(boxing.all_reduce(cp.asarray(host), "max"), host))
    check("broadcast", lambda: same(boxing.broadcast(x, cp.empty_like(x), 0), host))
    check("all_to_all 0 -> 2 (grouped send and recv)", lambda: same(boxing.all_to_all(x, cp.empty_like(x), 2, 0),
                                                                   host))

    def recorded() -> str:
        source = cp.asarray(host)
        gathered, scattered, moved = (cp.zeros_like(source) for _ in range(3))
        staging = [cp.empty((1, *host.shape), np.float32) for _ in range(4)]  # made before: none in the capture
        stream = cp.cuda.Stream(non_blocking=True)
        with stream:
            stream.begin_capture()
            boxing.all_gather(source, gathered, 1, received=staging[0])
            boxing.reduce_scatter(source, scattered, 2, sent=staging[1])
            boxing.all_to_all(source, moved, 1, 0, sent=staging[2], received=staging[3])
            graph = stream.end_capture()
        changed = host * 2 + 1
        source[...] = cp.asarray(changed)
        graph.launch(stream)
        stream.synchronize()
        for got in (gathered, scattered, moved):
            same(got, changed)
        return "3 collectives captured, launched on the changed input"

    check("a CUDA graph of NCCL collectives", recorded)
    print(f"{len(failures)} failed" if failures else "all passed", flush=True)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
