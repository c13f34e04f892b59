"""Legacy's placements on the ranks (``flowjob_mpi.placements``): the mapping of ``"machine:devices"`` onto ranks,
and, under ``mpiexec -n 2`` / ``python -m oneflow launch -n 2``, ops placed on some of the ranks running there only
with one process's results."""
import subprocess
import sys

import numpy as np
import pytest

from flowjob_core.testing.modules import sibling
from flowjob_mpi.launch import find_mpiexec
from flowjob_mpi.placements import Grid, grid

ok, ranks = sibling(__file__, "mpirun").ok, sibling(__file__, "mpirun").ranks


@pytest.mark.parametrize("world, devices, machines, want", [
    # (ranks, hosts), devices per machine, machines flow.env.machine lists -> (machines, devices per rank)
    ((2, 1), 1, 0, (2, 1)),   # mpiexec -n 2, one device each: the ranks stand for machines
    ((2, 1), 2, 0, (1, 1)),   # gpu_device_num(2) on 2 ranks: one machine, a rank per device
    ((1, 1), 2, 0, (1, 2)),   # cpu_device_num(2) in one process: both devices are the process's
    ((2, 1), 4, 0, (1, 2)),   # 4 devices on 2 ranks: 2 devices per rank
    ((4, 1), 2, 0, (2, 1)),   # 4 ranks, 2 devices per machine: 2 machines
    ((4, 2), 2, 0, (2, 1)),   # 2 hosts of 2 ranks
    ((2, 1), 2, 2, (2, 2)),   # flow.env.machine lists 2 machines of 2 devices: a rank per machine
])
def test_the_world_stands_for_the_program_s_machines_and_devices(world, devices, machines, want):
    g = grid(*world, devices, machines)
    assert (g.machines, g.devices_per_rank) == want


def test_a_placement_names_the_ranks_holding_its_devices():
    two_devices = grid(2, 1, 2)
    assert two_devices.ranks_of(["0:0"]) == (0,) and two_devices.ranks_of(["0:1"]) == (1,)
    assert two_devices.ranks_of(["0:0-1"]) == (0, 1)
    one_each = grid(2, 1, 1)
    assert one_each.ranks_of(["1:0"]) == (1,) and one_each.ranks_of(["0:0", "1:0"]) == (0, 1)
    four_on_two = grid(2, 1, 4)
    assert four_on_two.ranks_of(["0:0-1"]) == (0,) and four_on_two.ranks_of(["0:1-2"]) == (0, 1)
    assert four_on_two.ranks_of(["0:3"]) == (1,)
    assert Grid(2, 2, 4).ranks_of(["1:0-1"]) == (2, 3)  # 2 hosts of 2 ranks: machine 1 is ranks 2 and 3


def test_on_several_hosts_a_machine_s_devices_are_the_ranks_its_host_runs():
    dealt = grid(4, 2, 2, rank_hosts=(0, 1, 0, 1))  # a launcher dealing the ranks out to the hosts in turn
    assert dealt.ranks_of(["0:0-1"]) == (0, 2) and dealt.ranks_of(["1:1"]) == (3,)
    assert grid(4, 2, 2, rank_hosts=(0, 0, 1, 1)).ranks_of(["1:0"]) == (2,)
    assert grid(2, 2, 4, rank_hosts=(1, 0)[::-1]).ranks_of(["1:2-3"]) == (1,)  # 2 devices per rank
    with pytest.raises(ValueError, match=r"the hosts run different numbers of ranks \(\[3, 1\]\)"):
        grid(4, 2, 2, rank_hosts=(0, 0, 0, 1))


@pytest.mark.parametrize("ids, match", [
    ("0:2", r"'0:2' names device 2 of machine 0, but each machine has 2 device\(s\) "
            r"\(flow.config.gpu_device_num\(2\); 2 rank\(s\) stand for 1 machine\(s\) x 2 device\(s\)"),
    ("1:0", r"'1:0' names machine 1, but the program has 1 machine\(s\)"),
    ("0:1-0", "its device range 1-0 is empty"),
    ("zero", "is not a machine:devices string"),
])
def test_a_placement_naming_devices_the_program_lacks_is_refused(ids, match):
    with pytest.raises(ValueError, match=match):
        grid(2, 1, 2, counted_by="gpu_device_num").ranks_of([ids])


