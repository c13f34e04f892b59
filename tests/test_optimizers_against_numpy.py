"""LazyAdam, AdamW, LARS and LAMB through the oneflow face, against numpy over several steps.

The references follow legacy OneFlow v0.4 (``oneflow/python/ops/optimizer.py``, the ``adam_update``,
``lars_update`` and ``lamb_update`` kernels and their job-rewriter passes):

* LazyAdam with a dense gradient is Adam with bias correction always on
  (``lr_t = lr * sqrt(1 - b2^(t+1)) / (1 - b1^(t+1))``); every element is updated, also where the
  gradient is zero (only sparse gradients, which flowjob does not produce, were updated row-wise).
* AdamW adds ``wd * w`` inside the (bias-corrected) learning rate's product.
* LARS: ``trust = coeff * |w| / (eps + |g| + wd * |w|)``, or 1 when either norm is 0;
  ``m = beta * m - lr * trust * g``; ``w = w + m - lr * trust * wd * w``.
* LAMB: ``u = m_hat / (sqrt(v_hat) + eps)`` (epsilon outside the root), ``r = |w| / |u|`` (1 when
  either is 0), ``w -= lr * r * (u + wd * w)``.
"""
from typing import Any, Callable

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core import ConfigError, get_default_session

SHAPE = (10,)
STEPS = 10
RNG = np.random.default_rng(11)
W0 = RNG.uniform(0, 100, SHAPE).astype(np.float32)
MASKS = [RNG.uniform(size=SHAPE).astype(np.float32) for _ in range(STEPS)]


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


def value(name: str) -> np.ndarray:
    flow.sync_default_session()
    return get_default_session().variables.get(name)


def train(make: Callable[[Any], Any], lr: float, masks: list[np.ndarray] = MASKS,
          w0: np.ndarray = W0) -> list[np.ndarray]:
    """Legacy test_optimizers' job: loss = reduce_mean(x * mask), so the gradient is mask / x.size.
    Returns the variable before each step and after the last."""

    @flow.global_function(type="train")
    def job(mask: tp.Numpy.Placeholder(SHAPE)) -> tp.Numpy:
        x = flow.get_variable("x", shape=SHAPE, initializer=lambda s, d, r: w0.astype(d))
        loss = flow.math.reduce_mean(x * mask)
        make(flow.optimizer.PiecewiseConstantScheduler([], [lr])).minimize(loss)
        return x

    seen = [job(mask) for mask in masks]
    return seen + [value("x")]


def reference(update: Callable[[np.ndarray, np.ndarray, int], np.ndarray], masks: list[np.ndarray] = MASKS,
              w0: np.ndarray = W0) -> list[np.ndarray]:
    w = w0.astype(np.float64)
    out = [w.copy()]
    for t, mask in enumerate(masks):
        w = update(w, mask.astype(np.float64) / w.size, t)
        out.append(w.copy())
    return out


def assert_steps(got: list[np.ndarray], want: list[np.ndarray], rtol: float = 1e-4, atol: float = 1e-4) -> None:
    for step, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=f"after {step} step(s)")


def adam_reference(b1: float, b2: float, eps: float, lr: float, wd: float = 0.0,
                   bias_correction: bool = True) -> Callable[[np.ndarray, np.ndarray, int], np.ndarray]:
    m = v = 0.0

    def update(w: np.ndarray, g: np.ndarray, t: int) -> np.ndarray:
        nonlocal m, v
        lr_t = lr * np.sqrt(1 - b2 ** (t + 1)) / (1 - b1 ** (t + 1)) if bias_correction else lr
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        return w - lr_t * (m / (np.sqrt(v) + eps) + wd * w)

    return update


# LazyAdam ------------------------------------------------------------------
def test_lazy_adam_is_bias_corrected_adam():
    """Legacy test_lazy_adam: beta2 0.99, epsilon 1e-9, lr 1, 10 steps on a (10,) variable."""
    ones = [np.ones(SHAPE, np.float32)] * STEPS
    got = train(lambda s: flow.optimizer.LazyAdam(s, beta1=0.9, beta2=0.99, epsilon=1e-9), 1.0, ones)
    assert_steps(got, reference(adam_reference(0.9, 0.99, 1e-9, 1.0), ones))


