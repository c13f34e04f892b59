"""Checkpoints with flowjob-core alone: layout, round trips, and the errors legacy turned into aborts."""
import os

import numpy as np
import pytest

from flowjob_core import BlobSpec, CheckpointError, JobFunction, VariableError, get_variable
from flowjob_core.checkpoint import save_load as ckpt
from flowjob_core.checkpoint.layout import parse_meta
from flowjob_core.checkpoint.session_checkpoint import CheckPoint, SimpleCheckPointManager

SPECS = {
    "conv1-weight": BlobSpec((2, 1, 3, 3), np.float32),
    "dense-bias": BlobSpec((5,), np.float64),
    "System-Train-TrainStep-train_job": BlobSpec((1,), np.int64),
    "half": BlobSpec((3,), np.float16),
    "bytes": BlobSpec((2, 2), np.uint8),
    "small": BlobSpec((4,), np.int8),
    "ints": BlobSpec((2,), np.int32),
    "scalar": BlobSpec((), np.float32),
}


def random_init(shape, dtype, rng):
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    return rng.integers(0, 100, shape).astype(dtype)


@pytest.fixture
def store(session):
    for name, spec in SPECS.items():
        session.variables.declare(name, spec, random_init)
    return session.variables


def scramble(store):
    for name in store.names():
        store.assign(name, np.zeros(store[name].spec.shape, store[name].spec.dtype) + 7)


def snapshot(store):
    return {name: store.get(name) for name in store.names()}


def assert_same(a, b):
    assert a.keys() == b.keys()
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)
        assert a[name].dtype == b[name].dtype


def test_save_writes_the_legacy_layout(session, store, tmp_path):
    path = tmp_path / "model"
    CheckPoint(session).save(str(path))
    assert sorted(os.listdir(path)) == sorted(list(SPECS) + ["snapshot_done"])
    assert (path / "snapshot_done").read_bytes() == b""
    for name, spec in SPECS.items():
        raw = (path / name / "out").read_bytes()
        assert raw == np.ascontiguousarray(store.get(name)).tobytes()
        assert len(raw) == spec.nbytes
    assert (path / "conv1-weight" / "meta").read_text() == (
        "shape {\n  dim: 2\n  dim: 1\n  dim: 3\n  dim: 3\n}\ndata_type: kFloat\n")
    assert (path / "scalar" / "meta").read_text() == "shape {\n}\ndata_type: kFloat\n"
    metas = {n: (path / n / "meta").read_text().split("data_type: ")[1].strip() for n in SPECS}
    assert metas == {"conv1-weight": "kFloat", "dense-bias": "kDouble", "System-Train-TrainStep-train_job": "kInt64",
                     "half": "kFloat16", "bytes": "kUInt8", "small": "kInt8", "ints": "kInt32", "scalar": "kFloat"}
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".")], "no temporary folder left behind"


def test_round_trip_restores_every_dtype(session, store, tmp_path):
    before = snapshot(store)
    ckpt.save(tmp_path / "m", session)
    scramble(store)
    CheckPoint(session).load(tmp_path / "m")
    assert_same(snapshot(store), before)


def test_get_and_load_variables(session, store, tmp_path):
    before = snapshot(store)
    ckpt.save(tmp_path / "m", session)
    values = ckpt.get(tmp_path / "m")
    assert_same(values, before)
    scramble(store)
    ckpt.load_variables(values, session=session)
    assert_same(snapshot(store), before)


def test_load_variables_checks_everything_before_assigning(session, store):
    before = snapshot(store)
    with pytest.raises(VariableError, match="no variable named 'nope'"):
        ckpt.load_variables({"dense-bias": np.ones(5), "nope": np.ones(1)}, ignore_mismatch=False, session=session)
    with pytest.raises(VariableError, match="'dense-bias' is \\(5,\\) float64, the value is \\(4,\\)"):
        ckpt.load_variables({"ints": np.ones(2, np.int32), "dense-bias": np.ones(4)}, session=session)
    with pytest.raises(VariableError, match="'ints' is"):  # ignore_mismatch is about names only, as legacy
        ckpt.load_variables({"dense-bias": np.ones(5), "ints": np.ones(3)}, session=session)
    assert_same(snapshot(store), before)
    ckpt.load_variables({"dense-bias": np.ones(5), "nope": 1}, session=session)  # legacy default: skipped
    np.testing.assert_array_equal(store.get("dense-bias"), np.ones(5))
    np.testing.assert_array_equal(store.get("ints"), before["ints"])


