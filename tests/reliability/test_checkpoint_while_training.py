"""A checkpoint saved while another thread trains holds one step: every variable and the train step counter
of the same step (the save copies them between two steps, then writes the files while training goes on)."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core.api.model_io import CheckpointManager
from flowjob_optim import train_step_name

SHAPE = (256, 256)  # large enough that copying w takes longer than a step's launch


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


def _define() -> object:
    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((1,))) -> tp.Numpy:
        w = flow.get_variable("w", shape=SHAPE, initializer=flow.zeros_initializer())
        b = flow.get_variable("b", shape=(4,), initializer=flow.zeros_initializer())
        # d loss / dw = 1 and d loss / db = 1 everywhere: after k steps of SGD(lr=1), w = b = -k
        loss = flow.math.reduce_sum(w) + flow.math.reduce_sum(b) + flow.math.reduce_sum(x)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [1.0]), momentum=0).minimize(loss)
        return loss

    return train


def _steps_of(values: dict[str, np.ndarray]) -> tuple[float, float, int]:
    w, b = values["w"], values["b"]
    assert np.all(w == w.flat[0]) and np.all(b == b.flat[0]), "a variable mixes two steps"
    return -float(w.flat[0]), -float(b.flat[0]), int(np.asarray(values[train_step_name("train")]).reshape(-1)[0])


def _train_while(save: object, saves: int) -> list[tuple[float, float, int]]:
    train = _define()
    x = np.zeros(1, np.float32)
    train(x)  # the variables exist before the first save
    stop = threading.Event()
    failures: list[BaseException] = []

    def trainer() -> None:
        try:
            while not stop.is_set():
                train(x)
        except BaseException as exc:  # reported by the main thread
            failures.append(exc)

    worker = threading.Thread(target=trainer)
    worker.start()
    try:
        seen = [_steps_of(save(k)) for k in range(saves)]
    finally:
        stop.set()
        worker.join(timeout=60)
    assert not failures, failures
    return seen


def test_flow_checkpoint_save_takes_one_step(tmp_path):
    def save(k: int) -> dict[str, np.ndarray]:
        path = str(tmp_path / f"snapshot_{k}")
        flow.checkpoint.save(path)
        return {name: blob.numpy() for name, blob in flow.checkpoint.get(path).items()}

    for w_steps, b_steps, counter in _train_while(save, saves=6):
        assert w_steps == b_steps == counter


def test_the_checkpoint_manager_takes_one_step(tmp_path):
    manager = CheckpointManager(str(tmp_path / "runs"), max_to_keep=10)

    def save(k: int) -> dict[str, np.ndarray]:
        path = manager.save()
        return {name: blob.numpy() for name, blob in flow.checkpoint.get(path).items()}

    for w_steps, b_steps, counter in _train_while(save, saves=4):
        assert w_steps == b_steps == counter
