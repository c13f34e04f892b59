"""Whole-step CUDA graphs: a plan's step recorded once (per plan, so per fed shape) and replayed.

The first call runs the generated step as it is (the warm-up: kernels are built and compiled, the output check
runs, the plan's arena and scratch are allocated). The second call records: the feeds are copied into device
buffers made once, the step is cut into pieces at its live nodes (``flowjob_core.plan.pieces``: a learning rate
evaluated in Python, a host-seeded random stream, a value read back, a side effect), each other piece is
captured on the step's stream (``Stream.begin_capture``/``end_capture``) with a memory pool of its own, so the
temporaries its kernels allocate stay the graph's, and launched; the live pieces run. Every later call copies
the feeds into the same buffers, launches the graphs and runs the live pieces in order, copying a live node's
value into the memory a graph reads where the kernel returned other memory; the results are copied out of the
graphs' memory, which the next replay overwrites.

Op records and kernels name the nodes that work on the host (``flowjob_core.ir.kernel.runs_live``); one that does
so unannounced (it
synchronizes or copies from host memory, so its capture fails, and nothing of the failed capture ran) runs live
from then on: the recording goes on from the start of its piece with it live, up to ``MAX_FOUND_LIVE`` such
nodes. A step that cannot be recorded at all (a feed that is not one device array, no graph support, too many
live nodes) runs uncaptured for good; debug logging names each live node found and info logging says why a step
runs uncaptured. ``FLOWJOB_CUDA_GRAPHS=0`` turns recording off.

Counts kernels keep on the device (bad labels: ``flowjob_ops.kernels.device_counts``) are read after each call
without waiting for the device (``count_reads``).

The step runs on a stream of its own, ordered after the default stream's work at its start (feeds, variable
loads) and before it at its end (results and variables read on the default stream wait for the step).
"""
from __future__ import annotations

import logging
from typing import Any

from flowjob_core import switches
from flowjob_core.plan.pieces import Piece, StepProgram, failing_node, split

from flowjob_gpu.count_reads import CountReads

logger = logging.getLogger(__name__)

MAX_FOUND_LIVE = 64  # live nodes found by failed captures before a step gives up recording


def step_recorder(cp: Any) -> Any:
    """The backend's ``step_recorder``: a ``GraphedStep`` per plan, or the plan's own step where recording is off."""

    def record(plan: Any) -> Any:
        return GraphedStep(plan, cp) if switches.current().cuda_graphs else plan.step

    return record