@pytest.mark.parametrize("world, devices, machines", [((2, 1), 3, 0), ((3, 1), 2, 0), ((2, 1), 1, 3)])
def test_device_counts_the_ranks_cannot_hold_are_refused(world, devices, machines):
    with pytest.raises(ValueError, match="do not lie evenly on"):
        grid(*world, devices, machines)


@pytest.mark.parametrize("launcher", ["mpiexec", "launch"])
def test_a_two_stage_program_on_0_0_and_0_1_trains_like_one_process(tmp_path, launcher):
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    ok(ranks(0, "placed_stages.py", "pipeline", one, 3, timeout=60))
    ok(ranks(2, "placed_stages.py", "pipeline", two, 3, timeout=120, launcher=launcher))
    want = dict(np.load(one / "result0.npz"))
    for r in range(2):
        got = dict(np.load(two / f"result{r}.npz"))
        assert sorted(got) == sorted(want)
        for name in want:
            np.testing.assert_allclose(got[name], want[name], rtol=1e-6, atol=1e-7, err_msg=f"rank {r}: {name}")
    first, second = (two / "rank0.txt").read_text(), (two / "rank1.txt").read_text()
    # stage 1 (its forward and backward) on rank 0 only, stage 2 and the loss on rank 1 only
    assert "on 0:0 (rank 0) = matmul_bias(Input_0/out, stage1-weight/out" in first, first
    assert "stage2-weight/out, stage2-bias/out" not in first.split("nodes:")[1].split("optim_")[0], first
    assert "on 0:0 (rank 0) = relu_grad(" in first, first
    assert "on 0:1 (rank 1) = matmul_bias(stage1_activation/out_0, stage2-weight/out" in second, second
    assert "on 0:1 (rank 1) = sparse_softmax_cross_entropy(" in second, second
    assert "stage1-weight/out, stage1-bias/out)" not in second.split("nodes:")[1].split("optim_")[0], second
    # the activation goes forward, its gradient back; the variables' gradients to the other rank's copy
    assert "effect! mpi_send(stage1_activation/out_0) {reader='stage2_matmul', tag=0, to=[1]} on rank 0" in first
    assert "stage1_activation/out_0: (8, 5):float32 on rank 1 = mpi_recv() {dtype='float32'" in second
    assert "source=1" in first and "mpi_send(stage2_matmul_grad/out_0)" in second
    # every rank holds and updates every variable
    assert "variable stage2-weight: (4, 5):float32  init RandomNormal(seed=None, mean=0.0, stddev=0.3) on 0:1 " \
           "(ranks 0-1)" in first, first


