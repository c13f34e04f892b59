"""Legacy ``flow.env.*``: the process environment of a OneFlow run.

Legacy OneFlow configured its C++ runtime here (machines, ports, glog). In flowjob one process is the
whole run, so the network and glog settings are checked and recorded (``python -m oneflow info``
shows them, like the no-effect ``flow.config`` options); ``log_dir`` takes effect: the ``flowjob``
loggers write the run's log into that folder (``flowjob_core.runtime.run_log``). ``machine`` keeps the list
it was given (:func:`machines`) for the multi-process launcher to check.
"""
from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Any

from flowjob_core.errors import ConfigError
from flowjob_core.config.options import record
from flowjob_core.runtime.run_log import open_run_log
from flowjob_core.runtime.session import get_default_session
from flowjob_core.runtime.world import can_stand_for, world_of

NETWORK = "the legacy runtime's network between machines (one process here)"
GLOG = "the legacy runtime's C++ logging (glog)"

_lock = threading.Lock()
_machines: list[dict[str, Any]] = []
_initialized = False


def _int(name: str, value: Any, minimum: int = 0) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ConfigError(f"flow.env.{name} expects an int >= {minimum}, got {value!r}")
    return value


def _machine(entry: Any, index: int) -> dict[str, Any]:
    if isinstance(entry, str):
        return {"addr": entry}
    if isinstance(entry, dict):
        unknown = set(entry) - {"addr", "ctrl_port_agent", "data_port_agent"}
        if unknown or not isinstance(entry.get("addr", ""), str):
            raise ConfigError(f"flow.env.machine: entry {index} {entry!r} must be an address or a dict of "
                              "'addr' (str), 'ctrl_port_agent', 'data_port_agent'")
        return dict(entry)
    raise ConfigError(f"flow.env.machine: entry {index} must be an address (str) or a dict, got {entry!r}")


def machine(*val: Any) -> None:
    """The machines of the run, the first one the master: one list or several arguments, each an
    address or ``{"addr": ..., "ctrl_port_agent": ..., "data_port_agent": ...}`` (legacy layout)."""
    entries: Any = val[0] if len(val) == 1 and isinstance(val[0], (list, tuple)) else val
    if isinstance(entries, str):
        entries = [entries]
    nodes = [_machine(entry, i) for i, entry in enumerate(entries)]
    addrs = [node.get("addr", "") for node in nodes]
    repeated = sorted({a for a in addrs if addrs.count(a) > 1})
    if repeated:
        raise ConfigError(f"flow.env.machine: address {repeated[0]!r} is listed more than once")
    _check_world(len(nodes))
    with _lock:
        _machines[:] = nodes
    record("flow.env.machine", nodes, NETWORK)


def _check_world(count: int) -> None:
    """The machines listed must be the world's (``flowjob_core.runtime.world``: the MPI ranks' hosts, or its
    ranks on one host; this process alone without a distributed plugin), or fewer whose devices its ranks stand
    for (``can_stand_for``): the same script runs on each rank."""
    world = world_of(get_default_session())
    machines = world.machines
    if not can_stand_for(world, count):
        raise ConfigError(f"flow.env.machine lists {count} machine(s), but this program runs on {machines}: "
                          f"start one rank per machine with: python -m oneflow launch -n {count} script.py "
                          f"(or mpiexec -n {count} -hosts ... python script.py; pip install \"flowjob[mpi]\")")


def machines() -> list[dict[str, Any]]:
    """What :func:`machine` was given last (empty: the legacy default, this machine alone)."""
    with _lock:
        return [dict(node) for node in _machines]


def ctrl_port(val: int) -> None:
    """Legacy: the control port shared by the machines. Checked and recorded."""
    record("flow.env.ctrl_port", _int("ctrl_port", val, 1), NETWORK)


def data_port(val: int) -> None:
    """Legacy: the data-transfer port shared by the machines. Checked and recorded."""
    record("flow.env.data_port", _int("data_port", val, 1), NETWORK)


def master_host(host: str) -> None:
    if not isinstance(host, str):
        raise ConfigError(f"flow.env.master_host expects an address (str), got {host!r}")
    record("flow.env.master_host", host, NETWORK)


def master_port(val: int) -> None:
    record("flow.env.master_port", _int("master_port", val, 1), NETWORK)


def world_size(val: int) -> None:
    record("flow.env.world_size", _int("world_size", val, 1), NETWORK)


def grpc_use_no_signal(val: bool = True) -> None:
    """Legacy (deprecated there too): whether gRPC used signals. Checked and recorded."""
    if not isinstance(val, bool):
        raise ConfigError(f"flow.env.grpc_use_no_signal expects a bool, got {val!r}")
    record("flow.env.grpc_use_no_signal", val, NETWORK)


def logtostderr(val: int) -> None:
    """Legacy glog flag (log to stderr instead of files). Recorded: Python logging's own handlers decide."""
    record("flow.env.logtostderr", _int("logtostderr", val), GLOG)


def logbuflevel(val: int) -> None:
    """Legacy glog flag (levels buffered before writing). Recorded: the run log is flushed per record."""
    record("flow.env.logbuflevel", _int("logbuflevel", val, -1), GLOG)


def log_dir(val: str | os.PathLike[str]) -> None:
    """Write the run's log (the ``flowjob`` loggers, INFO and above) into folder ``val``, created if
    missing; a later call moves the log to the new folder."""
    if not isinstance(val, (str, os.PathLike)):
        raise ConfigError(f"flow.env.log_dir expects a folder path (str), got {val!r}")
    open_run_log(os.fspath(val))


def init_bootstrap_confs(rank_host_list: Any, master_port: int, world_size: int = 0, ctrl_port: int = -1) -> None:
    """Legacy (its CI only): the ranks' hosts and the master port. Checked and recorded."""
    hosts = [rank_host_list] if isinstance(rank_host_list, str) else list(rank_host_list)
    if not hosts or not all(isinstance(h, str) for h in hosts):
        raise ConfigError(f"flow.env.init_bootstrap_confs: rank_host_list must be addresses, got {rank_host_list!r}")
    _int("init_bootstrap_confs master_port", master_port, 1)
    if _int("init_bootstrap_confs world_size", world_size) % len(hosts):
        raise ConfigError(f"flow.env.init_bootstrap_confs: world_size {world_size} is not a multiple of "
                          f"{len(hosts)} hosts")
    record("flow.env.init_bootstrap_confs", {"rank_host_list": hosts, "master_port": master_port,
                                             "world_size": world_size or len(hosts), "ctrl_port": ctrl_port},
           NETWORK)


def init() -> bool:
    """Legacy: start the runtime. True the first time, False afterwards (it was already started)."""
    global _initialized
    with _lock:
        first, _initialized = not _initialized, True
    return first


@dataclass(frozen=True)
class Resource:
    """What legacy's ``current_resource()`` reported (its ``Resource`` message), for this process."""

    machine_num: int
    gpu_device_num: int
    cpu_device_num: int


def current_resource() -> Resource:
    config = get_default_session().config
    return Resource(machine_num=max(1, len(machines())), gpu_device_num=config.gpu_device_num or 0,
                    cpu_device_num=config.cpu_device_num or 0)


__all__ = ["Resource", "ctrl_port", "current_resource", "data_port", "grpc_use_no_signal", "init",
           "init_bootstrap_confs", "log_dir", "logbuflevel", "logtostderr", "machine", "machines", "master_host",
           "master_port", "world_size"]
