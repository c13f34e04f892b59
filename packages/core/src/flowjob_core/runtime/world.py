"""The processes a session's program runs in, as a plugin describes them (``flowjob_world``).

Core never talks to a transport: it asks the world only what legacy's multi-machine API and
checkpoints need to know. Without a plugin answering, the world is this one process.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Protocol, TypeVar

if TYPE_CHECKING:
    from flowjob_core.runtime.session import Session

T = TypeVar("T")


class World(Protocol):
    """``size`` ranks running the same program on ``machines`` machines; this process is ``rank``."""

    size: int
    rank: int

    @property
    def machines(self) -> int: ...

    @property
    def machine_id(self) -> int:
        """This process's machine, in ``[0, machines)``: hosts numbered in rank order (ranks on one host)."""
        ...

    def root_only(self, fn: Callable[[], T]) -> T:
        """``fn()`` run on rank 0; every rank gets its result or raises its exception."""
        ...

    def broadcast_arrays(self, arrays: list[Any]) -> None:
        """Each host array overwritten in place by rank 0's."""
        ...

    def allgather(self, value: Any) -> list[Any]:
        """Every rank's ``value`` (host objects), in rank order, on every rank."""
        ...

    def gather_to_root(self, value: Any) -> list[Any] | None:
        """Every rank's ``value`` in rank order on rank 0, None on the others (optional: a world without it is
        asked for ``allgather``)."""
        ...

    def scatter_from_root(self, values: list[Any] | None) -> Any:
        """Rank 0's ``values[r]`` on each rank ``r`` (``values`` is read on rank 0 only; optional: a world without it
        is asked for ``allgather``)."""
        ...


class OneProcess:
    """The world of a program without a distributed plugin."""

    size = 1
    rank = 0
    machines = 1
    machine_id = 0

    def root_only(self, fn: Callable[[], T]) -> T:
        return fn()

    def broadcast_arrays(self, arrays: list[Any]) -> None:
        return None

    def allgather(self, value: Any) -> list[Any]:
        return [value]

    def gather_to_root(self, value: Any) -> list[Any] | None:
        return [value]

    def scatter_from_root(self, values: list[Any] | None) -> Any:
        return values[0] if values else None


ONE_PROCESS = OneProcess()


def can_stand_for(world: World, machines: int) -> bool:
    """Whether the program may name ``machines`` machines on ``world``: its own count (hosts, or ranks on one
    host), or, where each rank stands for a machine, a count the ranks divide into evenly: ranks then stand for
    devices, ``size / machines`` per machine (``flow.config.machine_num(1)`` with ``gpu_device_num(2)`` on 2
    ranks). Whether the device counts agree is the distributed plugin's check, when a job is planned."""
    if machines == world.machines:
        return True
    return world.machines == world.size and 1 <= machines < world.size and world.size % machines == 0


def world_of(session: "Session") -> World:
    """The world the session's plugins describe (the first answer), else this one process."""
    answer = session.pm.hook.flowjob_world()
    return answer if answer is not None else ONE_PROCESS