def test_ops_placed_on_one_rank_of_two_run_there_only_and_every_rank_gets_the_result(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    ok(ranks(0, "placed_stages.py", "subset", one, timeout=60))
    ok(ranks(2, "placed_stages.py", "subset", two, timeout=60))
    want = np.load(one / "rank0.npy")
    for r in range(2):
        np.testing.assert_allclose(np.load(two / f"rank{r}.npy"), want, rtol=1e-6)
    first, second = (two / "rank0.txt").read_text(), (two / "rank1.txt").read_text()
    assert "tanh" in first and "tanh" not in second, (first, second)  # "0:0": rank 0
    assert "on 1:0 (rank 1) = square(" in second and "= square(" not in first, (first, second)  # "1:0": rank 1
    assert "on ranks 0-1 = add(" in first and "on ranks 0-1 = add(" in second  # unplaced: every rank


def test_a_placement_naming_a_device_the_program_lacks_is_an_error_naming_job_and_placement(tmp_path):
    result = ranks(2, "placed_stages.py", "missing", tmp_path, timeout=60)
    assert result.returncode != 0
    assert ("PlacementError: global function 'wrong_job', placement ('cpu', '0:2') of op 'placed_relu' (relu) at "
            in result.stderr), result.stderr
    assert ("'0:2' names device 2 of machine 0, but each machine has 2 device(s) (flow.config.cpu_device_num(2); "
            "2 rank(s) stand for 1 machine(s) x 2 device(s), 1 device(s) per rank)") in result.stderr, result.stderr


def test_device_counts_that_disagree_with_the_world_are_an_error_naming_job_and_placement(tmp_path):
    result = ranks(2, "placed_stages.py", "counts", tmp_path, timeout=60)
    assert result.returncode != 0
    assert "PlacementError: global function 'wrong_job', placement ('cpu', '0:0') of op 'placed_relu'" \
        in result.stderr, result.stderr
    assert ("1 machine(s) x 3 device(s) (flow.config.cpu_device_num(3)) do not lie evenly on 2 rank(s)"
            in result.stderr), result.stderr


def test_ranks_running_different_placed_jobs_stop_together_naming_what_each_ran(tmp_path):
    result = ranks(2, "placed_stages.py", "mismatch", tmp_path, timeout=60)
    assert result.returncode != 0
    assert "RankMismatchError: the ranks of a data-parallel step run different things (rank 0: job 'first_job' " \
           "step 1" in result.stderr, result.stderr
    assert "rank 1: job 'second_job' step 1" in result.stderr, result.stderr


def test_a_placed_job_with_a_mirrored_argument_is_an_error_naming_job_placement_and_argument(tmp_path):
    result = ranks(2, "placed_stages.py", "mirrored", tmp_path, timeout=60)
    assert result.returncode != 0
    assert ("PlacementError: global function 'mirrored_job', placement ('cpu', '1:0') of op " in result.stderr
            and "runs on ranks [1] of 2, and arguments ['x'] are mirrored" in result.stderr), result.stderr


def _dump_command() -> list[str]:
    script = sibling(__file__, "mpirun").WORKERS / "placed_script.py"
    return [sys.executable, "-m", "oneflow", "dump", str(script), "--after", "all"]


def test_oneflow_dump_shows_each_node_s_placement_and_on_two_ranks_its_ranks(tmp_path):
    run = subprocess.run(_dump_command(), cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    one = run.stdout
    # one process: the placements (fused nodes keep theirs); both devices are the process's
    assert "stage1_activation/out_0: (8, 5):float32 on 0:0 = matmul_bias(" in one, one
    assert "on 0:1 = sparse_softmax_cross_entropy(" in one and "mpi_send" not in one, one
    # rank 0's job, printed into a file of its own (PMI_RANK: set by MPICH's launcher for each rank)
    each = " ".join(f'"{part}"' for part in _dump_command())
    run = subprocess.run([find_mpiexec(), "-n", "2", "sh", "-c", f'exec {each} > "dump.$PMI_RANK.txt"'],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    two = (tmp_path / "dump.0.txt").read_text()  # rank 0's (what rank 1 runs: the two-stage test above)
    assert "stage1_activation/out_0: (8, 5):float32 on 0:0 (rank 0) = matmul_bias(" in two, two
    assert "on 0:0 (rank 0) = relu_grad(" in two, two
    assert "effect! mpi_send(stage1_activation/out_0) {reader='stage2_matmul', tag=0, to=[1]} @gpu on rank 0" in two
    assert "effect! Return_2/out_0: (8,):float32 on ranks 0-1 = return(loss/out_0)" in two, two
    assert "sparse_softmax_cross_entropy(" not in two, two  # stage 2 is rank 1's


def test_four_devices_on_two_ranks_keep_legacy_s_counts_and_split_a_table_in_two(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    ok(ranks(0, "placed_stages.py", "four_devices", one, timeout=60))
    ok(ranks(2, "placed_stages.py", "four_devices", two, timeout=60))
    want = dict(np.load(one / "rank0.npz"))
    assert list(want["held"]) == [8, 3]  # one process: its four devices compute as one, on the whole table
    for r in range(2):
        got = dict(np.load(two / f"rank{r}.npz"))
        np.testing.assert_allclose(got["got"], want["got"], rtol=1e-6)
        assert list(got["held"]) == [4, 3]  # a piece per rank, not per device
        for results in (want, got):  # what programs read: the placement's four devices
            assert int(results["parallel_size"]) == 4 and int(results["parallel_num"]) == 4
            assert list(results["device_name"]) == ["0:0-3"]
    assert "variable table: (4, 3):float32 S(0)" in (two / "rank0.txt").read_text()
    assert "on 0:0-3 (ranks 0-1)" in (two / "rank0.txt").read_text()


def test_a_placed_job_that_splits_a_variable_over_every_rank_is_an_error_naming_job_placement_and_blobs(tmp_path):
    result = ranks(2, "placed_stages.py", "split", tmp_path, timeout=60)
    assert result.returncode != 0
    assert ("PlacementError: global function 'split_job', placement ('cpu', '0:0') of op 'placed_gather' (gather)"
            in result.stderr), result.stderr
    assert ("runs on ranks [0] of 2, and the job declares blobs split or partial over every rank (['table/out'])"
            in result.stderr), result.stderr
