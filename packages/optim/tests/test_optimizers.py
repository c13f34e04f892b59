"""Update formulas through real train jobs, checked against numpy over several steps."""

from typing import Any, Callable

import numpy as np
import pytest

from flowjob_core import apply, get_variable
from flowjob_optim import api as opt

SHAPE = (3, 4)
N = 12  # loss elements: variable gradients are the raw ones divided by N
STEPS = 5
RNG = np.random.default_rng(7)
W0 = RNG.uniform(-1, 1, SHAPE).astype(np.float32)
XS = [RNG.uniform(-1, 1, SHAPE).astype(np.float32) for _ in range(STEPS)]


def _w0(shape: Any, dtype: Any, rng: Any) -> np.ndarray:
    return W0.astype(dtype)


def make_job(define: Callable[..., Any], toy: Any, optimizer: Callable[[], Any]) -> Any:
    """loss = (w - x)^2 elementwise, so the used gradient is 2 (w - x) / N; returns w (pre-update)."""

    def train(x: toy.Array(SHAPE)) -> toy.Sync:
        w = get_variable("w", shape=SHAPE, initializer=_w0)
        loss = apply("toy_square", [apply("toy_sub", [w, x])])
        optimizer().minimize(loss)
        return w

    return define(train)


def run(job: Any) -> tuple[list[np.ndarray], np.ndarray]:
    seen = [job(x) for x in XS]
    return seen, job.session.variables.get("w")


def grad(w: np.ndarray, x: np.ndarray) -> np.ndarray:
    return 2.0 * (w - x) / N


def reference(update: Callable[[np.ndarray, np.ndarray, int], np.ndarray]) -> list[np.ndarray]:
    """The weights before each step and after the last, in float64."""
    w = W0.astype(np.float64)
    out = [w.copy()]
    for t, x in enumerate(XS):
        w = update(w, grad(w, x.astype(np.float64)), t)
        out.append(w.copy())
    return out


def check(job: Any, expected: list[np.ndarray], rtol: float = 2e-5, atol: float = 2e-6) -> None:
    seen, final = run(job)
    for step, (got, want) in enumerate(zip(seen, expected)):
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=f"value returned by step {step}")
    np.testing.assert_allclose(final, expected[-1], rtol=rtol, atol=atol, err_msg="final value")


def constant(lr: float) -> Any:
    return opt.PiecewiseConstantScheduler([], [lr])


def test_sgd_without_momentum_is_the_naive_update(define, toy, session):
    check(make_job(define, toy, lambda: opt.SGD(constant(0.3), momentum=0)),
          reference(lambda w, g, t: w - 0.3 * g))
    assert "w-momentum" not in session.variables


def test_sgd_default_momentum_is_0_9(define, toy, session):
    m = np.zeros(SHAPE)

    def update(w: np.ndarray, g: np.ndarray, t: int) -> np.ndarray:
        nonlocal m
        m = 0.9 * m - 0.1 * g
        return w + m

    check(make_job(define, toy, lambda: opt.SGD(constant(0.1))), reference(update))
    assert session.variables["w-momentum"].trainable is False


def test_adam_without_bias_correction(define, toy, session):
    m, v = np.zeros(SHAPE), np.zeros(SHAPE)

    def update(w: np.ndarray, g: np.ndarray, t: int) -> np.ndarray:
        nonlocal m, v
        m = 0.8 * m + 0.2 * g
        v = 0.99 * v + 0.01 * g * g
        return w - 0.05 * m / (np.sqrt(v) + 1e-8)

    check(make_job(define, toy, lambda: opt.Adam(constant(0.05), beta1=0.8, beta2=0.99)), reference(update),
          rtol=1e-4, atol=1e-5)
    assert {"w-m", "w-v"} <= set(session.variables.names())
    assert "w-beta1_t" not in session.variables


