"""GPU ranks through NCCL: the rule that picks the gradient path, and a training run on that path with
a double of CuPy and NCCL (workers/fake_nccl.py) that reduces with MPI, compared with one process;
then the same run on real devices where CuPy, NCCL and two devices exist."""
import json
import os
import re
import sys

import numpy as np
import pytest

from flowjob_core import ConfigError
from flowjob_core.testing.modules import sibling
from flowjob_mpi import nccl
from flowjob_mpi.errors import MpiError

ok, ranks = sibling(__file__, "mpirun").ok, sibling(__file__, "mpirun").ranks


# the rule ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("asked, missing, path", [
    ("", ["", ""], "nccl"),                  # every rank can: NCCL
    ("", ["", "CuPy sees no CUDA device"], "mpi"),  # one cannot: the whole world stays on MPI
    ("mpi", ["", ""], "mpi"),                # the override wins
    ("nccl", ["", "", ""], "nccl"),
])
def test_the_world_takes_one_path(asked, missing, path):
    assert nccl.choose(asked, missing) == path


def test_asking_for_nccl_where_a_rank_lacks_it_names_the_rank_and_the_piece():
    with pytest.raises(MpiError, match=r"FLOWJOB_MPI_GRADIENTS=nccl, but rank 1 of 2 cannot use NCCL: "
                                       r"CuPy sees no CUDA device .*FLOWJOB_MPI_GRADIENTS=mpi"):
        nccl.choose("nccl", ["", "CuPy sees no CUDA device"])


def test_the_override_is_read_and_checked(monkeypatch):
    monkeypatch.delenv(nccl.VARIABLE, raising=False)
    assert nccl.requested() == ""
    monkeypatch.setenv(nccl.VARIABLE, " NCCL ")
    assert nccl.requested() == "nccl"
    monkeypatch.setenv(nccl.VARIABLE, "gloo")
    with pytest.raises(ConfigError, match=r"FLOWJOB_MPI_GRADIENTS='gloo': expected one of nccl, mpi"):
        nccl.requested()


class _FakeCupy:
    __version__ = "0.0-test"

    def __init__(self, devices):
        self.cuda = type("cuda", (), {"runtime": type("runtime", (), {"getDeviceCount": staticmethod(devices)})})


def test_the_missing_piece_is_named(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)  # import cupy raises ImportError
    runtime, missing = nccl.load_runtime()
    assert runtime is None and missing.startswith("CuPy cannot be imported") and "flowjob-mpi[nccl]" in missing

    cupy = _FakeCupy(lambda: 2)
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    monkeypatch.setitem(sys.modules, "cupy.cuda", cupy.cuda)  # a cupy.cuda without an nccl attribute
    runtime, missing = nccl.load_runtime()
    assert runtime is None and "has no NCCL binding" in missing

    cupy = _FakeCupy(lambda: 0)
    cupy.cuda.nccl = object()
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    monkeypatch.setitem(sys.modules, "cupy.cuda", cupy.cuda)
    assert nccl.load_runtime() == (None, "CuPy sees no CUDA device")

    cupy.cuda.runtime.getDeviceCount = staticmethod(lambda: 1)
    runtime, missing = nccl.load_runtime()
    assert missing == "" and runtime.cp is cupy and runtime.nccl is cupy.cuda.nccl


# the NCCL path with the double, under mpiexec -------------------------------------------------------

reference = sibling(__file__, "mpirun").reference  # one process's results, the fixture the tests compare with


def _logs(out, n):
    return [json.loads((out / f"nccl{r}.json").read_text()) for r in range(n)]


def _same_as_one_process(out, want):
    got = dict(np.load(out / "result.npz"))
    assert sorted(got) == sorted(want)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=2e-5, atol=2e-6, err_msg=name)


