"""Loads that would load nothing are errors naming what was expected and found; a checkpoint lacking
some variables warns naming each (or refuses with strict=True); every failure leaves the session usable."""
import os

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core import CheckpointError, get_default_session
from flowjob_core.api.model_io import CheckpointWarning


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


def define_jobs(extra: bool = False):
    @flow.global_function(type="train")
    def train_job(x: tp.Numpy.Placeholder((4, 3))) -> tp.Numpy:
        w = flow.get_variable("w", shape=(3, 2), initializer=flow.random_normal_initializer(seed=1))
        out = flow.matmul(x, w)
        if extra:
            out = out + flow.get_variable("extra", shape=(2,), initializer=flow.constant_initializer(0.5))
        loss = flow.math.reduce_mean(out * out)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)
        return loss

    return train_job


def values() -> dict[str, np.ndarray]:
    flow.sync_default_session()
    store = get_default_session().variables
    return {name: store.get(name) for name in store.names()}


@pytest.fixture
def saved(tmp_path):
    """A trained checkpoint at tmp_path/m; the session's variables then changed by one more step."""
    job = define_jobs()
    flow.train.CheckPoint().init()
    job(np.ones((4, 3), np.float32))
    flow.train.CheckPoint().save(str(tmp_path / "m"))
    job(np.ones((4, 3), np.float32))
    return job


def refused(path, match: str, job) -> None:
    before = values()
    with pytest.raises(CheckpointError, match=match):
        flow.train.CheckPoint().load(str(path))
    after = values()
    assert all(before[n].tobytes() == after[n].tobytes() for n in before), "a refused load changed a variable"
    job(np.ones((4, 3), np.float32))  # the session goes on


def test_an_empty_folder_is_refused(tmp_path, saved):
    (tmp_path / "empty").mkdir()
    refused(tmp_path / "empty", "'.*empty' is empty; expected 'snapshot_done' and one folder per variable", saved)


def test_a_parent_folder_of_checkpoints_is_refused_naming_them(tmp_path, saved):
    refused(tmp_path, "is not a checkpoint folder: no 'snapshot_done'.*it holds the checkpoints 'm': load one",
            saved)


def test_a_variable_folder_is_refused(tmp_path, saved):
    refused(tmp_path / "m" / "w", "no 'snapshot_done'.*one variable's folder; load its parent", saved)


def test_a_folder_without_the_marker_is_refused(tmp_path, saved):
    os.remove(tmp_path / "m" / "snapshot_done")
    refused(tmp_path / "m", "'.*m' is not a checkpoint folder: no 'snapshot_done'.*found the variables "
                            "'System-Train-TrainStep-train_job', 'w': an interrupted copy, or a complete checkpoint "
                            "of an older OneFlow \\(then create an empty 'snapshot_done' in it\\)", saved)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "readme.txt").write_text("x")
    refused(tmp_path / "other", "'.*other' is not a checkpoint folder: no 'snapshot_done'.*found 'readme.txt'", saved)
    with pytest.raises(CheckpointError, match="no 'snapshot_done'"):
        flow.checkpoint.get(str(tmp_path / "m"))


def test_a_file_is_refused(tmp_path, saved):
    (tmp_path / "f").write_text("x")
    refused(tmp_path / "f", "'.*f' is a file; expected a folder", saved)


def test_a_foreign_checkpoint_is_refused_naming_expected_and_found(tmp_path, saved):
    flow.clear_default_session()

    @flow.global_function(type="predict")
    def other(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        return x + flow.get_variable("alpha", shape=(2,), initializer=flow.zeros_initializer())

    flow.train.CheckPoint().init()
    with pytest.raises(CheckpointError, match="holds none of this session's 1 variables \\(expected 'alpha'\\); "
                                              "it holds 'System-Train-TrainStep-train_job', 'w'"):
        flow.train.CheckPoint().load(str(tmp_path / "m"))
    np.testing.assert_array_equal(other(np.ones(2, np.float32)), [1, 1])


def test_missing_variables_warn_each_or_refuse_with_strict(tmp_path, saved):
    saved_values = flow.checkpoint.get(str(tmp_path / "m"))
    flow.clear_default_session()
    job = define_jobs(extra=True)
    with pytest.raises(CheckpointError, match="lacks 1 of this session's variables \\(strict=True\\): 'extra'"):
        flow.train.CheckPoint().load(str(tmp_path / "m"), strict=True)
    with pytest.warns(CheckpointWarning) as caught:
        flow.train.CheckPoint().load(str(tmp_path / "m"))
    out = os.path.join(str(tmp_path / "m"), "extra", "out")
    assert [str(w.message) for w in caught] == [
        f"checkpoint {str(tmp_path / 'm')!r} has no variable 'extra' ({out}); it is initialized"]
    assert caught[0].filename == __file__  # points at the caller's line
    now = values()
    np.testing.assert_array_equal(now["extra"], np.full(2, 0.5, np.float32))
    assert now["w"].tobytes() == saved_values["w"].tobytes()
    job(np.ones((4, 3), np.float32))


def test_a_meta_of_garbage_bytes_names_the_file(tmp_path, saved):
    meta = tmp_path / "m" / "w" / "meta"
    meta.write_bytes(bytes(range(128, 256)))
    refused(tmp_path / "m", f"{meta}: not a variable meta \\(not UTF-8 text", saved)
    with pytest.raises(CheckpointError, match=f"{meta}: not a variable meta"):
        flow.checkpoint.get(str(tmp_path / "m"))


def test_the_documents_pattern_still_loads_what_it_saved(tmp_path, saved):
    """Legacy programs save with CheckPoint().save, then a fresh program loads that folder."""
    expected = flow.checkpoint.get(str(tmp_path / "m"))
    flow.clear_default_session()
    define_jobs()
    flow.train.CheckPoint().load(str(tmp_path / "m"))
    now = values()
    assert sorted(now) == sorted(expected)
    assert all(now[n].tobytes() == expected[n].tobytes() for n in now)