class GraphedStep:
    """``step(feeds) -> (returns, sides)`` of a plan, recorded as CUDA graphs on its second call."""

    def __init__(self, plan: Any, cp: Any) -> None:
        self.cp = cp
        self.job = plan.job.name
        self.program: StepProgram = plan.program
        self.generated = plan.step  # the plan's generated step: the warm-up runs it, and any uncaptured call
        self.stream = cp.cuda.Stream(non_blocking=True)
        # made once: each step records them again (the stream's order with the default stream's work)
        self.fed, self.done = cp.cuda.Event(disable_timing=True), cp.cuda.Event(disable_timing=True)
        self.calls = 0
        self.found_live: set[int] = set()  # call positions whose capture failed
        self.uncaptured: str | None = None  # why the step runs without graphs for good
        self.replay: list[tuple[Piece, Any]] | None = None  # (piece, its graph; None: live) once recorded
        self.env: dict[str, Any] = {}
        self.feed_buffers: list[Any] = []
        self.live_values: dict[str, Any] = {}  # what the graphs read of the live pieces' values
        self.pool: Any = None
        self._retired: Any = None  # a failed recording's pool and graphs, kept while its launches may run
        self.recording_bytes = 0  # the default pool and the graphs' pool together while the step recorded
        self.count_reads = CountReads(cp, plan)  # the kernels' device counts, read after each call without waiting

    @property
    def recorded(self) -> bool:
        """Whether the step is recorded: its calls replay graphs (and run its live pieces)."""
        return self.replay is not None

    @property
    def graph_count(self) -> int:
        return sum(graph is not None for _, graph in self.replay or ())

    @property
    def live_piece_count(self) -> int:
        return sum(graph is None for _, graph in self.replay or ())

    def live_nodes(self) -> list[str]:
        """``"name (op)"`` of each node a recorded step runs live, in step order."""
        return [f"{call.node.name} ({call.node.op})" for piece, graph in self.replay or () if graph is None
                for call in piece.calls]

    def pool_bytes(self) -> int:
        """Device memory the graphs' own pool holds (their temporaries), beside the default pool's."""
        return int(self.pool.total_bytes()) if self.pool is not None else 0

    def __call__(self, feeds: list[Any]) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
        null, stream = self.cp.cuda.Stream.null, self.stream
        self.fed.record(null)
        stream.wait_event(self.fed)
        try:
            with stream:
                if self.replay is not None:
                    out = self._replay(feeds)
                elif self.calls == 0 or self.uncaptured is not None:
                    out = self.generated(feeds)
                else:
                    out = self._record(feeds)
        finally:
            self.done.record(stream)
            null.wait_event(self.done)
        self.calls += 1
        with stream:  # may raise the error a kernel's device count stands for (an index out of range)
            self.count_reads.after_call(stream, wait=self.calls == 1)
        return out

    # recording -------------------------------------------------------------------------------
    def _record(self, feeds: list[Any]) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
        cp = self.cp
        if not all(isinstance(feed, cp.ndarray) for feed in feeds):
            self._give_up("a feed is not one device array (a tensor list)")
            return self.generated(feeds)
        buffers = [cp.empty_like(feed) for feed in feeds]
        for buffer, feed in zip(buffers, feeds):
            cp.copyto(buffer, feed)
        env = dict(zip(self.program.feeds, buffers))
        pool = cp.cuda.MemoryPool()
        cuts: set[int] = set()
        pieces = split(self.program, self.found_live, "graph pieces")
        replay: list[tuple[Piece, Any]] = []
        number = 0
        while number < len(pieces):
            piece = pieces[number]
            if piece.live:
                piece.run(env)
                replay.append((piece, None))
                number += 1
                continue
            graph = self._capture(piece, env, pool)
            if isinstance(graph, BaseException) and self._found_live(piece, graph):
                # nothing of the piece ran: with the failing node live, the step goes on from the piece's start
                cuts.add(piece.start)
                pieces = split(self.program, self.found_live, "graph pieces", cuts)
                number = next(n for n, p in enumerate(pieces) if p.start == piece.start)
                continue
            if graph is None or isinstance(graph, BaseException):  # recording stopped: the rest runs now
                self._retired = (pool, replay)  # launched graphs may still run: their memory stays
                for rest in pieces[number:]:
                    rest.run(env)
                return self._results(env)
            graph.launch(stream=self.stream)
            replay.append((piece, graph))
            number += 1
        self.replay, self.env, self.feed_buffers, self.pool, self._retired = replay, env, buffers, pool, None
        self.live_values = {v: env[v] for piece, graph in replay if graph is None for v in piece.writes}
        # the warm-up's temporaries wait in the default pool for calls that now take the graphs' own: given back,
        # after noting the peak they made with the graphs' pool (what a device's memory held at once)
        default = cp.get_default_memory_pool()
        self.recording_bytes = int(default.total_bytes()) + self.pool_bytes()
        default.free_all_blocks()
        logger.debug("job %r: the step is recorded as %d CUDA graphs beside %d live pieces", self.job,
                     self.graph_count, len(replay) - self.graph_count)
        return self._results(env)

    def _capture(self, piece: Piece, env: dict[str, Any], pool: Any) -> Any:
        """The piece's graph; the error of a kernel that failed in the capture; or None where recording stopped
        for good (``uncaptured`` says why)."""
        cp, stream = self.cp, self.stream
        try:
            stream.begin_capture()
        except Exception as exc:  # no graph support (a HIP CuPy)
            self._give_up(f"the stream cannot be captured: {exc}")
            return None
        try:
            with cp.cuda.using_allocator(pool.malloc):
                piece.run(env)
        except Exception as exc:
            try:
                stream.end_capture()
            except Exception:  # noqa: S110 - the kernel's failure invalidated the capture; it is returned
                pass
            return exc
        try:
            return stream.end_capture()
        except Exception as exc:
            self._give_up(f"capturing {_nodes(piece)} failed: {exc}")
            return None

    def _found_live(self, piece: Piece, failed: BaseException) -> bool:
        """After a kernel of ``piece`` raised ``failed`` in a capture: its node runs live from now on (True), unless
        it cannot be named or too many were (False: the step gives up recording). A kernel that fails uncaptured
        too raises its error when it runs live, as the step's."""
        node = failing_node(self.program, failed)
        if node is None:
            self._give_up(f"capturing {_nodes(piece)} failed outside their kernels: {failed!r}")
            return False
        if len(self.found_live) >= MAX_FOUND_LIVE:
            self._give_up(f"more than {MAX_FOUND_LIVE} of its kernels work on the host (the last, op {node.name!r} "
                          f"({node.op}): {failed})")
            return False
        self.found_live.add(next(p for p, call in enumerate(self.program.calls) if call.node is node))
        logger.debug("job %r: op %r (%s) runs live beside the CUDA graphs: capturing it failed: %s", self.job,
                     node.name, node.op, failed)
        return True

    def _give_up(self, reason: str) -> None:
        self.uncaptured = reason
        logger.info("job %r runs without CUDA graphs: %s", self.job, reason)

    # replaying -------------------------------------------------------------------------------
    def _replay(self, feeds: list[Any]) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
        cp, env, stream = self.cp, self.env, self.stream
        for buffer, feed in zip(self.feed_buffers, feeds):
            cp.copyto(buffer, feed)
        for piece, graph in self.replay or ():
            if graph is not None:
                graph.launch(stream=stream)
                continue
            piece.run(env)
            for v in piece.writes:  # the graphs read the memory the value had when they were captured
                recorded, value = self.live_values[v], env[v]
                if value is not recorded and recorded is not None and value is not None:
                    cp.copyto(recorded, value)
                    env[v] = recorded
        return self._results(env)

    def _results(self, env: dict[str, Any]) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
        # copies: the graphs' memory holds the next step's values after the next replay
        ndarray = self.cp.ndarray
        program = self.program

        def out(v: str) -> Any:
            value = env[v]
            return value.copy() if isinstance(value, ndarray) else value

        return tuple(out(v) for v in program.returns), tuple(out(v) for v in program.sides)


def _nodes(piece: Piece) -> str:
    names = [f"{call.node.name!r}" for call in piece.calls[:3]]
    more = f" and {len(piece.calls) - 3} more" if len(piece.calls) > 3 else ""
    return f"the ops {', '.join(names)}{more}"
