"""A failing rank ends every rank within seconds, with an error naming it; never a hang."""
import os
import signal
import subprocess
import sys
import time

import pytest
from flowjob_core.testing.modules import sibling

mpirun = sibling(__file__, "mpirun")
ranks, ok = mpirun.ranks, mpirun.ok


def test_a_rank_that_raises_stops_every_rank():
    start = time.monotonic()
    result = ranks(2, "fault.py", "raise", timeout=30)
    took = time.monotonic() - start
    assert result.returncode != 0
    assert "rank 1 of 2 raised ValueError: failing on purpose at step 2" in result.stderr
    assert "aborting all 2 ranks" in result.stderr
    assert took < 15, f"took {took:.1f} s"


def test_a_killed_rank_stops_every_rank():
    start = time.monotonic()
    result = ranks(2, "fault.py", "kill", timeout=30)
    assert result.returncode != 0
    assert time.monotonic() - start < 15
    assert "KILLED" in result.stdout + result.stderr or "signal 9" in result.stdout + result.stderr


def test_a_rank_that_leaves_early_ends_the_ranks_waiting_for_it():
    start = time.monotonic()
    result = ranks(2, "fault.py", "exit", timeout=30)
    assert result.returncode != 0
    assert time.monotonic() - start < 15
    both = result.stdout + result.stderr
    # rank 0's watchdog names the collective, unless the launcher, seeing rank 1's status, ended it first
    named = "rank 0 of 2 has waited in the all-" in both and "after rank(s) [1] ended" in both
    assert named or "EXIT CODE: 3" in both


@pytest.mark.parametrize("n", [2, 3])
def test_machines_matching_the_world_run(n):
    result = ranks(n, "machines.py", n, timeout=30)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["132.0"]  # the global result, printed by rank 0 alone


def test_machines_not_matching_the_world_fail_naming_the_launcher():
    result = ranks(2, "machines.py", 3, timeout=30)
    assert result.returncode != 0
    assert "flow.env.machine lists 3 machine(s), but this program runs on 2" in result.stderr
    assert "python -m oneflow launch -n 3" in result.stderr


@pytest.mark.parametrize("gradients", ["same", "different"])
def test_ranks_running_different_jobs_stop_naming_each_job(gradients):
    result = ranks(2, "jobs.py", gradients, timeout=60)
    assert result.returncode != 0
    assert "trained" not in result.stdout
    both = result.stdout + result.stderr
    assert "RankMismatchError" in both
    assert "rank 0: job 'train_a' step 1" in both and "rank 1: job 'train_b' step 1" in both
    assert "Message truncated" not in both  # stopped by the check, before a collective of mismatched sizes


def test_a_rank_running_its_job_once_more_is_named():
    # the steps pair up in the order the ranks run them, so the extra one is the last: rank 0 waits alone
    result = ranks(2, "jobs_steps.py", timeout=60)
    assert result.returncode != 0
    both = result.stdout + result.stderr
    named = "waited in the all-gather checking that every rank runs step 4 of job 'train'" in both
    assert named or "EXIT CODE" in both or "aborting all 2 ranks" in both


def test_debug_mode_names_an_argument_fed_differently_by_the_ranks():
    result = ranks(2, "feeds.py", "debug", timeout=60)
    assert result.returncode != 0
    both = result.stdout + result.stderr
    assert "global function 'train', argument 'images': the ranks fed different arrays at step 1" in both
    assert "argument 'labels'" not in both  # fed alike


def test_ranks_feeding_different_batches_are_named_by_default(monkeypatch):
    monkeypatch.delenv("FLOWJOB_MPI_FEED_CHECK", raising=False)
    result = ranks(2, "feeds.py", "plain", timeout=60)
    assert result.returncode != 0
    assert "trained" not in result.stdout
    both = result.stdout + result.stderr
    assert ("global function 'train', argument 'images': the ranks fed different arrays at step 1: rank(s) [1] fed "
            "other arrays than rank 0 (rank 0: float32(4, 3):") in both
    assert "; rank 1: float32(4, 3):" in both
    assert "argument 'labels'" not in both  # fed alike


def test_the_feed_check_switched_off_lets_each_rank_train_on_its_rows(monkeypatch):
    monkeypatch.setenv("FLOWJOB_MPI_FEED_CHECK", "0")
    assert ok(ranks(2, "feeds.py", "plain", timeout=60)).stdout.split() == ["rank", "0", "trained"]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_ranks_whose_launcher_is_killed_outright_end_themselves(tmp_path):
    # the process that started the ranks (hydra's proxy under mpiexec) killed with SIGKILL can end no rank, and rank
    # 0 blocked in a collective would spin on its core for ever: each rank's watchdog sees its parent gone and ends
    launcher = subprocess.Popen([mpirun.find_mpiexec(), "-n", "2", sys.executable, str(mpirun.WORKERS / "orphan.py"),
                                 str(tmp_path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
    started: list[tuple[int, int]] = []  # (rank's process, its parent)
    try:
        deadline = time.monotonic() + 60
        while len(started) < 2 and time.monotonic() < deadline:
            started = [tuple(map(int, p.read_text().split())) for p in sorted(tmp_path.glob("rank*.pid"))]
            time.sleep(0.1)
        assert len(started) == 2, "the ranks did not start"
        pids = [pid for pid, _ in started]
        time.sleep(0.5)  # rank 0 is in its barrier
        for parent in {parent for _, parent in started}:
            os.kill(parent, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(_alive(pid) for pid in pids), "a rank outlived its launcher"
    finally:
        try:
            os.killpg(launcher.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
