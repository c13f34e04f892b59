"""Training through the oneflow face: legacy names and numbers (test_model_io, test_get_variable,
test_optimizers, version-0.1 train config), with the op, typing and optim packages together."""
import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core import FlowjobError, get_default_session


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


def value(name: str) -> np.ndarray:
    flow.sync_default_session()
    return get_default_session().variables.get(name)


def test_update_is_lr_over_the_loss_size_and_returns_the_old_value():
    """Legacy test_get_variable / test_model_io: loss = var + x, so each step moves var by lr / var.size."""

    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
        var = flow.get_variable("var", shape=(2, 3), initializer=flow.constant_initializer(1.0))
        loss = var + x
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.6]), momentum=0).minimize(loss)
        return var

    x = np.zeros((2, 3), np.float32)
    flow.train.CheckPoint().init()
    seen = [train(x) for _ in range(3)]
    for i, got in enumerate(seen):
        np.testing.assert_allclose(got, np.full((2, 3), 1.0 - i * 0.1), rtol=1e-6)
    np.testing.assert_allclose(value("var"), np.full((2, 3), 0.7), rtol=1e-6)
    assert value("System-Train-TrainStep-train").tolist() == [3]


def test_momentum_matches_the_keras_formula():
    """Legacy test_optimizers: m = beta * m - lr * g; w = w + m."""
    rng = np.random.default_rng(0)
    w0 = rng.standard_normal((4,)).astype(np.float32)
    xs = [rng.standard_normal((4,)).astype(np.float32) for _ in range(4)]

    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((4,))) -> tp.Numpy:
        w = flow.get_variable("w", shape=(4,), initializer=lambda s, d, r: w0.astype(d))
        loss = w * x
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.2]), momentum=0.8).minimize(loss)
        return w

    w, m = w0.astype(np.float64), np.zeros(4)
    for x in xs:
        np.testing.assert_allclose(train(x), w, rtol=1e-5)
        m = 0.8 * m - 0.2 * x / 4
        w = w + m
    np.testing.assert_allclose(value("w"), w, rtol=1e-5)
    np.testing.assert_allclose(value("w-momentum"), m, rtol=1e-5)


def test_watch_diff_sees_raw_gradients_while_the_update_uses_scaled_ones():
    """Legacy test_watch_diff: minimize(x) for x of 10 elements shows ones; the update is lr / 10."""
    seen = []

    @flow.global_function(type="train")
    def train() -> tp.Numpy:
        x = flow.get_variable("x", shape=(10,), initializer=flow.constant_initializer(0.0))
        flow.watch_diff(x, lambda d: seen.append(d))
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [1.0]), momentum=0).minimize(x)
        return x

    train()
    assert [d.tolist() for d in seen] == [[1.0] * 10]
    np.testing.assert_allclose(value("x"), np.full(10, -0.1), rtol=1e-6)


def test_version_0_1_program_trains_with_the_train_config():
    cfg = flow.function_config()
    cfg.default_data_type(flow.float)
    cfg.train.primary_lr(0.1)
    cfg.train.model_update_conf({"naive_conf": {}})

    @flow.global_function(cfg)
    def train_job(x=flow.FixedTensorDef((8, 5)), y=flow.FixedTensorDef((8,), dtype=flow.int32)):
        logits = flow.layers.dense(x, 3, kernel_initializer=flow.truncated_normal(0.1))
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(y, logits)
        flow.losses.add_loss(loss)
        return loss

    rng = np.random.default_rng(1)
    x = rng.standard_normal((8, 5)).astype(np.float32)
    y = rng.integers(0, 3, 8).astype(np.int32)
    flow.train.CheckPoint().init()
    # convex softmax regression with plain SGD at lr 0.1: the loss falls at every step (the initial
    # weights depend on how many ops earlier tests named, so the margin is kept wide)
    losses = [train_job(x, y).get().mean() for _ in range(60)]
    assert all(b < a for a, b in zip(losses, losses[1:]))
    assert losses[-1] < losses[0] * 0.7
    names = get_default_session().variables.names()
    assert "System-Train-TrainStep-train_job" in names
    assert not any(n.endswith("-momentum") for n in names)


@pytest.mark.parametrize("make", [
    lambda s: flow.optimizer.Adam(s, do_bias_correction=True),
    lambda s: flow.optimizer.AdamW(s, weight_decay=1e-4),
    lambda s: flow.optimizer.RMSProp(s),
    lambda s: flow.optimizer.LAMB(s),
    lambda s: flow.optimizer.SGD(s, grad_clipping=flow.optimizer.grad_clipping.by_global_norm(1.0)),
])
def test_every_optimizer_fits_a_small_problem(make):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((16, 6)).astype(np.float32)
    y = (x @ rng.standard_normal((6, 3))).argmax(1).astype(np.int32)

    @flow.global_function(type="train")
    def train_job(images: tp.Numpy.Placeholder((16, 6)),
                  labels: tp.Numpy.Placeholder((16,), dtype=flow.int32)) -> tp.Numpy:
        logits = flow.layers.dense(images, 3, kernel_initializer=flow.truncated_normal(0.1), name="fit")
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
        sched = flow.optimizer.CosineScheduler(0.05, 100, warmup=flow.optimizer.warmup.linear(5, 0.1))
        make(sched).minimize(loss)
        return loss

    flow.train.CheckPoint().init()
    losses = [float(train_job(x, y).mean()) for _ in range(60)]
    assert losses[-1] < losses[0] * 0.8, losses[::10]


def test_minimize_in_a_predict_job_trains_it_as_legacy_did():
    grads = []

    @flow.global_function(type="predict")
    def eval_job(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        w = flow.get_variable("w", shape=(2,), initializer=flow.constant_initializer(1.0))
        flow.watch_diff(w, grads.append)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(w * x)
        return w

    with pytest.warns(UserWarning, match="job 'eval_job' is declared type='predict' and calls SGD.minimize"):
        first = eval_job(np.ones(2, np.float32))
    second = eval_job(np.ones(2, np.float32))
    assert first.tolist() == [1.0, 1.0]
    assert grads[0].tolist() == [1.0, 1.0]
    np.testing.assert_allclose(second, [0.95, 0.95])  # the mean gradient 1/2, learning rate 0.1


def test_train_job_without_optimizer_names_the_job():
    @flow.global_function(type="train")
    def lonely(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        w = flow.get_variable("w", shape=(2,))
        flow.losses.add_loss(w * x)
        return w

    with pytest.raises(FlowjobError, match="train job 'lonely' has a loss but no optimizer"):
        lonely(np.ones(2, np.float32))


def test_face_exports():
    for name in ("SGD", "Adam", "AdamW", "RMSProp", "LAMB", "LARS", "PiecewiseConstantScheduler",
                 "PiecewiseScalingScheduler", "CosineScheduler", "PolynomialScheduler", "ExponentialScheduler",
                 "grad_clipping", "warmup"):
        assert hasattr(flow.optimizer, name), name
    assert flow.optimizer.grad_clipping.by_global_norm(1.0).clip_norm == 1.0
    assert flow.regularizers.l1_l2(0.1, 0.2).l2 == 0.2