def test_lazy_adam_updates_elements_whose_gradient_is_zero():
    """A dense gradient updates every element: where it is 0 the first moment still moves the weight."""
    masks = [m.copy() for m in MASKS]
    for m in masks[3:]:
        m[:4] = 0.0
    got = train(lambda s: flow.optimizer.LazyAdam(s, beta2=0.99), 0.5, masks)
    want = reference(adam_reference(0.9, 0.99, 1e-8, 0.5), masks)
    assert_steps(got, want)
    assert not np.allclose(got[-1][:4], got[4][:4])  # they moved after their gradient became 0


def test_lazy_adam_keeps_legacy_arguments():
    opt = flow.optimizer.LazyAdam(flow.optimizer.PiecewiseConstantScheduler([], [0.1]))
    assert (opt.beta1, opt.beta2, opt.epsilon) == (0.9, 0.999, 1e-8)
    with pytest.raises(TypeError):
        flow.optimizer.LazyAdam(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), do_bias_correction=False)


def test_version_0_1_lazy_adam_conf_is_bias_corrected():
    cfg = flow.function_config()
    cfg.train.primary_lr(0.5)
    cfg.train.model_update_conf({"lazy_adam_conf": {"beta1": 0.8, "beta2": 0.99, "epsilon": 1e-7}})

    @flow.global_function(cfg)
    def job(mask=flow.FixedTensorDef(SHAPE)):
        x = flow.get_variable("x", shape=SHAPE, initializer=lambda s, d, r: W0.astype(d))
        flow.losses.add_loss(flow.math.reduce_mean(x * mask))
        return x

    for mask in MASKS[:4]:
        job(mask).get()
    want = reference(adam_reference(0.8, 0.99, 1e-7, 0.5), MASKS[:4])
    np.testing.assert_allclose(value("x"), want[-1], rtol=1e-4, atol=1e-4)


def test_version_0_1_lazy_adam_conf_has_no_bias_correction_switch():
    cfg = flow.function_config()
    cfg.train.primary_lr(0.5)
    cfg.train.model_update_conf({"lazy_adam_conf": {"do_bias_correction": False}})

    @flow.global_function(cfg)
    def job(mask=flow.FixedTensorDef(SHAPE)):
        x = flow.get_variable("x", shape=SHAPE)
        flow.losses.add_loss(flow.math.reduce_mean(x * mask))
        return x

    with pytest.raises(ConfigError, match="lazy_adam_conf.*unknown field.*do_bias_correction"):
        job(MASKS[0]).get()


# AdamW ---------------------------------------------------------------------
@pytest.mark.parametrize("bias_correction", [True, False])
def test_adamw_decays_inside_the_learning_rate(bias_correction):
    """Legacy test_adamw: beta2 0.99, epsilon 1e-9, weight decay 0.9, lr 1 (with bias correction)."""
    lr = 1.0 if bias_correction else 0.05
    got = train(lambda s: flow.optimizer.AdamW(s, beta1=0.9, beta2=0.99, epsilon=1e-9, weight_decay=0.9,
                                               do_bias_correction=bias_correction), lr)
    assert_steps(got, reference(adam_reference(0.9, 0.99, 1e-9, lr, 0.9, bias_correction)))


def test_adamw_weight_decay_excludes_a_variable_by_name():
    got = train(lambda s: flow.optimizer.AdamW(s, weight_decay=0.5, weight_decay_excludes=["^x$"]), 0.1)
    assert_steps(got, reference(adam_reference(0.9, 0.999, 1e-8, 0.1, 0.0, False)))


# LARS ----------------------------------------------------------------------
def lars_reference(beta: float, eps: float, coeff: float, lr: float,
                   wd: float) -> Callable[[np.ndarray, np.ndarray, int], np.ndarray]:
    m = 0.0

    def update(w: np.ndarray, g: np.ndarray, t: int) -> np.ndarray:
        nonlocal m
        w_norm, g_norm = np.linalg.norm(w), np.linalg.norm(g)
        trust = coeff * w_norm / (eps + g_norm + wd * w_norm) if w_norm > 0 and g_norm > 0 else 1.0
        m = beta * m - lr * trust * g
        return w + m - lr * trust * wd * w

    return update


def test_lars_with_weight_decay():
    """Legacy test_lars: momentum 0.9, epsilon 1e-9, coefficient 1e-4, weight decay 0.9, lr 1."""
    got = train(lambda s: flow.optimizer.LARS(s, momentum_beta=0.9, epsilon=1e-9, lars_coefficient=0.0001,
                                              weight_decay=0.9), 1.0)
    assert_steps(got, reference(lars_reference(0.9, 1e-9, 0.0001, 1.0, 0.9)), rtol=1e-5, atol=1e-6)


