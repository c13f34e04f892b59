"""flow.train.CheckpointManager: numbered checkpoints, the last N kept, an atomic ``latest`` pointer,
restore_latest(); and two global functions of one name, whose variables checkpoints all cover."""
import os
import warnings

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core import CheckpointError, get_default_session
from flowjob_core.checkpoint import atomic_replace as checkpoint_files


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


def define_job():
    @flow.global_function(type="predict")
    def job(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        return x * flow.get_variable("w", shape=(2,), initializer=flow.constant_initializer(1.0))

    return job


def set_w(value: float) -> None:
    flow.load_variables({"w": np.full(2, value, np.float32)})


def w() -> float:
    flow.sync_default_session()
    return float(get_default_session().variables.get("w")[0])


def test_keeps_the_last_n_and_points_latest_at_the_newest(tmp_path):
    define_job()
    manager = flow.train.CheckpointManager(str(tmp_path / "run"), max_to_keep=2)
    assert manager.latest() is None and manager.restore_latest() is None
    assert manager.initialize_or_restore() is None and w() == 1.0  # nothing yet: initialized
    for step in range(1, 5):
        set_w(float(step))
        assert manager.save() == str(tmp_path / "run" / f"snapshot_{step}")
    assert manager.checkpoints() == ["snapshot_3", "snapshot_4"]
    assert (tmp_path / "run" / "latest").read_text() == "snapshot_4\n"
    assert sorted(os.listdir(tmp_path / "run")) == ["latest", "snapshot_3", "snapshot_4"]
    set_w(0.0)
    assert manager.restore_latest() == str(tmp_path / "run" / "snapshot_4") and w() == 4.0

    set_w(40.0)  # a re-save of one number replaces it atomically
    manager.save(4)
    assert manager.checkpoints() == ["snapshot_3", "snapshot_4"]
    set_w(0.0)
    manager.restore_latest()
    assert w() == 40.0
    set_w(10.0)
    assert manager.save(10) == str(tmp_path / "run" / "snapshot_10")  # ordered by number, not by name
    assert manager.checkpoints() == ["snapshot_4", "snapshot_10"]


def test_a_new_session_restores_the_latest(tmp_path):
    define_job()
    manager = flow.train.CheckpointManager(str(tmp_path / "run"))
    manager.initialize_or_restore()
    set_w(7.0)
    manager.save()
    flow.clear_default_session()
    job = define_job()
    assert flow.train.CheckpointManager(str(tmp_path / "run")).initialize_or_restore() == \
        str(tmp_path / "run" / "snapshot_1")
    np.testing.assert_array_equal(job(np.ones(2, np.float32)), [7.0, 7.0])


def test_a_pointer_to_a_missing_checkpoint_falls_back_to_the_newest_complete(tmp_path, caplog):
    define_job()
    manager = flow.train.CheckpointManager(str(tmp_path / "run"), max_to_keep=None)
    for step in (1, 2):
        set_w(float(step))
        manager.save()
    (tmp_path / "run" / "latest").write_text("snapshot_9\n")
    (tmp_path / "run" / "snapshot_3").mkdir()  # no snapshot_done: not a checkpoint
    set_w(0.0)
    assert manager.restore_latest() == str(tmp_path / "run" / "snapshot_2") and w() == 2.0
    assert any("names 'snapshot_9', which is not a complete checkpoint" in r.getMessage() for r in caplog.records)


def test_a_killed_pointer_write_leaves_the_old_pointer(tmp_path, monkeypatch):
    define_job()
    manager = flow.train.CheckpointManager(str(tmp_path / "run"))
    manager.save()

    def killed(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        checkpoint_files.write_small_file(str(tmp_path / "run" / "latest"), b"snapshot_2\n")
    assert (tmp_path / "run" / "latest").read_text() == "snapshot_1\n"
    assert sorted(os.listdir(tmp_path / "run")) == ["latest", "snapshot_1"]


def test_bad_roots_and_arguments_are_checkpoint_errors(tmp_path):
    define_job()
    flow.train.CheckPoint().init()
    flow.train.CheckPoint().save(str(tmp_path / "plain"))
    with pytest.raises(CheckpointError, match="'.*plain' is itself a checkpoint, not a folder of checkpoints"):
        flow.train.CheckpointManager(str(tmp_path / "plain"))
    (tmp_path / "f").write_text("x")
    with pytest.raises(CheckpointError, match="'.*f' exists and is not a folder"):
        flow.train.CheckpointManager(str(tmp_path / "f"))
    with pytest.raises(CheckpointError, match="max_to_keep must be a positive int or None, got 0"):
        flow.train.CheckpointManager(str(tmp_path / "run"), max_to_keep=0)
    with pytest.raises(CheckpointError, match="number must be a non-negative int, got -1"):
        flow.train.CheckpointManager(str(tmp_path / "run")).save(-1)


def test_two_global_functions_of_one_name_warn_and_both_are_checkpointed(tmp_path):
    @flow.global_function(type="predict")
    def job(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        return x * flow.get_variable("first", shape=(2,), initializer=flow.constant_initializer(2.0))

    with pytest.warns(UserWarning, match="global function 'job' is defined again") as caught:
        @flow.global_function(type="predict")
        def job(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:  # noqa: F811
            return x + flow.get_variable("second", shape=(2,), initializer=flow.constant_initializer(3.0))
    assert caught[0].filename == __file__

    flow.train.CheckPoint().init()  # neither job was called: init traces both
    store = get_default_session().variables
    assert sorted(store.names()) == ["first", "second"]
    flow.train.CheckPoint().save(str(tmp_path / "m"))
    assert sorted(flow.checkpoint.get(str(tmp_path / "m"))) == ["first", "second"]

    flow.clear_default_session()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a fresh session: one definition each, no warning

        @flow.global_function(type="predict")
        def job(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:  # noqa: F811
            return x * flow.get_variable("first", shape=(2,), initializer=flow.constant_initializer(0.0))
    first = job
    with pytest.warns(UserWarning, match="'job' is defined again"):
        @flow.global_function(type="predict")
        def job(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:  # noqa: F811
            return x + flow.get_variable("second", shape=(2,), initializer=flow.constant_initializer(0.0))
    flow.train.CheckPoint().load(str(tmp_path / "m"))  # strictness counts the replaced job's variables too
    np.testing.assert_array_equal(first(np.ones(2, np.float32)), [2.0, 2.0])
    np.testing.assert_array_equal(job(np.ones(2, np.float32)), [4.0, 4.0])


def test_a_factory_remaking_its_job_is_quiet_and_every_job_is_checkpointed(tmp_path):
    def make(name: str):
        @flow.global_function(type="predict")
        def job(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
            return x + flow.get_variable(name, shape=(2,), initializer=flow.constant_initializer(1.0))

        return job

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the same source lines: a deliberate re-definition
        make("a"), make("b")
    flow.train.CheckPoint().save(str(tmp_path / "m"))
    assert sorted(flow.checkpoint.get(str(tmp_path / "m"))) == ["a", "b"]


def test_a_replaced_job_gives_up_its_plan_and_plans_again_when_called():
    def make(scale: float):
        @flow.global_function(type="predict")
        def job(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
            return x * scale

        return job

    first = make(2.0)
    np.testing.assert_array_equal(first(np.ones(2, np.float32)), [2.0, 2.0])
    assert first._plan is not None
    second = make(3.0)  # a factory in a loop must not keep every earlier job's buffers
    assert first._plan is None and second.replaced is first
    np.testing.assert_array_equal(first(np.ones(2, np.float32)), [2.0, 2.0])  # still callable
    np.testing.assert_array_equal(second(np.ones(2, np.float32)), [3.0, 3.0])


def test_a_job_re_made_every_step_keeps_a_short_chain_and_saves_every_variable(tmp_path):
    def step(k: int) -> np.ndarray:  # legacy's eager example defines its job inside the step function
        @flow.global_function(type="train")
        def job(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
            w = flow.get_variable("w", shape=(2,), initializer=flow.constant_initializer(1.0))
            loss = flow.math.reduce_sum(x * w)
            flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0.9).minimize(loss)
            return loss

        return job(np.full(2, k, np.float32))

    for k in range(50):
        step(k)
    latest = get_default_session().functions["job"]
    chain = []
    earlier = latest.replaced
    while earlier is not None:
        chain.append(earlier)
        earlier = earlier.replaced
    assert len(chain) == 1  # the one just replaced; the 48 before it had declared their variables
    flow.train.CheckPoint().save(str(tmp_path / "m"))  # covers w and its momentum slot without re-planning 49 jobs
    saved = flow.checkpoint.get(str(tmp_path / "m"))
    assert "w" in saved and any("momentum" in name.lower() for name in saved), sorted(saved)


def test_a_prune_killed_while_deleting_never_leaves_a_listed_half_checkpoint(tmp_path, monkeypatch):
    import shutil

    from flowjob_core.checkpoint import manager as checkpoint_manager

    define_job()
    manager = flow.train.CheckpointManager(str(tmp_path / "run"), max_to_keep=1)
    manager.save()
    real_rmtree = shutil.rmtree

    def killed_midway(path, ignore_errors=False):  # a prune deletes one variable's folder, then the process "dies"
        if "snapshot_1" not in os.path.basename(path):
            return real_rmtree(path, ignore_errors=ignore_errors)
        real_rmtree(os.path.join(path, "w"))
        raise KeyboardInterrupt

    monkeypatch.setattr(checkpoint_manager.shutil, "rmtree", killed_midway)
    with pytest.raises(KeyboardInterrupt):
        manager.save()
    monkeypatch.setattr(checkpoint_manager.shutil, "rmtree", real_rmtree)
    assert manager.checkpoints() == ["snapshot_2"]  # the half-deleted snapshot_1 is not listed
    assert ".snapshot_1.pruning" in os.listdir(tmp_path / "run")
    manager.save()  # the next save finishes the prune
    assert sorted(os.listdir(tmp_path / "run")) == ["latest", "snapshot_3"]


def test_a_newest_snapshot_without_its_done_mark_is_numbered_past_with_a_warning(tmp_path):
    define_job()
    manager = flow.train.CheckpointManager(str(tmp_path / "run"), max_to_keep=3)
    manager.save()
    manager.save()
    os.remove(tmp_path / "run" / "snapshot_2" / "snapshot_done")
    with pytest.warns(UserWarning, match=r"snapshot_2 hold no complete checkpoint \(no snapshot_done\); left as "
                                         r"they are and numbered past"):
        assert manager.save() == str(tmp_path / "run" / "snapshot_3")
    assert manager.checkpoints() == ["snapshot_1", "snapshot_3"]
    assert manager.latest() == str(tmp_path / "run" / "snapshot_3")
