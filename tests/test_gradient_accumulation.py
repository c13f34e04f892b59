"""func_config.train.num_gradient_accumulation_steps(N) as legacy v0.3/v0.4: N calls of a train job, one
micro-batch each, update the variables as one call on the N micro-batches concatenated (the summed gradient
scaled by 1 / (N * loss elements)), on the N-th call only; schedules, the train step and optimizer states
advance once per update; the partial sums live in session variables, so checkpoints hold them."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core import ConfigError, get_default_session
from flowjob_core.testing.modules import sibling

helpers = sibling(__file__, "op_surface_helpers")
fresh_session = helpers.fresh_session
value = helpers.value

IN, OUT = 3, 2
STEP = "System-Train-TrainStep-train"
MICRO = "System-GradientAccumulation-MicroStep-train"

RNG = np.random.default_rng(7)
X = RNG.standard_normal((12, IN)).astype(np.float32)
Y = RNG.standard_normal((12, OUT)).astype(np.float32)
W0 = RNG.standard_normal((IN, OUT)).astype(np.float32)


def _schedule() -> Any:
    # boundaries count updates (the train step): 0.1 for the first update, 0.05 after
    return flow.optimizer.PiecewiseConstantScheduler([0], [0.1, 0.05])


OPTIMIZERS: dict[str, Callable[[], Any]] = {
    "sgd": lambda: flow.optimizer.SGD(_schedule(), momentum=0),
    "momentum": lambda: flow.optimizer.SGD(_schedule(), momentum=0.9),
    "adam": lambda: flow.optimizer.Adam(_schedule(), do_bias_correction=True),
    "lazy_adam": lambda: flow.optimizer.LazyAdam(_schedule()),
    "rmsprop": lambda: flow.optimizer.RMSProp(_schedule(), centered=True),
    "clipped_sgd": lambda: flow.optimizer.SGD(
        _schedule(), momentum=0.5, grad_clipping=flow.optimizer.grad_clipping.by_global_norm(0.3)),
}


def define(n: int | None, batch: int, optimizer: str, l2: float = 0.0) -> Any:
    """A dense layer trained on the squared error, N micro-batches of ``batch`` rows per update."""
    cfg = flow.function_config()
    if n is not None:
        cfg.train.num_gradient_accumulation_steps(n)

    @flow.global_function(type="train", function_config=cfg)
    def train(x: tp.Numpy.Placeholder((batch, IN)), y: tp.Numpy.Placeholder((batch, OUT))) -> tp.Numpy:
        w = flow.get_variable("w", shape=(IN, OUT), initializer=flow.constant_initializer(0.0),
                              regularizer=flow.regularizers.l2(l2) if l2 else None)
        loss = flow.math.square(flow.matmul(x, w) - y)
        OPTIMIZERS[optimizer]().minimize(loss)
        return loss

    flow.load_variables({"w": W0})
    return train


def run_big(optimizer: str, updates: int, n: int, l2: float = 0.0) -> dict[str, np.ndarray]:
    """``updates`` calls on N micro-batches concatenated, no accumulation: the reference."""
    flow.clear_default_session()
    job = define(None, 4 * n, optimizer, l2)
    for u in range(updates):
        job(X[:4 * n], Y[:4 * n] + u)
    store = get_default_session().variables
    return {name: value(name) for name in store.names()}


def run_accumulated(optimizer: str, updates: int, n: int, l2: float = 0.0) -> dict[str, np.ndarray]:
    flow.clear_default_session()
    job = define(n, 4, optimizer, l2)
    for u in range(updates):
        for k in range(n):
            job(X[4 * k:4 * k + 4], Y[4 * k:4 * k + 4] + u)
    store = get_default_session().variables
    return {name: value(name) for name in store.names()}


@pytest.mark.parametrize("optimizer", sorted(OPTIMIZERS))
@pytest.mark.parametrize("n", [2, 3])
def test_n_micro_batches_update_as_one_concatenated_batch(optimizer: str, n: int) -> None:
    big = run_big(optimizer, 3, n, l2=0.01)
    acc = run_accumulated(optimizer, 3, n, l2=0.01)
    assert big[STEP].tolist() == acc[STEP].tolist() == [3]
    assert acc[MICRO].tolist() == [3 * n]
    for name, ref in big.items():  # the variable and every optimizer slot
        np.testing.assert_allclose(acc[name], ref, rtol=2e-5, atol=1e-6, err_msg=name)
    assert not np.allclose(acc["w"], W0)


def test_variables_slots_and_step_change_on_the_nth_call_only() -> None:
    job = define(3, 4, "adam")
    store = get_default_session().variables
    job(X[:4], Y[:4])  # the first call declares every state variable
    names = ["w", "w-m", "w-v", "w-beta1_t", "w-beta2_t", STEP]
    start = {name: value(name) for name in names}
    job(X[4:8], Y[4:8])
    for name in names:
        assert np.array_equal(value(name), start[name]), name
    assert value(MICRO).tolist() == [2]
    assert "System-GradientAccumulation-train-w" in store.names()
    job(X[8:12], Y[8:12])
    assert value(STEP).tolist() == [1]
    for name in ("w", "w-m", "w-v", "w-beta1_t"):
        assert not np.array_equal(value(name), start[name]), name


def test_returned_loss_is_each_micro_batch_with_the_variables_of_the_last_update() -> None:
    job = define(2, 4, "sgd")
    w = W0.copy()
    for u in range(2):
        grads = []
        for k in range(2):
            x, y = X[4 * k:4 * k + 4], Y[4 * k:4 * k + 4]
            loss = job(x, y)
            np.testing.assert_allclose(loss, (x @ w - y) ** 2, rtol=1e-5, atol=1e-6)
            grads.append(2 * x.T @ (x @ w - y))
        # the legacy scale: the summed gradient over N * (loss elements of one micro-batch)
        w = w - (0.1 if u == 0 else 0.05) * (grads[0] + grads[1]) / (2 * 4 * OUT)
        np.testing.assert_allclose(value("w"), w, rtol=1e-5, atol=1e-6)


def test_steps_one_is_the_plain_job() -> None:
    job = define(1, 4, "momentum")
    job(X[:4], Y[:4])
    ops = {node.op for node in job.plan().order}
    assert not any(op.startswith("optim_grad_accumulate") for op in ops)
    assert MICRO not in get_default_session().variables.names()
    assert all("accumulation_steps" not in node.attrs for node in job.plan().order)


def test_checkpoint_mid_accumulation_holds_the_partial_sums(tmp_path: Any) -> None:
    reference = run_accumulated("momentum", 2, 3)
    flow.clear_default_session()
    job = define(3, 4, "momentum")
    for k in range(3):
        job(X[4 * k:4 * k + 4], Y[4 * k:4 * k + 4])
    job(X[:4], Y[:4] + 1)  # the first micro-batch of the second update, then save
    flow.sync_default_session()
    flow.checkpoint.save(str(tmp_path / "mid"))

    flow.clear_default_session()
    job = define(3, 4, "momentum")
    flow.load_variables(flow.checkpoint.get(str(tmp_path / "mid")))
    assert value(MICRO).tolist() == [4]
    for k in (1, 2):
        job(X[4 * k:4 * k + 4], Y[4 * k:4 * k + 4] + 1)
    np.testing.assert_allclose(value("w"), reference["w"], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(value("w-momentum"), reference["w-momentum"], rtol=1e-6, atol=1e-7)
    assert value(STEP).tolist() == [2]


def test_checkpoint_without_accumulators_starts_a_fresh_cycle(tmp_path: Any) -> None:
    job = define(None, 4, "sgd")
    job(X[:4], Y[:4])
    flow.sync_default_session()
    flow.checkpoint.save(str(tmp_path / "plain"))
    flow.clear_default_session()
    job = define(2, 4, "sgd")
    job(X[:4], Y[:4])  # a half cycle that the load below discards
    flow.train.CheckPoint().load(str(tmp_path / "plain"))
    assert value(MICRO).tolist() == [0]
    w = value("w")
    job(X[4:8], Y[4:8])
    assert np.array_equal(value("w"), w)  # call 1 of a new cycle: no update yet
    job(X[8:12], Y[8:12])
    grad = sum(2 * x.T @ (x @ w - y) for x, y in ((X[4:8], Y[4:8]), (X[8:12], Y[8:12]))) / (2 * 4 * OUT)
    np.testing.assert_allclose(value("w"), w - 0.05 * grad, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("bad", [0, -2, 2.0, 1.5, True, "2", None])
def test_bad_step_counts_are_refused_by_name(bad: Any) -> None:
    cfg = flow.function_config()
    with pytest.raises(ConfigError, match="num_gradient_accumulation_steps"):
        cfg.train.num_gradient_accumulation_steps(bad)
    with pytest.raises(ConfigError, match="num_gradient_accumulation_steps"):
        cfg.train.num_gradient_accumulation_steps = bad


def test_a_predict_job_ignores_the_option() -> None:
    cfg = flow.function_config()
    cfg.train.num_gradient_accumulation_steps(4)

    @flow.global_function(type="predict", function_config=cfg)
    def predict(x: tp.Numpy.Placeholder((4, IN))) -> tp.Numpy:
        w = flow.get_variable("w", shape=(IN, OUT), initializer=flow.constant_initializer(1.0))
        return flow.matmul(x, w)

    np.testing.assert_allclose(predict(X[:4]), X[:4] @ np.ones((IN, OUT), np.float32), rtol=1e-6)
    assert MICRO.replace("train", "predict") not in get_default_session().variables.names()
