"""The update-fusion pass: folded 1/N scales and SGD fused into its gradient's matmul give the
unfused results (float32 rounding aside); raw gradients and returned values are untouched."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core import get_default_session
from flowjob_optim import fusion

BATCH = 16


@pytest.fixture(autouse=True)
def fresh_session(monkeypatch: pytest.MonkeyPatch):
    # the BLAS-fused update is the cpu backend's: pinned there, also where a GPU would be the default
    monkeypatch.setenv("FLOWJOB_DEVICE", "cpu")
    flow.clear_default_session()
    yield
    flow.clear_default_session()


def _data(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.random((BATCH, 1, 6, 6), dtype=np.float32), rng.integers(0, 5, BATCH).astype(np.int32)


def _mlp_run(make_optimizer: Any, steps: int = 4, watch: bool = False, dtype: Any = flow.float32) -> dict:
    """Train a small MLP for a few steps; the variables, losses and watched gradients."""
    flow.clear_default_session()
    images, labels = _data()
    init = flow.random_normal_initializer(stddev=0.3, seed=1)
    seen: dict[str, list] = {"diff": []}

    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((BATCH, 1, 6, 6)), y: tp.Numpy.Placeholder((BATCH,), dtype=flow.int32)
              ) -> tp.Numpy:
        flat = flow.reshape(x, [BATCH, -1])
        h = flow.layers.dense(flat, 20, activation=flow.nn.relu, kernel_initializer=init, name="h")
        logits = flow.layers.dense(h, 5, kernel_initializer=init, name="o")
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(y, logits)
        if watch:
            w = flow.get_variable("h-weight", shape=(20, 36))
            flow.watch_diff(w, lambda g: seen["diff"].append(g.numpy().copy()))
        make_optimizer().minimize(loss)
        return loss

    losses = [train(images, labels).copy() for _ in range(steps)]
    flow.sync_default_session()
    session = get_default_session()
    plan_ops = [n.op for n in train.plan().order]
    values = {n: session.variables.get(n).copy() for n in ("h-weight", "h-bias", "o-weight", "o-bias")}
    return {"values": values, "losses": losses, "ops": plan_ops, "diff": seen["diff"]}


def _sgd() -> Any:
    return flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.3]), momentum=0)


def _unfused(monkeypatch: Any, make_optimizer: Any, **kw: Any) -> dict:
    with monkeypatch.context() as m:
        m.setattr(fusion, "run", lambda job, ctx: None)
        return _mlp_run(make_optimizer, **kw)


def _close(got: dict, want: dict) -> None:
    for name, value in want["values"].items():
        np.testing.assert_allclose(got["values"][name], value, rtol=2e-5, atol=2e-6, err_msg=name)
    np.testing.assert_allclose(np.array(got["losses"]), np.array(want["losses"]), rtol=2e-5, atol=2e-6)


def test_sgd_fuses_into_the_weight_gradient_matmul(monkeypatch):
    want = _unfused(monkeypatch, _sgd)
    got = _mlp_run(_sgd)
    assert "scalar_mul" in want["ops"] and "optim_sgd_matmul_update" not in want["ops"]
    assert "scalar_mul" not in got["ops"]
    assert got["ops"].count("optim_sgd_matmul_update") == 2  # both weights; the biases keep optim_sgd_update
    assert got["ops"].count("optim_sgd_update") == 2
    _close(got, want)


@pytest.mark.parametrize("make", [
    lambda: flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.3]), momentum=0.9),
    lambda: flow.optimizer.Adam(flow.optimizer.PiecewiseConstantScheduler([], [0.01])),
    lambda: flow.optimizer.SGDW(flow.optimizer.PiecewiseConstantScheduler([], [0.3]), momentum=0, weight_decay=0.1),
    lambda: flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.3]), momentum=0,
                               grad_clipping=flow.optimizer.grad_clipping.by_global_norm(0.5)),
], ids=["momentum", "adam", "sgdw", "clipped"])
def test_folded_scale_matches_the_scalar_mul_node(monkeypatch, make):
    want = _unfused(monkeypatch, make)
    got = _mlp_run(make)
    assert "optim_sgd_matmul_update" not in got["ops"]
    _close(got, want)


def test_watched_gradient_stays_raw_and_unfused(monkeypatch):
    want = _unfused(monkeypatch, _sgd, watch=True)
    got = _mlp_run(_sgd, watch=True)
    # the watched weight keeps its matmul (its raw gradient is read after the step); the other one fuses
    assert got["ops"].count("optim_sgd_matmul_update") == 1
    assert len(got["diff"]) == 4
    for g, w in zip(got["diff"], want["diff"]):
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-6)
    _close(got, want)


def test_fused_kernel_matches_the_unfused_update_for_every_transpose():
    from flowjob_core import BlobSpec, KernelContext
    from flowjob_optim.update_ops import SGD_MATMUL_UPDATE

    rng = np.random.default_rng(3)
    for ta in (False, True):
        for tb in (False, True):
            a = rng.standard_normal((7, 5) if ta else (5, 7)).astype(np.float32)
            b = rng.standard_normal((4, 7) if tb else (7, 4)).astype(np.float32)
            w = rng.standard_normal((5, 4)).astype(np.float32)
            lr = np.array([0.25], np.float32)
            attrs = {"transpose_a": ta, "transpose_b": tb, "grad_scale": 0.125}
            specs = tuple(BlobSpec(v.shape, v.dtype) for v in (w, a, b, lr))
            assert SGD_MATMUL_UPDATE.infer(specs, attrs) == []
            for xp_is_numpy in (True, False):
                xp = np if xp_is_numpy else _NumpyProxy()
                context = KernelContext(xp, None, SGD_MATMUL_UPDATE.name, "u", attrs, specs, ())
                kernel = SGD_MATMUL_UPDATE.kernel(context)
                got = w.copy()
                kernel(got, a, b, lr)
                grad = (a.T if ta else a) @ (b.T if tb else b)
                want = w - np.float32(0.25) * (np.float32(0.125) * grad)
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=f"{ta} {tb} {xp_is_numpy}")


class _NumpyProxy:
    """numpy behind another object: kernels take their generic (non-BLAS) path."""

    def __getattr__(self, name: str) -> Any:
        return getattr(np, name)


def test_a_gradient_matmul_reading_a_trained_variable_is_not_fused(monkeypatch):
    """loss = x + a @ b: the gradient of each variable reads the other, which its update writes in place."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((8, 6)).astype(np.float32)
    a0 = rng.standard_normal((8, 4)).astype(np.float32)
    b0 = rng.standard_normal((4, 6)).astype(np.float32)

    def run():
        flow.clear_default_session()

        @flow.global_function(type="train")
        def train(v: tp.Numpy.Placeholder((8, 6))) -> tp.Numpy:
            a = flow.get_variable("a", shape=(8, 4), initializer=lambda s, d, r: a0.astype(d))
            b = flow.get_variable("b", shape=(4, 6), initializer=lambda s, d, r: b0.astype(d))
            loss = flow.math.square(v + flow.matmul(a, b))
            _sgd().minimize(loss)
            return loss

        for _ in range(3):
            train(x)
        flow.sync_default_session()
        s = get_default_session()
        return [n.op for n in train.plan().order], s.variables.get("a"), s.variables.get("b")

    with monkeypatch.context() as m:
        m.setattr(fusion, "run", lambda job, ctx: None)
        _, want_a, want_b = run()
    ops, got_a, got_b = run()
    assert "optim_sgd_matmul_update" not in ops
    np.testing.assert_allclose(got_a, want_a, rtol=2e-5, atol=2e-6)
    np.testing.assert_allclose(got_b, want_b, rtol=2e-5, atol=2e-6)
