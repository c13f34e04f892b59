"""A save while another thread trains back to back waits for at most the step in progress, not for the
training to stop: the time between two steps is handed to a thread asking for it in turn
(``flowjob_core.runtime.step_gate``), however often the trainer takes the lock again.

Taking a plain lock again right after releasing it wins whenever the waiting thread is slow to wake: the
test makes it so by running the saver at the lowest priority on the trainer's processor (where the
platform lets a thread set both), the way a loaded machine does it some of the time.
"""
from __future__ import annotations

import os
import threading

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core import get_default_session
from flowjob_optim import train_step_name

REQUESTS = 100


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


def _define():
    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((1,))) -> tp.Numpy:
        ws = [flow.get_variable(f"w{i}", shape=(4,), initializer=flow.zeros_initializer()) for i in range(10)]
        # d loss / d w_i = 1: after k steps of SGD(lr=1) every w_i is -k
        loss = flow.math.add_n([flow.math.reduce_sum(w) for w in ws]) + flow.math.reduce_sum(x)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [1.0]), momentum=0).minimize(loss)
        return loss

    return train


def _share_one_processor(lowest: bool) -> None:
    """Run the calling thread on the first processor the process may use (Linux takes the thread's id
    for 0 and for its native id), at the lowest priority if ``lowest``."""
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    if lowest and hasattr(os, "setpriority"):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)


class Trainer:
    """Calls ``train`` back to back in its own thread, counting finished steps, until stopped."""

    def __init__(self) -> None:
        self.train = _define()
        self.x = np.zeros(1, np.float32)
        self.train(self.x)  # the variables exist before the first save
        self.steps = 1
        self.stop = threading.Event()
        self.failures: list[BaseException] = []
        self.thread = threading.Thread(target=self._run)

    def _run(self) -> None:
        try:
            _share_one_processor(lowest=False)
            while not self.stop.is_set():
                self.train(self.x)
                self.steps += 1
        except BaseException as exc:  # reported by the test
            self.failures.append(exc)

    def __enter__(self) -> "Trainer":
        self.thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop.set()
        self.thread.join(timeout=60)
        assert not self.failures, self.failures


def _in_slow_thread(body) -> None:
    failures: list[BaseException] = []

    def run() -> None:
        try:
            _share_one_processor(lowest=True)
            body()
        except BaseException as exc:  # reported below
            failures.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=120)
    assert not thread.is_alive(), "the saver is still waiting"
    assert not failures, failures


def test_a_thread_between_steps_waits_for_at_most_the_step_in_progress():
    session = get_default_session()
    waited: list[int] = []
    with Trainer() as trainer:
        def ask() -> None:
            for _ in range(REQUESTS):
                before = trainer.steps
                with session.between_steps():
                    waited.append(trainer.steps - before)
                trainer.stop.wait(0.002)

        _in_slow_thread(ask)
        assert trainer.thread.is_alive()
    # the step in progress when it asked, and one launched as it asked, may end before it gets its turn
    assert max(waited) <= 2, f"steps run while a thread waited between steps: {sorted(waited)[-10:]}"


def test_a_checkpoint_manager_save_ends_while_the_trainer_still_trains(tmp_path):
    manager = flow.train.CheckpointManager(str(tmp_path / "runs"), max_to_keep=None)
    saved: list[str] = []
    with Trainer() as trainer:
        def save() -> None:
            for _ in range(3):
                saved.append(manager.save())
                assert trainer.thread.is_alive()

        _in_slow_thread(save)
        assert trainer.thread.is_alive() and not trainer.stop.is_set()
        last = trainer.steps
    assert len(saved) == 3
    for path in saved:
        values = {name: blob.numpy() for name, blob in flow.checkpoint.get(path).items()}
        counter = int(np.asarray(values[train_step_name("train")]).reshape(-1)[0])
        held = {float(v) for i in range(10) for v in values[f"w{i}"]}
        assert held == {-float(counter)}, f"{path} mixes steps: {sorted(held)}, step counter {counter}"
        assert 1 <= counter <= last
