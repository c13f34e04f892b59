"""``flow.current_scope()`` and the logical-view queries: what the scope a job body is traced in says.

Legacy kept a stack of scope symbols (placement, logical view, job configuration); programs read
``flow.current_scope().device_parallel_desc_symbol.parallel_num`` to learn over how many devices the ops
they add will run, and ``flow.scope.mirrored_view_enabled()`` to choose between the views' code paths.
Here the same answers come from the tracer's contexts (:mod:`flowjob_core.trace.scope`), the job's
function config and the session's device counts.
"""
from __future__ import annotations

from dataclasses import dataclass

from flowjob_core.runtime.session import get_default_session
from flowjob_core.trace import scope
from flowjob_core.trace.builder import maybe_builder


def mirrored_view_enabled() -> bool:
    """``flow.scope.mirrored_view_enabled()``: the innermost ``with flow.scope.mirrored_view()`` /
    ``consistent_view()``, else the job's ``default_logical_view``; the consistent view by default."""
    return _view() == "mirrored"


def consistent_view_enabled() -> bool:
    """``flow.scope.consistent_view_enabled()``: the opposite of :func:`mirrored_view_enabled`."""
    return _view() == "consistent"


def _view() -> str:
    view = scope.current_view()
    if view is not None:
        return view.kind
    builder = maybe_builder()
    if builder is not None:
        config = builder.job.config
        for option in ("default_logical_view", "default_distribute_strategy"):
            chosen = config.get(option)
            if chosen is not None:
                return str(chosen.kind)
    return "consistent"


@dataclass(frozen=True)
class ParallelDesc:
    """Legacy's parallel description symbol: the device tag and the devices of each machine."""

    device_tag: str
    machine_id2device_id_list: dict[int, list[int]]

    @property
    def parallel_num(self) -> int:
        return sum(len(ids) for ids in self.machine_id2device_id_list.values())

    def __hash__(self) -> int:
        return hash((self.device_tag, tuple((m, tuple(ids)) for m, ids in self.machine_id2device_id_list.items())))


@dataclass(frozen=True)
class Scope:
    """What ``flow.current_scope()`` answers: the placement's devices and the logical view."""

    device_parallel_desc_symbol: ParallelDesc
    is_mirrored: bool
    job_name: str | None

    @property
    def is_consistent(self) -> bool:
        return not self.is_mirrored


def current_scope() -> Scope:
    """``flow.current_scope()``: the innermost placement (or the default one: every configured device of the
    session's device, ``flow.config.gpu_device_num`` or else ``cpu_device_num``, as a mirrored call) and the
    logical view."""
    builder = maybe_builder()
    return Scope(parallel_desc(), mirrored_view_enabled(), builder.job.name if builder is not None else None)


def parallel_desc() -> ParallelDesc:
    """The devices ops traced now would run on: the innermost placement's, else the default placement's."""
    placement = scope.current_placement()
    if placement is not None:
        devices: dict[int, list[int]] = {}
        for ids in placement.machine_device_ids:
            match = scope.DEVICE_IDS.match(ids)
            assert match is not None  # checked when the placement was made
            low, high = int(match.group(2)), int(match.group(3) or match.group(2))
            devices.setdefault(int(match.group(1)), []).extend(range(low, high + 1))
        return ParallelDesc(placement.device_tag, devices)
    builder = maybe_builder()
    session = builder.session if builder is not None else get_default_session()
    tag = builder.default_device if builder is not None else session.backend.tag
    config = session.config
    count = config.gpu_device_num or config.cpu_device_num or 1  # the devices of a mirrored call
    return ParallelDesc(tag, {0: list(range(count))})