def test_non_empty_folder_is_refused_and_left_untouched(session, store, tmp_path):
    target = tmp_path / "taken"
    target.mkdir()
    (target / "keep.txt").write_text("mine")
    with pytest.raises(CheckpointError, match="taken.*not empty"):
        ckpt.save(target, session)
    assert os.listdir(target) == ["keep.txt"]
    assert sorted(os.listdir(tmp_path)) == ["taken"]


def test_empty_existing_folder_is_replaced(session, store, tmp_path):
    target = tmp_path / "empty"
    target.mkdir()
    ckpt.save(target, session)
    assert (target / "snapshot_done").is_file()


def test_a_file_in_the_way_is_refused(session, store, tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(CheckpointError, match="not a folder"):
        ckpt.save(tmp_path / "file", session)


@pytest.mark.parametrize("broken", ["replace", "midway"])
def test_interrupted_save_leaves_nothing(session, store, tmp_path, monkeypatch, broken):
    def boom(*args, **kwargs):
        raise OSError("disk full")

    if broken == "replace":
        monkeypatch.setattr(os, "replace", boom)
        monkeypatch.setattr(os, "rename", boom)
    else:  # the fifth file write fails: some variables are already written
        real_fsync, calls = os.fsync, []

        def flaky_fsync(fd):
            calls.append(fd)
            if len(calls) == 5:
                boom()
            real_fsync(fd)

        monkeypatch.setattr(os, "fsync", flaky_fsync)
    with pytest.raises(CheckpointError, match="disk full"):
        ckpt.save(tmp_path / "m", session)
    assert os.listdir(tmp_path) == []


def test_missing_variable_is_reported_and_initialized(session, store, tmp_path):
    ckpt.save(tmp_path / "m", session)
    session.variables.declare("late", BlobSpec((3,), np.float32), lambda s, d, r: np.full(s, 5.0, d))
    store.assign("late", np.zeros(3, np.float32))
    expected = os.path.join(str(tmp_path / "m"), "late", "out")
    with pytest.warns(ckpt.CheckpointWarning) as caught:
        ckpt.load(tmp_path / "m", session)
    assert [str(w.message) for w in caught] == [
        f"checkpoint {str(tmp_path / 'm')!r} has no variable 'late' ({expected}); it is initialized"]
    np.testing.assert_array_equal(store.get("late"), np.full(3, 5.0, np.float32))
    store.assign("late", np.zeros(3, np.float32))
    with pytest.raises(CheckpointError, match="lacks 1 of this session's variables \\(strict=True\\): 'late'"):
        CheckPoint(session).load(tmp_path / "m", strict=True)
    np.testing.assert_array_equal(store.get("late"), np.zeros(3, np.float32))  # nothing assigned


def corrupt(path, name, data):
    (path / name / "out").write_bytes(data)


@pytest.mark.parametrize("how", ["truncated", "longer"])
def test_wrong_file_size_is_an_error_and_nothing_changes(session, store, tmp_path, how):
    ckpt.save(tmp_path / "m", session)
    raw = (tmp_path / "m" / "dense-bias" / "out").read_bytes()
    corrupt(tmp_path / "m", "dense-bias", raw[:-3] if how == "truncated" else raw + b"xx")
    scramble(store)
    before = snapshot(store)
    size = len(raw) - 3 if how == "truncated" else len(raw) + 2
    with pytest.raises(CheckpointError, match=f"'dense-bias'.* has {size} bytes, expected 40"):
        ckpt.load(tmp_path / "m", session)
    assert_same(snapshot(store), before)


def test_meta_that_disagrees_is_an_error(session, store, tmp_path):
    ckpt.save(tmp_path / "m", session)
    (tmp_path / "m" / "ints" / "meta").write_text("shape { dim: 1 }\ndata_type: kInt64\n")
    with pytest.raises(CheckpointError, match="'ints'.*shape \\(2,\\) int32.*shape \\(1,\\) int64"):
        ckpt.load(tmp_path / "m", session)


def test_checkpoint_without_meta_loads_by_size(session, store, tmp_path):
    before = snapshot(store)
    ckpt.save(tmp_path / "m", session)
    for name in SPECS:
        os.remove(tmp_path / "m" / name / "meta")
    scramble(store)
    ckpt.load(tmp_path / "m", session)
    assert_same(snapshot(store), before)
    with pytest.raises(CheckpointError, match="no meta file"):
        ckpt.get(tmp_path / "m")


def test_missing_folder_is_an_error(session, store, tmp_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        ckpt.load(tmp_path / "nope", session)
    with pytest.raises(CheckpointError, match="does not exist"):
        ckpt.get(tmp_path / "nope")


def test_meta_parsing_accepts_the_one_line_form():
    assert parse_meta("shape { dim: 100 dim: 784 }\ndata_type: kFloat\n", "m") == BlobSpec((100, 784), np.float32)
    with pytest.raises(CheckpointError, match="unsupported data_type 'kBool'"):
        parse_meta("shape { }\ndata_type: kBool\n", "m")
    with pytest.raises(CheckpointError, match="not a variable meta"):
        parse_meta("hello", "m")


def test_names_that_leave_the_folder_are_refused(session, tmp_path):
    session.variables.declare("../evil", BlobSpec((1,), np.float32))
    with pytest.raises(CheckpointError, match="'../evil' cannot be stored"):
        ckpt.save(tmp_path / "m", session)
    assert os.listdir(tmp_path) == []


def test_init_traces_every_job_and_reinitializes(session, toy, tmp_path):
    def job(x: toy.Array((3,))) -> toy.Sync:
        w = get_variable("w", shape=(3,), initializer=lambda s, d, r: np.arange(3, dtype=d))
        return _add(w, x)

    fn = JobFunction(job, "predict", None, session)
    cp = CheckPoint(session)
    cp.init()  # defines "w" without calling the job
    np.testing.assert_array_equal(session.variables.get("w"), [0, 1, 2])
    session.variables.assign("w", np.ones(3, np.float32))
    cp.init()
    np.testing.assert_array_equal(session.variables.get("w"), [0, 1, 2])
    cp.save(tmp_path / "m")
    np.testing.assert_array_equal(fn(np.ones(3, np.float32)), [1, 2, 3])


def _add(a, b):
    from flowjob_core import apply

    return apply("toy_add", [a, b])


def test_manager_initializes_then_restores_the_latest(session, store, tmp_path):
    root = tmp_path / "ckpts"
    manager = SimpleCheckPointManager(root, session=session)
    assert manager.list_checkpoints() == [] and manager.latest_checkpoint() is None
    store.assign("ints", np.array([1, 1], np.int32))
    manager.initialize_or_restore()  # none yet: initializes
    first_values = snapshot(store)
    manager.save()
    store.assign("ints", np.array([2, 2], np.int32))
    manager.save()
    (root / "snapshot_incomplete").mkdir()  # no snapshot_done: not listed
    names = manager.list_checkpoints()
    assert len(names) == 2 and names == sorted(names) and all(n.startswith("snapshot_") for n in names)
    assert manager.latest_checkpoint() == names[-1]
    scramble(store)
    manager.initialize_or_restore()
    assert store.get("ints").tolist() == [2, 2]
    ckpt.load(root / names[0], session)
    assert_same(snapshot(store), first_values)


@pytest.mark.parametrize("exchange", [True, False])
def test_overwrite_swaps_in_the_new_checkpoint(session, store, tmp_path, monkeypatch, exchange):
    from flowjob_core.checkpoint import atomic_replace as checkpoint_files

    if not exchange:  # the rename-aside fallback of systems without renameat2(RENAME_EXCHANGE)
        monkeypatch.setattr(checkpoint_files, "exchange", lambda a, b: False)
    ckpt.save(tmp_path / "m", session)
    scramble(store)
    after = snapshot(store)
    CheckPoint(session).save(tmp_path / "m", overwrite=True)
    assert_same(ckpt.get(tmp_path / "m"), after)
    assert os.listdir(tmp_path) == ["m"]
    stale = tmp_path / ".m.0a1b2c3d-999999999-0-00000000.tmp"  # another host's writer: kept
    stale.mkdir()
    ckpt.save(tmp_path / "m", session, overwrite=True)
    assert sorted(os.listdir(tmp_path)) == [stale.name, "m"]