def test_adam_with_bias_correction_keeps_beta_t_slots(define, toy, session):
    m, v = np.zeros(SHAPE), np.zeros(SHAPE)

    def update(w: np.ndarray, g: np.ndarray, t: int) -> np.ndarray:
        nonlocal m, v
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        lr = 0.01 * np.sqrt(1 - 0.999 ** (t + 1)) / (1 - 0.9 ** (t + 1))
        return w - lr * m / (np.sqrt(v) + 1e-8)

    check(make_job(define, toy, lambda: opt.Adam(constant(0.01), do_bias_correction=True)), reference(update),
          rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(session.variables.get("w-beta1_t"), [0.9 ** (STEPS + 1)], rtol=1e-5)
    np.testing.assert_allclose(session.variables.get("w-beta2_t"), [0.999 ** (STEPS + 1)], rtol=1e-5)


def test_adamw_decays_weights(define, toy, session):
    m, v = np.zeros(SHAPE), np.zeros(SHAPE)

    def update(w: np.ndarray, g: np.ndarray, t: int) -> np.ndarray:
        nonlocal m, v
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        return w - 0.01 * (m / (np.sqrt(v) + 1e-8) + 0.1 * w)

    check(make_job(define, toy, lambda: opt.AdamW(constant(0.01), weight_decay=0.1)), reference(update),
          rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("centered", [False, True])
def test_rmsprop(define, toy, session, centered):
    ms, mg = np.zeros(SHAPE), np.zeros(SHAPE)

    def update(w: np.ndarray, g: np.ndarray, t: int) -> np.ndarray:
        nonlocal ms, mg
        ms = 0.9 * ms + 0.1 * g * g
        mg = 0.9 * mg + 0.1 * g
        den = ms - mg * mg if centered else ms
        return w - 0.01 * g / np.sqrt(den + 1e-6)

    job = make_job(define, toy, lambda: opt.RMSProp(constant(0.01), decay_rate=0.9, epsilon=1e-6, centered=centered))
    check(job, reference(update), rtol=1e-4, atol=1e-5)
    assert ("w-mean_gradient" in session.variables) is centered
    assert "w-mean_square" in session.variables


def test_lars(define, toy, session):
    m = np.zeros(SHAPE)

    def update(w: np.ndarray, g: np.ndarray, t: int) -> np.ndarray:
        nonlocal m
        local = 0.5 * 0.01 * np.linalg.norm(w) / (1e-9 + np.linalg.norm(g))
        m = 0.9 * m - local * g
        return w + m

    check(make_job(define, toy, lambda: opt.LARS(constant(0.5), lars_coefficient=0.01)), reference(update),
          rtol=1e-4, atol=1e-5)


def test_lamb(define, toy, session):
    m, v = np.zeros(SHAPE), np.zeros(SHAPE)

    def update(w: np.ndarray, g: np.ndarray, t: int) -> np.ndarray:
        nonlocal m, v
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        u = (m / (1 - 0.9 ** (t + 1))) / (np.sqrt(v / (1 - 0.999 ** (t + 1))) + 1e-6)  # legacy v0.4: eps after the root
        return w - 0.01 * np.linalg.norm(w) / np.linalg.norm(u) * u

    check(make_job(define, toy, lambda: opt.LAMB(constant(0.01))), reference(update), rtol=1e-4, atol=1e-5)


def test_global_norm_clipping_scales_every_gradient(define, toy, session):
    def update(w: np.ndarray, g: np.ndarray, t: int) -> np.ndarray:
        norm = np.linalg.norm(g)
        return w - 0.5 * g * 0.05 / max(norm, 0.05)

    clip = opt.grad_clipping.by_global_norm(0.05)
    check(make_job(define, toy, lambda: opt.SGD(constant(0.5), momentum=0, grad_clipping=clip)), reference(update))


def test_clipping_leaves_small_gradients_alone(define, toy, session):
    clip = opt.grad_clipping.by_global_norm(1e6)
    check(make_job(define, toy, lambda: opt.SGD(constant(0.3), momentum=0, grad_clipping=clip)),
          reference(lambda w, g, t: w - 0.3 * g))


def test_regularizer_on_the_variable_adds_its_gradient_term(define, toy, session):
    from flowjob_optim.regularizers import l1_l2

    job = make_job(define, toy, lambda: opt.SGD(constant(0.3), momentum=0))
    # attach it where the pass looks for it: the variable names it by its key in the function's bindings
    job.ensure_traced().variables["w"].regularizer = job.bindings.add(l1_l2(0.01, 0.2))
    check(job, reference(lambda w, g, t: w - 0.3 * (g + 0.01 * np.sign(w) + 0.2 * w)))


def test_weight_decay_patterns_select_variables(define, toy, session):
    def train(x: toy.Array(SHAPE)) -> toy.Sync:
        w = get_variable("w", shape=SHAPE, initializer=_w0)
        b = get_variable("b", shape=SHAPE, initializer=_w0)
        loss = apply("toy_square", [apply("toy_sub", [apply("toy_sub", [w, x]), b])])
        opt.SGDW(constant(0.0), momentum=0, weight_decay=0.5, weight_decay_excludes=["^b$"]).minimize(loss)
        return w

    define(train)(XS[0])
    # lr 0: only the decay term could move a weight, and it is multiplied by lr too
    np.testing.assert_array_equal(session.variables.get("w"), W0)
    rule = opt.SGDW(constant(0.1), momentum=0, weight_decay=0.5, weight_decay_excludes="^b$")
    assert rule.weight_decay_for("w") == 0.5 and rule.weight_decay_for("b") == 0.0
    inc = opt.AdamW(constant(0.1), weight_decay=0.5, weight_decay_includes=["weight"])
    assert inc.weight_decay_for("dense-weight") == 0.5 and inc.weight_decay_for("dense-bias") == 0.0


def test_update_allocates_nothing_per_step(define, toy, session):
    import tracemalloc

    big = (256, 256)

    def train(x: toy.Array((1,))) -> toy.Sync:
        w = get_variable("big", shape=big, initializer=lambda s, d, r: np.ones(s, d))
        loss = apply("toy_square", [apply("toy_sub", [w, x])])
        opt.Adam(constant(0.01), do_bias_correction=True).minimize(loss)
        return apply("toy_sum", [loss])

    job = define(train)
    x = np.zeros((1,), np.float32)  # feeding copies the input: keep it tiny
    for _ in range(3):
        job(x)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        for _ in range(10):
            job(x)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert peak < 256 * 256 * 4 // 2, f"a step allocated {peak} bytes"
