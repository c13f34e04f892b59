"""Ops placed on some of the ranks, on GPU ranks: the two-stage program of packages/mpi/tests/test_placements.py with
its stages in ``flow.scope.placement("gpu", ...)`` on flowjob-gpu's backend (its emulated CuPy: device arrays the
sends copy to the host and the receives back) trains on 2 ranks with one process's losses and variables."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from flowjob_mpi.launch import find_mpiexec

WORKER = Path(__file__).resolve().parents[1] / "packages" / "mpi" / "tests" / "workers" / "placed_stages.py"


def _train(out: Path, ranks: int) -> None:
    out.mkdir()
    command = [sys.executable, str(WORKER), "pipeline", str(out), "2", "gpu"]
    if ranks:
        command = [find_mpiexec(), "-n", str(ranks), *command]
    run = subprocess.run(command, capture_output=True, text=True, timeout=240,
                         env=dict(os.environ, FLOWJOB_GPU_EMULATION="1", PYTHONUNBUFFERED="1"))
    assert run.returncode == 0, f"{run.stdout}\n{run.stderr}"


def test_a_two_stage_program_on_gpu_ranks_trains_like_one_process(tmp_path):
    _train(tmp_path / "one", 0)
    _train(tmp_path / "two", 2)
    want = dict(np.load(tmp_path / "one" / "result0.npz"))
    for r in range(2):
        assert (tmp_path / "two" / f"backend{r}.txt").read_text() == "gpu"
        got = dict(np.load(tmp_path / "two" / f"result{r}.npz"))
        for name in want:
            np.testing.assert_allclose(got[name], want[name], rtol=1e-6, atol=1e-7, err_msg=f"rank {r}: {name}")
    plan = (tmp_path / "two" / "rank0.txt").read_text()
    assert "effect! mpi_send(stage1_activation/out_0) {reader='stage2_matmul', tag=0, to=[1]} @gpu on rank 0" in plan