def test_gradients_go_through_nccl_in_the_planned_buckets(tmp_path, reference, monkeypatch):
    monkeypatch.delenv(nccl.VARIABLE, raising=False)
    steps = 3
    ok(ranks(2, "nccl_train.py", "sgd", 10, steps, tmp_path, "rows", 100))  # 100-byte buckets: one per gradient
    _same_as_one_process(tmp_path, reference("sgd", 10, steps, "rows"))
    first, second = (np.load(tmp_path / f"rank{r}.npz") for r in range(2))
    for name in first:
        assert first[name].tobytes() == second[name].tobytes(), name  # bitwise equal on every rank
    logs = _logs(tmp_path, 2)
    assert [d["device"] for d in logs] == [0, 1]  # local rank % device count
    for rank, d in enumerate(logs):
        log = [tuple(x) for x in d["log"]]
        assert (("get_unique_id",) in log) == (rank == 0)  # made on rank 0 only, MPI carries it
        assert ("use", rank, "MainThread") in log and ("use", rank, "probe") in log  # and in later threads
        reduces = [i for i, x in enumerate(log) if x[0] == "allReduce"]
        # hidden weight 6x8, hidden bias 8, out weight 8x4, out bias 4: four buckets a step, in float32
        assert sorted(log[i][1] for i in reduces[:4]) == [4, 8, 32, 48] and len(reduces) == 4 * steps
        (nccl_stream,) = {log[i][3] for i in reduces}
        assert nccl_stream != 0  # not the compute stream
        for i in reduces:
            # ordered after the compute stream: an event recorded there, waited by the NCCL stream
            (_, event, on), (_, waiter, waited) = log[i - 2], log[i - 1]
            assert log[i - 2][0] == "record" and on == 0 and (waiter, waited) == (nccl_stream, event)
            # the sum's own event, recorded on the NCCL stream, waited by the compute stream before the update
            assert log[i + 1][:1] == ("record",) and log[i + 1][2] == nccl_stream
            assert ("wait", 0, log[i + 1][1]) in log[i + 2:]
        # the variable broadcast: one NCCL group of byte broadcasts from rank 0, in chunks (16 bytes here)
        group = log[log.index(("groupStart",)):log.index(("groupEnd",)) + 1]
        assert [x[1] for x in group[1:-1]] == [12, 16, 16, 8, 1]
        assert {(x[0], x[2], x[3], x[4]) for x in group[1:-1]} == {("bcast", "NCCL_UINT8", 0, nccl_stream)}
        assert d["arrays"] == [[0.5] * 3, [0, 1, 2, 3, 4], [True]]


def test_uneven_ranks_share_devices_and_match_one_process(tmp_path, reference, monkeypatch):
    monkeypatch.delenv(nccl.VARIABLE, raising=False)
    monkeypatch.setenv("FAKE_NCCL_DEVICES", "2")
    ok(ranks(3, "nccl_train.py", "adam", 10, 3, tmp_path, "mean"))  # rows 4, 3, 3; one bucket a step
    _same_as_one_process(tmp_path, reference("adam", 10, 3, "mean"))
    logs = _logs(tmp_path, 3)
    assert [d["device"] for d in logs] == [0, 1, 0]
    # each step: the returned mean loss summed over ranks (mpi_allreduce, on the device: flowjob_mpi.nccl_boxing),
    # then one bucket of every gradient
    assert [x[1] for x in logs[2]["log"] if x[0] == "allReduce"] == [1, 48 + 8 + 32 + 4] * 3


def test_the_override_keeps_host_mpi(tmp_path, reference, monkeypatch):
    monkeypatch.setenv(nccl.VARIABLE, "mpi")
    ok(ranks(2, "nccl_train.py", "sgd", 10, 2, tmp_path, "rows"))
    _same_as_one_process(tmp_path, reference("sgd", 10, 2, "rows"))
    for d in _logs(tmp_path, 2):
        assert d["device"] is None and not any(x[0] in ("communicator", "allReduce", "bcast") for x in d["log"])


