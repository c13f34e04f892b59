"""``examples/lenet_model.py`` and ``examples/mlp_model.py``, programs written for legacy v0.4's ``flow.model`` API
(the function style, and the object style of eager modules and ``flow.optim``), run unchanged as scripts on the
small synthetic ``mnist.npz`` of the training examples (1000 train / 2000 test images) in batches of 20."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from flowjob_core.testing.modules import sibling

_training = sibling(__file__, "test_examples_training")

pytestmark = pytest.mark.examples

TRAIN_LOSS = re.compile(r"^step +(\d+)  train loss: (\S+)$", re.M)
ACCURACY = re.compile(r"^step +(\d+)  validation accuracy: (\d+\.\d)%$", re.M)
TRAIN_STEP = "System-Train-TrainStep-LeNet_Model_train_numpy_job_0"


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    _training.synthetic_mnist(tmp_path)
    return tmp_path


def test_lenet_model_trains_validates_and_checkpoints(workdir):
    out = _training.run("lenet_model.py", workdir, args=("--batch_size", "20", "--max_steps", "20",
                                                         "--val_interval", "10", "--save_interval", "10"))
    losses = [(int(step), float(loss)) for step, loss in TRAIN_LOSS.findall(out)]
    assert [step for step, _ in losses] == [0, 10]
    assert losses[-1][1] < losses[0][1]
    accuracies = [(int(step), float(acc)) for step, acc in ACCURACY.findall(out)]
    assert [step for step, _ in accuracies] == [9, 19]  # after every 10th step
    assert accuracies[-1][1] >= 80.0
    assert out.rstrip().endswith("model saved")
    expected = {**_training.LENET_VARIABLES, TRAIN_STEP: 8}
    del expected["System-Train-TrainStep-train_job"]
    for step in (9, 19):  # legacy's <save_dir>-<step index>
        assert _training.checkpoint_layout(workdir / f"lenet_model-{step}") == expected
        assert np.fromfile(workdir / f"lenet_model-{step}" / TRAIN_STEP / "out", np.int64).tolist() == [step + 1]

    # a second run starts from the last checkpoint: its first loss is the trained model's
    again = _training.run("lenet_model.py", workdir, args=("--batch_size", "20", "--max_steps", "1",
                                                           "--val_interval", "1", "--load_dir", "lenet_model-19",
                                                           "--save_dir", "resumed", "--save_interval", "1"))
    (step, first), = [(int(s), float(v)) for s, v in TRAIN_LOSS.findall(again)]
    assert first < losses[0][1]
    assert float(ACCURACY.findall(again)[0][1]) >= 80.0
    steps = np.fromfile(workdir / "resumed-0" / TRAIN_STEP / "out", np.int64)
    assert steps.tolist() == [21]  # the loaded counter went on


MLP_PARAMETERS = {"fc1.weight": 784 * 32 * 4, "fc1.bias": 32 * 4, "fc2.weight": 32 * 10 * 4, "fc2.bias": 10 * 4}


def test_mlp_model_trains_eager_modules_with_flow_optim(workdir):
    out = _training.run("mlp_model.py", workdir, args=("--batch_size", "20", "--max_steps", "20", "--hidden", "32",
                                                       "--val_interval", "10", "--save_interval", "10"))
    losses = [(int(step), float(loss)) for step, loss in TRAIN_LOSS.findall(out)]
    assert [step for step, _ in losses] == [0, 10]
    assert losses[0][1] > 2.0 and losses[-1][1] < 0.5 * losses[0][1]  # from chance (ln 10) down
    accuracies = [(int(step), float(acc)) for step, acc in ACCURACY.findall(out)]
    assert [step for step, _ in accuracies] == [9, 19]
    assert accuracies[-1][1] >= 80.0
    assert out.rstrip().endswith("model saved")
    for step in (9, 19):  # the module's state_dict, in legacy's <save_dir>-<step index> layout
        assert _training.checkpoint_layout(workdir / f"mlp_model-{step}") == MLP_PARAMETERS
    step_19 = np.fromfile(workdir / "mlp_model-19" / "fc2.bias" / "out", np.float32)
    assert not np.array_equal(step_19, np.fromfile(workdir / "mlp_model-9" / "fc2.bias" / "out", np.float32))

    # a second run loads the last checkpoint before its first step: its first loss is the trained model's
    again = _training.run("mlp_model.py", workdir, args=("--batch_size", "20", "--max_steps", "1", "--hidden", "32",
                                                         "--val_interval", "1", "--load_dir", "mlp_model-19",
                                                         "--save_dir", "resumed", "--save_interval", "1"))
    (step, first), = [(int(s), float(v)) for s, v in TRAIN_LOSS.findall(again)]
    assert first < 0.5 * losses[0][1]
    assert float(ACCURACY.findall(again)[0][1]) >= 80.0
    assert _training.checkpoint_layout(workdir / "resumed-0") == MLP_PARAMETERS
