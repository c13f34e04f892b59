"""Without a launcher the world is this one process and flowjob-mpi changes nothing."""
import os
import sys

import pytest
from flowjob_core import Session
from flowjob_core.errors import ConfigError
from flowjob_core.runtime.world import world_of

from flowjob_mpi import launch
from flowjob_mpi.world import LAUNCHER_VARIABLES, world


@pytest.fixture(autouse=True)
def no_launcher(monkeypatch):
    for name in LAUNCHER_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def test_a_plain_process_is_a_world_of_one():
    w = world()
    assert (w.size, w.rank, w.machines, w.machine_id, w.comm) == (1, 0, 1, 0, None)
    assert w.root_only(lambda: 42) == 42


def test_a_world_of_one_registers_no_op_and_no_pass():
    session = Session()
    try:
        assert world_of(session).size == 1
        assert not any(op.name.startswith("mpi_") for op in session.registries.ops)
        assert not any(p.name.startswith("mpi-") for p in session.registries.passes.ordered())
    finally:
        session.close()


def test_machine_counts_other_than_the_world_name_the_launcher():
    from flowjob_core.api import env
    from flowjob_core.api import flow_config as settings

    with pytest.raises(ConfigError, match=r"lists 2 machine\(s\), but this program runs on 1.*launch -n 2"):
        env.machine([{"addr": "10.0.0.1"}, {"addr": "10.0.0.2"}])
    with pytest.raises(ConfigError, match=r"machine_num\(2\).*launch -n 2"):
        settings.machine_num(2)
    env.machine(["10.0.0.1"])
    settings.machine_num(1)


def test_the_launcher_runs_the_environments_mpiexec():
    line = launch.command(["-n", "3", "train.py", "--epochs", "2"])
    assert line[0] == launch.find_mpiexec() and line[1:3] == ["-n", "3"]
    assert line[3:] == [sys.executable, "train.py", "--epochs", "2"]
    hosts = launch.command(["--hosts", "a,b", "train.py"])
    assert hosts[3:5] == ["-hosts", "a,b"]


def test_the_launcher_refuses_zero_ranks(capsys):
    with pytest.raises(SystemExit):
        launch.command(["-n", "0", "train.py"])
    assert "at least 1 rank" in capsys.readouterr().err


def test_ranks_on_one_machine_share_its_cpus_unless_a_thread_count_is_set():
    clean = {"PATH": "/usr/bin"}
    cpus = len(os.sched_getaffinity(0))
    env = launch.environment(["-n", "2", "train.py"], clean)
    assert env["FLOWJOB_HOST_THREADS"] == str(max(1, cpus // 2)) and env["PATH"] == "/usr/bin"
    assert launch.environment(["-n", "64", "train.py"], clean)["FLOWJOB_HOST_THREADS"] == str(max(1, cpus // 64))
    assert "FLOWJOB_HOST_THREADS" not in launch.environment(["-n", "2", "train.py"], clean | {"OMP_NUM_THREADS": "1"})
    assert "FLOWJOB_HOST_THREADS" not in launch.environment(["--hosts", "a,b", "train.py"], clean)
