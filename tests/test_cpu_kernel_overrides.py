"""The cpu backend's kernel overrides (Winograd conv, blocked max pooling, BLAS-fused SGD) against a
session whose kernel registry has none: a conv-net training job runs either way to the same losses
and variables (float32 rounding aside), and the fusion passes fire exactly where they did, with the
SGD-into-GEMM fusion only where its BLAS kernel runs."""
from __future__ import annotations

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core import get_default_session

BATCH = 8


@pytest.fixture(autouse=True)
def fresh_session(monkeypatch: pytest.MonkeyPatch):
    for name in ("FLOWJOB_CONV_ALGORITHM", "FLOWJOB_BLAS_FUSION", "FLOWJOB_FUSION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("FLOWJOB_DEVICE", "cpu")  # also where a GPU would be the default device
    flow.clear_default_session()
    yield
    flow.clear_default_session()


def _train(overrides: bool, steps: int = 3) -> tuple[list[np.ndarray], dict[str, np.ndarray], list[str], list]:
    """Losses, variables, plan ops and kernels of a small conv net trained with plain SGD."""
    flow.clear_default_session()
    session = get_default_session()
    if not overrides:
        for op in session.registries.kernels.overrides("cpu"):
            session.registries.kernels.remove(op, "cpu")
    rng = np.random.default_rng(0)
    images = rng.random((BATCH, 1, 12, 12), dtype=np.float32)
    labels = rng.integers(0, 5, BATCH).astype(np.int32)
    init = flow.random_normal_initializer(stddev=0.2, seed=3)

    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((BATCH, 1, 12, 12)), y: tp.Numpy.Placeholder((BATCH,), dtype=flow.int32)
              ) -> tp.Numpy:
        a1 = flow.layers.conv2d(x, 16, 5, padding="SAME", activation=flow.nn.relu, name="conv1",
                                kernel_initializer=init)
        p1 = flow.nn.max_pool2d(a1, 2, 2, "SAME", name="pool1")
        a2 = flow.layers.conv2d(p1, 16, 5, padding="SAME", activation=flow.nn.relu, name="conv2",
                                kernel_initializer=init)
        p2 = flow.nn.max_pool2d(a2, 2, 2, "SAME", name="pool2")
        hidden = flow.layers.dense(flow.reshape(p2, [BATCH, -1]), 32, activation=flow.nn.relu,
                                   kernel_initializer=init, name="dense1")
        logits = flow.layers.dense(hidden, 5, kernel_initializer=init, name="dense2")
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(y, logits)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)
        return loss

    losses = [np.array(train(images, labels), copy=True) for _ in range(steps)]
    flow.sync_default_session()
    plan = train.plan()
    variables = {name: np.array(session.variables.get(name), copy=True) for name in session.variables.names()}
    return losses, variables, [n.op for n in plan.order], list(plan.step.__globals__.values())


def test_a_job_without_the_overrides_trains_the_same() -> None:
    losses, variables, ops, kernels = _train(overrides=True)
    ref_losses, ref_variables, ref_ops, ref_kernels = _train(overrides=False)
    for got, want in zip(losses, ref_losses):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    assert variables.keys() == ref_variables.keys()
    for name, value in variables.items():
        np.testing.assert_allclose(value, ref_variables[name], rtol=1e-3, atol=1e-5, err_msg=name)
    modules = {type(k).__module__ for k in kernels}
    # conv2's Winograd, blocked pools
    tuned = {"flowjob_ops.kernels.winograd", "flowjob_ops.overrides.cpu.pool_cache_blocked"}
    assert tuned <= modules
    assert not tuned & {type(k).__module__ for k in ref_kernels}
    # conv and dense fusions fire with or without the overrides (they check only the ops' own kernels)
    for fused in ("conv2d_bias", "matmul_bias", "max_pool2d_relu_grad"):
        assert fused in ops and fused in ref_ops, fused
    # SGD folds into its gradient's GEMM only where that kernel is one BLAS call
    from flowjob_optim import _blas
    assert ("optim_sgd_matmul_update" in ops) == (_blas.gemm(np.float32) is not None)
    assert "optim_sgd_matmul_update" not in ref_ops
    assert len([op for op in ops if op.startswith("optim_sgd")]) == len(
        [op for op in ref_ops if op.startswith("optim_sgd")])


def test_the_blas_switch_keeps_the_unfused_update(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLOWJOB_BLAS_FUSION", "0")
    _, _, ops, _ = _train(overrides=True, steps=1)
    assert "optim_sgd_matmul_update" not in ops and "optim_sgd_update" in ops
