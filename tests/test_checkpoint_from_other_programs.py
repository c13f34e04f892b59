"""Checkpoint folders written by other programs, as legacy programs use them: a program that prunes or
converts a model writes each variable as ``<name>/out`` with numpy (no ``meta``, no ``snapshot_done``),
then a legacy job loads the folder with ``flow.train.CheckPoint().load``."""
import os

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core import CheckpointError, get_default_session
from flowjob_core.api.model_io import CheckpointWarning

RNG = np.random.default_rng(11)
PRUNED = {"conv-weight": RNG.standard_normal((3, 5)).astype(np.float32),
          "conv-bias": RNG.standard_normal((5,)).astype(np.float32)}


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


def write_like_a_pruning_program(model_dir, values):
    """What such programs do: one folder per variable, the raw array written by ``ndarray.tofile``."""
    for name, value in values.items():
        os.makedirs(os.path.join(model_dir, name))
        value.tofile(os.path.join(model_dir, name, "out"))


def define_jobs():
    def model(x):
        w = flow.get_variable("conv-weight", shape=(3, 5), initializer=flow.random_normal_initializer())
        b = flow.get_variable("conv-bias", shape=(5,), initializer=flow.zeros_initializer())
        return flow.nn.bias_add(flow.matmul(x, w), b)

    @flow.global_function(type="predict")
    def eval_job(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
        return model(x)

    @flow.global_function(type="train")
    def train_job(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
        loss = flow.math.reduce_mean(flow.math.square(model(x)))
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0.9).minimize(loss)
        return loss

    return eval_job, train_job


def test_a_legacy_job_loads_a_folder_a_pruning_program_wrote_with_numpy(tmp_path):
    model_dir = str(tmp_path / "pruned_model")
    write_like_a_pruning_program(model_dir, PRUNED)
    eval_job, _ = define_jobs()
    check_point = flow.train.CheckPoint()
    with pytest.warns(CheckpointWarning) as caught:
        check_point.load(model_dir)
    marks = [str(w.message) for w in caught if "completion mark" in str(w.message)]
    assert len(marks) == 1 and repr(model_dir) in marks[0] and "no 'snapshot_done'" in marks[0]
    # the optimizer's state is not in the folder: initialized, each named in a warning (legacy's leniency)
    assert any("momentum" in str(w.message) for w in caught)
    x = np.ones((2, 3), np.float32)
    np.testing.assert_allclose(eval_job(x), x @ PRUNED["conv-weight"] + PRUNED["conv-bias"], rtol=1e-6)


def test_a_file_of_the_wrong_size_is_refused_before_anything_is_assigned(tmp_path):
    model_dir = str(tmp_path / "converted")
    write_like_a_pruning_program(model_dir, {**PRUNED, "conv-bias": np.zeros(4, np.float32)})  # pruned too far
    eval_job, _ = define_jobs()
    flow.train.CheckPoint().init()
    before = get_default_session().variables.get("conv-weight").copy()
    with pytest.warns(CheckpointWarning, match="completion mark"), \
            pytest.raises(CheckpointError, match=r"variable 'conv-bias': .*out has 16 bytes, expected 20"):
        flow.train.CheckPoint().load(model_dir)
    assert get_default_session().variables.get("conv-weight").tobytes() == before.tobytes()
    eval_job(np.ones((2, 3), np.float32))  # the session goes on


def test_a_folder_flowjob_saved_stays_refused_without_its_mark(tmp_path):
    """A save writes ``meta`` files and ``snapshot_done`` last: such a folder without the mark is an
    interrupted save or copy, refused as before."""
    define_jobs()
    check_point = flow.train.CheckPoint()
    check_point.init()
    check_point.save(str(tmp_path / "saved"))
    os.remove(tmp_path / "saved" / "snapshot_done")
    with pytest.raises(CheckpointError, match="no 'snapshot_done'.*their 'meta' files say a flowjob or OneFlow "
                                              "save wrote them"):
        check_point.load(str(tmp_path / "saved"))


def test_the_checkpoint_manager_restores_only_folders_with_the_mark(tmp_path):
    write_like_a_pruning_program(str(tmp_path / "run" / "snapshot_1"), PRUNED)
    define_jobs()
    manager = flow.train.CheckpointManager(str(tmp_path / "run"))
    assert manager.checkpoints() == [] and manager.restore_latest() is None