def test_nccl_asked_for_a_cpu_job_is_an_error_naming_the_node(tmp_path, monkeypatch):
    monkeypatch.setenv(nccl.VARIABLE, "nccl")
    monkeypatch.setenv("FAKE_NCCL_CPU", "0")
    result = ranks(2, "nccl_train.py", "sgd", 10, 2, tmp_path, "rows")
    assert result.returncode != 0
    assert "FLOWJOB_MPI_GRADIENTS=nccl, but this job runs on the numpy backend (device tag 'cpu')" in result.stderr
    # the first collective whose kernel is built: a returned value's all-gather or the first gradient bucket
    assert re.search(r"node '(System-MPI-AllReduce-0|Return_\d+-mpi_allgather)'", result.stderr), result.stderr


def test_nccl_asked_for_without_cupy_stops_every_rank_naming_the_piece(tmp_path, monkeypatch):
    blocker = tmp_path / "no_cupy" / "cupy"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('no CUDA on this test machine')\n")
    paths = [str(blocker.parent), os.environ.get("PYTHONPATH", "")]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in paths if p))
    monkeypatch.setenv(nccl.VARIABLE, "nccl")
    result = ranks(2, "train.py", "sgd", 10, 1, tmp_path, "rows", timeout=40)
    assert result.returncode != 0
    assert "rank 0 of 2 cannot use NCCL: CuPy cannot be imported (no CUDA on this test machine)" in result.stderr


# real devices --------------------------------------------------------------------------------------

def _devices_missing() -> str:
    runtime, missing = nccl.load_runtime()
    if runtime is None:
        return missing
    count = runtime.cp.cuda.runtime.getDeviceCount()
    return "" if count >= 2 else f"2 ranks need 2 CUDA devices (NCCL refuses two ranks on one), CuPy sees {count}"


def test_two_gpu_ranks_match_one_process_through_real_nccl(tmp_path, reference, monkeypatch):
    missing = _devices_missing()
    if missing:
        pytest.skip(f"no NCCL path here: {missing}")
    monkeypatch.setenv(nccl.VARIABLE, "nccl")
    ok(ranks(2, "train.py", "sgd", 10, 3, tmp_path, "rows", 100, timeout=120))
    got = dict(np.load(tmp_path / "result.npz"))
    want = reference("sgd", 10, 3, "rows")
    for name in want:  # GPU kernels against numpy's: float32 rounding, not just summation order
        np.testing.assert_allclose(got[name], want[name], rtol=1e-4, atol=1e-5, err_msg=name)


def test_a_checkpoint_loads_on_every_rank_through_the_nccl_broadcast(tmp_path, monkeypatch):
    monkeypatch.delenv(nccl.VARIABLE, raising=False)
    path, saving, loading, logs = (tmp_path / name for name in ("model", "saving", "loading", "logs"))
    for folder in (saving, loading, logs):
        folder.mkdir()
    monkeypatch.setenv("FAKE_NCCL_LOG", str(logs))
    ok(ranks(2, "with_fake_nccl.py", "ckpt.py", "save", path, saving))
    ok(ranks(3, "with_fake_nccl.py", "ckpt.py", "load", path, loading))  # rank 0 reads; 1 and 2 get it by NCCL
    saved = dict(np.load(saving / "rank0.npz"))
    assert "w" in saved
    for r in range(3):
        got = dict(np.load(loading / f"rank{r}.npz"))
        assert sorted(got) == sorted(saved)
        for name in saved:
            assert got[name].tobytes() == saved[name].tobytes(), (r, name)
        log = [tuple(x) for x in _logs(logs, 3)[r]["log"]]
        casts = [x for x in log if x[0] == "bcast"]
        assert ("groupStart",) in log and casts and {x[3] for x in casts} == {0}
        assert sum(x[1] for x in casts) == sum(a.nbytes for a in saved.values())  # every variable's bytes