def test_lars_trust_ratio_is_1_when_the_weights_are_zero():
    zero = np.zeros(SHAPE, np.float32)
    got = train(lambda s: flow.optimizer.LARS(s, lars_coefficient=0.01), 0.5, w0=zero)
    want = reference(lars_reference(0.9, 1e-9, 0.01, 0.5, 0.0), w0=zero)
    np.testing.assert_allclose(got[1], -0.5 * MASKS[0] / MASKS[0].size, rtol=1e-5)  # the plain learning rate
    assert_steps(got, want, rtol=1e-5, atol=1e-6)


def test_lars_legacy_positional_arguments():
    sched = flow.optimizer.PiecewiseConstantScheduler([], [0.1])
    opt = flow.optimizer.LARS(sched, 0.8, 1e-7, 0.001, None, 0.25, None, "bias")
    assert (opt.momentum_beta, opt.epsilon, opt.lars_coefficient) == (0.8, 1e-7, 0.001)
    assert opt.weight_decay_for("dense-weight") == 0.25 and opt.weight_decay_for("dense-bias") == 0.0


# LAMB ----------------------------------------------------------------------
def lamb_reference(b1: float, b2: float, eps: float, lr: float,
                   wd: float) -> Callable[[np.ndarray, np.ndarray, int], np.ndarray]:
    m = v = 0.0

    def update(w: np.ndarray, g: np.ndarray, t: int) -> np.ndarray:
        nonlocal m, v
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        u = (m / (1 - b1 ** (t + 1))) / (np.sqrt(v / (1 - b2 ** (t + 1))) + eps)
        w_norm, u_norm = np.linalg.norm(w), np.linalg.norm(u)
        trust = w_norm / u_norm if w_norm > 0 and u_norm > 0 else 1.0
        return w - lr * trust * (u + wd * w)

    return update


def test_lamb_with_weight_decay():
    """Legacy test_lamb: (10,), epsilon 1e-6, weight decay 0.01, lr 1e-4, 10 steps."""
    got = train(lambda s: flow.optimizer.LAMB(s, beta1=0.9, beta2=0.999, epsilon=1e-6, weight_decay=0.01), 1e-4)
    assert_steps(got, reference(lamb_reference(0.9, 0.999, 1e-6, 1e-4, 0.01)), rtol=1e-5, atol=1e-5)


def test_lamb_epsilon_is_added_after_the_root():
    """With an epsilon of the gradient's size, adding it inside or outside the root differs visibly."""
    got = train(lambda s: flow.optimizer.LAMB(s, epsilon=0.05), 0.01)
    assert_steps(got, reference(lamb_reference(0.9, 0.999, 0.05, 0.01, 0.0)), rtol=1e-5, atol=1e-5)


def test_lamb_legacy_positional_arguments():
    sched = flow.optimizer.PiecewiseConstantScheduler([], [0.1])
    opt = flow.optimizer.LAMB(sched, 0.8, 0.99, 1e-7, None, 0.01, "weight")
    assert (opt.beta1, opt.beta2, opt.epsilon) == (0.8, 0.99, 1e-7)
    assert opt.weight_decay_for("dense-weight") == 0.01 and opt.weight_decay_for("dense-bias") == 0.0


# bad hyper-parameters --------------------------------------------------------
@pytest.mark.parametrize("make, message", [
    (lambda s: flow.optimizer.LazyAdam(s, beta1=1.0), r"LazyAdam: beta1 must be in \[0, 1\), got 1.0"),
    (lambda s: flow.optimizer.AdamW(s, beta2=-0.1), r"AdamW: beta2 must be in \[0, 1\), got -0.1"),
    (lambda s: flow.optimizer.LAMB(s, epsilon=-1e-6), r"LAMB: epsilon must be >= 0, got -1e-06"),
    (lambda s: flow.optimizer.LARS(s, momentum_beta=1.5), r"LARS: momentum_beta must be in \[0, 1\), got 1.5"),
    (lambda s: flow.optimizer.LARS(s, lars_coefficient=0.0), r"LARS: lars_coefficient must be > 0, got 0.0"),
    (lambda s: flow.optimizer.AdamW(s, weight_decay=-0.1), r"AdamW: weight_decay must be >= 0, got -0.1"),
])
def test_bad_hyper_parameters_name_the_optimizer_and_argument(make, message):
    with pytest.raises(ValueError, match=message):
        make(flow.optimizer.PiecewiseConstantScheduler([], [0.1]))
