"""Checkpoints of split variables on several ranks (workers/split_ckpt.py): each rank writes its own rows into the
whole ``<name>/out`` file, bytes for bytes what one process writes, and reads only its rows back; rank 0 never holds
a whole split variable meanwhile. Ranks that do not share the folder fall back to a gather onto rank 0; a rank whose
write fails, or that is killed, fails the save on every rank with nothing renamed into place."""
import json
import os

import numpy as np
import pytest

from flowjob_core.testing.modules import sibling

mpirun = sibling(__file__, "mpirun")
ok, ranks = mpirun.ok, mpirun.ranks
NAMES = ("bias", "columns", "table")
ROWS, DIM = 32768, 32


@pytest.fixture(scope="module")
def one_process(tmp_path_factory):
    """The checkpoint one process saves (the same seed: the same variables at any rank count)."""
    out = tmp_path_factory.mktemp("one")
    ok(ranks(0, "split_ckpt.py", "save", out / "model", out, timeout=60))
    return out / "model"


def _same_files(a, b):
    assert sorted(os.listdir(a)) == sorted(os.listdir(b)) == sorted([*NAMES, "snapshot_done"])
    for name in NAMES:
        for kind in ("out", "meta"):
            assert (a / name / kind).read_bytes() == (b / name / kind).read_bytes(), (name, kind)


def _peak(out, rank):
    found = json.loads((out / f"peak{rank}.json").read_text())
    return found["peak"] / found["whole"]


@pytest.mark.parametrize("n", [2, 4])
def test_each_rank_writes_its_rows_into_the_file_one_process_writes(one_process, tmp_path, n):
    result = ok(ranks(n, "split_ckpt.py", "save", tmp_path / "model", tmp_path, timeout=90))
    _same_files(one_process, tmp_path / "model")
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # nothing left beside it
    assert f"each of the {n} ranks wrote its rows of the split variables ['columns', 'table'] into place" \
        in result.stderr
    # rank 0 held its own rows of the table (a copy of one step's values), never the whole
    assert _peak(tmp_path, 0) < 0.75 * 2 / n, _peak(tmp_path, 0)


def test_the_gather_forced_by_the_switch_writes_the_same_bytes(one_process, tmp_path, monkeypatch):
    monkeypatch.setenv("FLOWJOB_CHECKPOINT_SPLIT_SAVE", "gather")
    result = ok(ranks(2, "split_ckpt.py", "save", tmp_path / "model", tmp_path, timeout=60))
    _same_files(one_process, tmp_path / "model")
    assert "rank 0 gathered the split variables ['columns', 'table'] and wrote them " \
        "(FLOWJOB_CHECKPOINT_SPLIT_SAVE=gather on some rank)" in result.stderr
    assert _peak(tmp_path, 0) >= 1.0  # what the rows written in place spare rank 0: the measure sees a whole table


def test_ranks_not_sharing_the_folder_gather_onto_rank_0(one_process, tmp_path):
    result = ok(ranks(2, "split_ckpt.py", "unshared", tmp_path / "model", tmp_path, timeout=60))
    _same_files(one_process, tmp_path / "model")
    assert "rank(s) [1] do not see the folder rank 0 writes (no shared file system)" in result.stderr


def test_a_rank_whose_write_fails_fails_the_save_on_every_rank(one_process, tmp_path):
    ok(ranks(2, "split_ckpt.py", "fail", tmp_path / "model", tmp_path, timeout=60))
    for r in range(2):
        said = (tmp_path / f"error{r}.txt").read_text()
        assert said == (f"saving the checkpoint {str(tmp_path / 'model')!r} failed on rank(s) [1] (rank 1: writing "
                        f"'columns': the file system holding {str(tmp_path)!r} is full); {str(tmp_path / 'model')!r} "
                        f"is unchanged and nothing is left beside it"), said
    _same_files(one_process, tmp_path / "model")  # then saved again, the session usable on every rank


def test_a_rank_killed_while_it_writes_fails_the_save_and_renames_nothing(one_process, tmp_path):
    result = ranks(2, "split_ckpt.py", "kill", tmp_path / "model", tmp_path, timeout=60)
    assert result.returncode != 0
    assert not (tmp_path / "model").exists()
    left = [p.name for p in tmp_path.iterdir() if p.name.startswith(".model.")]
    assert len(left) == 1 and left[0].endswith(".tmp"), left  # the hidden folder: no snapshot_done, not in place
    ok(ranks(0, "split_ckpt.py", "save", tmp_path / "again", tmp_path, timeout=60))  # the next save removes it
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".model.")]


@pytest.mark.parametrize("mode,n", [("load", 0), ("load", 2), ("load", 4), ("load_unshared", 2)])
def test_each_rank_loads_only_its_rows(one_process, tmp_path, mode, n):
    result = ok(ranks(n, "split_ckpt.py", mode, one_process, tmp_path, timeout=90))
    n = max(n, 1)  # 0: one process, which holds the whole of each variable declared split
    table = np.fromfile(one_process / "table" / "out", dtype=np.float32).reshape(ROWS, DIM)
    columns = np.fromfile(one_process / "columns" / "out", dtype=np.float32).reshape(DIM, 8)
    rows, width = ROWS // n, 8 // n
    for r in range(n):
        held = dict(np.load(tmp_path / f"rank{r}.npz"))
        assert held["table"].tobytes() == table[r * rows:(r + 1) * rows].tobytes(), r
        assert held["columns"].tobytes() == columns[:, r * width:(r + 1) * width].tobytes(), r
        assert held["bias"].tobytes() == (one_process / "bias" / "out").read_bytes(), r
    if mode == "load" and n > 1:  # no rank read a whole split variable's file
        # on the emulated device the device's arrays are host memory too: the piece written onto it counts once more
        device_share = 1 if os.environ.get("FLOWJOB_GPU_EMULATION") == "1" else 0
        assert max(_peak(tmp_path, r) for r in range(n)) < (0.75 * 2 + device_share) / n
    elif mode == "load_unshared":
        assert "some ranks do not see its files (no shared file system); rank 0 read each rank's rows" in result.stderr


def test_rank_0_failing_to_read_the_rows_it_sends_fails_the_load_on_every_rank(one_process, tmp_path):
    """Rank 1 does not see the files, so it waits for the rows rank 0 reads for it: a read error there reaches it
    as the same error, never a wait without end."""
    ok(ranks(2, "split_ckpt.py", "load_unshared_fail", one_process, tmp_path, timeout=60))
    for r in range(2):
        said = (tmp_path / f"error{r}.txt").read_text()
        assert said.startswith(f"loading the checkpoint {str(one_process)!r}: rank 0 could not read the rows of "
                               f"variable "), said
        assert "OSError: [Errno 5] Input/output error" in said and "the split variables keep their values" in said
