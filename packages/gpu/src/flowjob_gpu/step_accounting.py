"""What a planned step does on the gpu backend, counted: whether it is recorded as CUDA graphs, how many graphs
and live pieces a call replays and runs, the nodes that run live, the host synchronizations and host-device
copies a call makes, and the device memory its pools hold.

The figures come from the plan's step itself (a ``GraphedStep``), so a benchmark row says whether the step it
timed was in fact recorded. Synchronizations and copies are counted on the emulated device only (its gates note
each, ``emulation.host_traffic``); CuPy offers no count of its own, so on a device they are ``None``.
``python bench/step_accounting.py`` prints them per workload; the tests pin them for small training jobs.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Callable

from flowjob_gpu.step_graphs import GraphedStep
from flowjob_gpu.emulation import host_traffic

EMULATED = "cupy-emulated"  # the emulated backend's name (flowjob_gpu.emulation.backend.NAME)


@dataclass(frozen=True)
class StepAccount:
    """One plan's step as the gpu backend runs it after recording."""

    job: str
    recorded: bool
    uncaptured: str | None  # why the step runs without graphs (None: recorded, or recording is off)
    graphs: int
    live_pieces: int
    live_nodes: tuple[str, ...]  # "name (op)"
    host_syncs: float | None  # per call, counted on the emulated device; None on a device
    host_device_copies: float | None

    @property
    def pieces(self) -> int:
        return self.graphs + self.live_pieces

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "live_nodes": list(self.live_nodes), "pieces": self.pieces}


def step_shape(job: str, step: Any) -> dict[str, Any]:
    """Recorded or not, graphs, live pieces and live nodes of a plan's step (``plan.step``): a step that is not a
    ``GraphedStep`` (recording off, another backend) is not recorded."""
    if not isinstance(step, GraphedStep):
        return {"job": job, "recorded": False, "uncaptured": "recording is off (FLOWJOB_CUDA_GRAPHS=0)",
                "graphs": 0, "live_pieces": 0, "live_nodes": ()}
    return {"job": job, "recorded": step.recorded, "uncaptured": step.uncaptured, "graphs": step.graph_count,
            "live_pieces": step.live_piece_count, "live_nodes": tuple(step.live_nodes())}


def account(function: Any, call: Callable[[], Any], steps: int = 3, warm: int = 2) -> StepAccount:
    """Call ``call`` (one call of the job function ``function``) ``warm`` times (the warm-up and the recording:
    two; none where the caller made them), then ``steps`` times counting the host traffic of the plan's step
    (on the emulated device only: on a device no further call is made)."""
    for _ in range(warm):
        call()
    plan = function.plan()
    step = plan.step
    counting = _counting(plan.backend)
    syncs = copies = None
    if counting is not None:
        totals = [0, 0]

        def counted(feeds: list[Any]) -> Any:
            with counting() as traffic:
                out = step(feeds)
            totals[0] += traffic.syncs
            totals[1] += traffic.copies
            return out

        plan.step = counted
        try:
            for _ in range(steps):
                call()
        finally:
            plan.step = step
        syncs, copies = totals[0] / steps, totals[1] / steps
    return StepAccount(**step_shape(plan.job.name, step), host_syncs=syncs, host_device_copies=copies)


def _counting(backend: Any) -> Any:
    if backend.name != EMULATED:
        return None
    return host_traffic.counting


def peak_pool_bytes(cp: Any, steps: list[Any]) -> int:
    """Device memory held at the peak over every pool: the default pool's and the recorded steps' graph pools
    now, or, where more, what the default and a step's graph pool held together while it recorded (the
    warm-up's temporaries are given back after)."""
    now = int(cp.get_default_memory_pool().total_bytes())
    graphed = [s for s in steps if isinstance(s, GraphedStep)]
    now += sum(s.pool_bytes() for s in graphed)
    return max([now, *(s.recording_bytes for s in graphed)])
