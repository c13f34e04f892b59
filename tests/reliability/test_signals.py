"""A stop signal (Ctrl-C) never tears a step: a synchronous step run in the main thread writes all its
updates or none, lazy and eager alike, and a checkpoint saved in the ``except KeyboardInterrupt`` block
holds one step; an interrupt while asynchronous steps are queued leaves no call counted that never runs,
so the save in the handler and the exit finish.

The signals are raised by a kernel of the optimizer's update in the main thread, a few updates into the
step's 40 (the others run before and after it, some on a host lane): deterministic, where a timer would
hit a step only sometimes.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core import get_default_session
from flowjob_optim import train_step_name

VARIABLES = 40
UPDATE_OP = "optim_momentum_update"


@pytest.fixture(autouse=True)
def fresh_session(monkeypatch):
    # the update kernel's Python must run at every step for the interrupter to count updates: a recorded GPU
    # step (the emulated device's too) replays its graph without calling it
    monkeypatch.setenv("FLOWJOB_CUDA_GRAPHS", "0")
    flow.clear_default_session()
    flow.enable_eager_execution(False)
    yield
    flow.enable_eager_execution(False)
    flow.clear_default_session()


class Interrupter:
    """Wraps the update kernel of the session's backend: on the step it is armed for, the update number
    ``at`` run in the main thread sends ``signals`` SIGINTs to the process before returning (raised there
    at once by the default handler: the step's later updates would not run)."""

    def __init__(self, at: int = 5, signals: int = 1) -> None:
        self.at, self.signals = at, signals
        self.armed = False
        self.updates = 0
        self.lock = threading.Lock()
        session = get_default_session()
        kernels, op = session.registries.kernels, session.registries.ops[UPDATE_OP]
        tag = session.backend.tag
        original = kernels.lookup(op, tag)

        def builder(ctx):
            run = original(ctx)

            def interrupting(*args):
                out = run(*args)
                if threading.current_thread() is not threading.main_thread():
                    return out
                with self.lock:
                    self.updates += 1
                    fire = self.armed and self.updates == self.at
                if fire:
                    for _ in range(self.signals):
                        signal.raise_signal(signal.SIGINT)
                return out

            return interrupting

        if UPDATE_OP in kernels.overrides(tag):  # the cpu backend's blocked update: wrapped above, replaced here
            kernels.remove(UPDATE_OP, tag)
        kernels.add(UPDATE_OP, tag, builder)

    def arm(self) -> None:
        with self.lock:
            self.armed, self.updates = True, 0


def define_train():
    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((1,))) -> tp.Numpy:
        ws = [flow.get_variable(f"w{i}", shape=(3,), initializer=flow.zeros_initializer())
              for i in range(VARIABLES)]
        # d loss / d w_i = 1 for every i: every variable takes the same value at each step
        loss = flow.math.add_n([flow.math.reduce_sum(w) for w in ws]) + flow.math.reduce_sum(x)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0.5).minimize(loss)
        return loss

    return train


def expected_values(steps: int) -> np.ndarray:
    """w after ``steps`` steps of momentum SGD with gradient 1, lr 0.1, momentum 0.5 (one value per step)."""
    w, v = np.float32(0), np.float32(0)
    for _ in range(steps):
        v = np.float32(0.5) * v - np.float32(0.1)
        w = w + v
    return w


def steps_held(values: dict[str, np.ndarray]) -> int:
    """The one step every variable and the step counter hold; an assertion naming the mix otherwise."""
    counter = int(np.asarray(values[train_step_name("train")]).reshape(-1)[0])
    distinct = sorted({float(values[f"w{i}"][0]) for i in range(VARIABLES)})
    assert len(distinct) == 1, f"the variables mix two steps: values {distinct} (step counter {counter})"
    for i in range(VARIABLES):
        assert np.all(values[f"w{i}"] == values[f"w{i}"][0])
    np.testing.assert_allclose(distinct[0], expected_values(counter), rtol=1e-6)
    return counter


def session_values() -> dict[str, np.ndarray]:
    store = get_default_session().variables
    return {name: store.get(name) for name in store.names()}


def checkpoint_values(path: str) -> dict[str, np.ndarray]:
    return {name: blob.numpy() for name, blob in flow.checkpoint.get(path).items()}


@pytest.mark.parametrize("eager", [False, True], ids=["lazy", "eager"])
def test_ctrl_c_in_the_middle_of_the_updates_waits_for_the_step_end(tmp_path, eager):
    flow.enable_eager_execution(eager)
    interrupter = Interrupter()
    train = define_train()
    x = np.zeros(1, np.float32)
    train(x)
    train(x)
    interrupter.arm()
    with pytest.raises(KeyboardInterrupt):
        try:
            for _ in range(5):
                train(x)
        except KeyboardInterrupt:  # what a training script does with Ctrl-C
            flow.train.CheckPoint().save(str(tmp_path / "interrupted"))
            raise
    # the interrupt came after the step's last update: the third step is complete, none after it ran
    assert steps_held(session_values()) == 3
    assert steps_held(checkpoint_values(str(tmp_path / "interrupted"))) == 3
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the handler is put back
    train(x)  # the session goes on
    assert steps_held(session_values()) == 4


