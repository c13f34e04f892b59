"""``flow.config.*``: settings of the default session."""
from __future__ import annotations

from flowjob_core.trace import eager_mode
from flowjob_core.errors import ConfigError
from flowjob_core.runtime.session import get_default_session
from flowjob_core.runtime.world import can_stand_for, world_of


def _count(name: str, value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ConfigError(f"flow.config.{name} expects a non-negative int, got {value!r}")
    return value


def gpu_device_num(count: int) -> None:
    """Devices per machine. Without a GPU backend the job runs on the CPU, with one warning."""
    session = get_default_session()
    session.config.gpu_device_num = _count("gpu_device_num", count)
    if count > 0:
        session.note_device_request("gpu")


def cpu_device_num(count: int) -> None:
    get_default_session().config.cpu_device_num = _count("cpu_device_num", count)


def enable_debug_mode(value: bool = True) -> None:
    """Verify the job after every graph pass (a broken invariant names the pass that broke it), and check every
    kernel's outputs against inference on every call. Values are not checked, as in legacy (whose programs fill
    with ``-inf`` on purpose): that is ``enable_numerics_check``. Read when a job is planned (its first call)."""
    get_default_session().config.debug_mode = bool(value)


def enable_numerics_check(value: bool = True) -> None:
    """Check every step's values (a flowjob addition): the first op whose output holds NaN, or an Inf its
    record does not declare it makes on purpose (``OpDef.compute.intended_inf``: masked fills, ``-inf`` padding),
    or a fed argument holding either, raises ``NumericsError`` naming it (``flowjob_core.plan.numerics``).
    Overrides ``FLOWJOB_NUMERICS_CHECK``; a job's ``function_config.enable_numerics_check`` overrides both.
    Read when a job is planned (its first call)."""
    if not isinstance(value, bool):
        raise TypeError(f"flow.config.enable_numerics_check needs a bool, got {value!r}")
    get_default_session().config.numerics_check = value


def seed(value: int) -> None:
    """Seed of variable initialization (flowjob addition; each variable draws from its own stream)."""
    get_default_session().config.seed = _count("seed", value)


def machine_num(count: int) -> None:
    """Machines the job runs on: as many as the world has (``flowjob_core.runtime.world``; one without
    a distributed plugin), or, where ranks stand for machines, fewer whose devices the ranks stand for
    (``can_stand_for``); else an error saying how to start that many."""
    session = get_default_session()
    world = world_of(session)
    if not can_stand_for(world, _count("machine_num", count)):
        raise ConfigError(f"flow.config.machine_num({count}): this program runs on {world.machines} machine(s); start "
                          f"{count} ranks with: python -m oneflow launch -n {count} script.py "
                          f"(pip install \"flowjob[mpi]\")")
    session.config.machine_num = count


def device_num() -> int:
    """Devices per machine the default session's jobs use: ``gpu_device_num`` when asked for (and
    not 0), else ``cpu_device_num``; at least 1 (the rule of mirrored calls)."""
    config = get_default_session().config
    return config.gpu_device_num or config.cpu_device_num or 1


def eager_execution_enabled() -> bool:
    """Legacy ``flow.eager_execution_enabled()``: whether ``flow.enable_eager_execution(True)`` is in force."""
    return eager_mode.enabled()