def test_ctrl_c_during_a_load_lets_it_assign_every_variable(tmp_path, monkeypatch):
    train = define_train()
    x = np.zeros(1, np.float32)
    train(x)
    train(x)
    flow.train.CheckPoint().save(str(tmp_path / "two"))
    train(x)
    store = get_default_session().variables
    real_assign, assigned = type(store).assign, []

    def interrupted(self, name, value):
        real_assign(self, name, value)
        assigned.append(name)
        if len(assigned) == 5:
            signal.raise_signal(signal.SIGINT)  # Ctrl-C a few variables into the load

    monkeypatch.setattr(type(store), "assign", interrupted)
    with pytest.raises(KeyboardInterrupt):
        flow.train.CheckPoint().load(str(tmp_path / "two"))
    assert sorted(assigned) == sorted(store.names())  # every variable, momentum and step counter included
    assert steps_held(session_values()) == 2


def test_a_program_handler_is_called_once_at_the_step_end():
    interrupter = Interrupter()
    train = define_train()
    x = np.zeros(1, np.float32)
    train(x)
    calls: list[int] = []

    def handler(signum, frame):
        calls.append(steps_held(session_values()))  # what the handler sees: whole steps

    previous = signal.signal(signal.SIGINT, handler)
    try:
        interrupter.arm()
        train(x)
        train(x)
        assert signal.getsignal(signal.SIGINT) is handler
    finally:
        signal.signal(signal.SIGINT, previous)
    assert calls == [2]  # called once, after the second step had written every update


def test_a_second_ctrl_c_stops_the_step_at_once_and_says_so():
    interrupter = Interrupter(signals=2)
    train = define_train()
    x = np.zeros(1, np.float32)
    train(x)
    interrupter.arm()
    with pytest.raises(KeyboardInterrupt) as caught:
        train(x)
    assert "a second SIGINT stopped a step in the middle" in "".join(getattr(caught.value, "__notes__", []))
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_steps_off_the_main_thread_are_not_held():
    """Only the main thread runs handlers: a step called in another thread installs nothing (it could not)."""
    train = define_train()
    x = np.zeros(1, np.float32)
    failures: list[BaseException] = []

    def run() -> None:
        try:
            for _ in range(3):
                train(x)
        except BaseException as exc:  # reported below
            failures.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=60)
    assert not failures, failures
    assert steps_held(session_values()) == 3


ASYNC_PROGRAM = textwrap.dedent("""
    import os, signal, sys, threading, time
    import numpy as np
    import oneflow as flow
    import oneflow.typing as tp
    from flowjob_core import get_default_session

    session = get_default_session()
    kernels, op = session.registries.kernels, session.registries.ops["optim_momentum_update"]
    original = kernels.lookup(op, session.backend.tag)

    def slow(ctx):
        run = original(ctx)
        def run_slowly(*args):
            time.sleep(0.002)  # steps slower than launches: the queue fills and the launcher blocks
            return run(*args)
        return run_slowly

    if op.name in kernels.overrides(session.backend.tag):  # wrapped above, replaced here
        kernels.remove(op.name, session.backend.tag)
    kernels.add(op.name, session.backend.tag, slow)

    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((1,))) -> tp.Callback[tp.Numpy]:
        ws = [flow.get_variable(f"w{i}", shape=(3,), initializer=flow.zeros_initializer()) for i in range(10)]
        loss = flow.math.add_n([flow.math.reduce_sum(w) for w in ws]) + flow.math.reduce_sum(x)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0.5).minimize(loss)
        return loss

    x = np.zeros(1, np.float32)
    done = []
    threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
    try:
        for _ in range(100000):
            train(x)(done.append)
    except KeyboardInterrupt:
        flow.train.CheckPoint().save(sys.argv[1])
        print("saved after", len(done), "steps", flush=True)
""")


def test_ctrl_c_while_asynchronous_steps_are_queued_lets_the_save_and_the_exit_finish(tmp_path):
    script = tmp_path / "launch.py"
    script.write_text(ASYNC_PROGRAM)
    saved = tmp_path / "saved"
    try:
        done = subprocess.run([sys.executable, str(script), str(saved)], capture_output=True, text=True,
                              timeout=90, env={**os.environ, "PYTHONFAULTHANDLER": "1"})
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the program hung after Ctrl-C (the save or the exit waited for a call never queued): "
                    f"{exc.stdout!r} {exc.stderr!r}")
    assert done.returncode == 0, done.stderr
    assert "saved after" in done.stdout
    values = checkpoint_values(str(saved))
    counter = int(np.asarray(values[train_step_name("train")]).reshape(-1)[0])
    assert counter > 0
    assert len({float(values[f"w{i}"][0]) for i in range(10)}) == 1  # one step
