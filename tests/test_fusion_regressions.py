"""Programs the fusion passes once broke, each checked against the unfused graph (``FLOWJOB_FUSION=0``).

Two scaled reductions added to a running sum: both ``scalar_mul`` nodes are the only reader of
their value and both feed one ``add``, so two elementwise chains could end at that add; the fused
job failed verification ("used before it is defined"). The fused results must be bitwise the
unfused ones (elementwise chains and ``matmul_bias`` promise that).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core import get_default_session
from flowjob_core.ir.job import Node


@pytest.fixture(autouse=True)
def fresh_session() -> Any:
    flow.clear_default_session()
    yield
    flow.clear_default_session()


def _both(run: Callable[[], tuple[Any, list[Node]]], monkeypatch: pytest.MonkeyPatch
          ) -> tuple[Any, Any, list[Node]]:
    """(fused result, unfused result, the fused plan's order), each from a fresh session."""
    results = {}
    for fused in (True, False):
        monkeypatch.setenv("FLOWJOB_FUSION", "1" if fused else "0")
        flow.clear_default_session()
        results[fused] = run()
    (got, order), (want, ref_order) = results[True], results[False]
    assert "elementwise_chain" not in [n.op for n in ref_order]
    return got, want, order


def _chain_members(order: list[Node]) -> list[str]:
    """Every node a chain swallowed, by the op it was: each node is in at most one chain."""
    return [op for n in order if n.op == "elementwise_chain" for op, _, _ in n.attrs["steps"]]


def test_two_scaled_reductions_added_to_a_running_sum(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1,)).astype(np.float32)
    a, b = (rng.standard_normal((3,)).astype(np.float32) for _ in range(2))

    def run() -> tuple[Any, list[str]]:
        @flow.global_function()
        def f(x: tp.Numpy.Placeholder((1,)), a: tp.Numpy.Placeholder((3,)), b: tp.Numpy.Placeholder((3,))
              ) -> tp.Numpy:
            acc = x + flow.math.reduce_sum(a, keepdims=True) * 2.0
            return acc + flow.math.reduce_sum(b, keepdims=True) * 2.0

        return f(x, a, b), f.plan().order

    got, want, order = _both(run, monkeypatch)
    # four candidates (two scalar_muls, two adds): one chain takes the last add, the other scale stays a node
    assert sorted(_chain_members(order)) == ["add", "add", "scalar_mul"]
    assert [n.op for n in order].count("scalar_mul") == 1
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(want, x + a.sum(keepdims=True) * np.float32(2) + b.sum(keepdims=True) * np.float32(2))


BATCH, FEATURES, HIDDEN, CLASSES = 6, 5, 4, 3


def _train_with_weight_penalties(steps: int, mean: bool) -> tuple[dict[str, Any], list[Node]]:
    rng = np.random.default_rng(1)
    images = rng.standard_normal((BATCH, FEATURES)).astype(np.float32)
    labels = rng.integers(0, CLASSES, BATCH).astype(np.int32)
    init = flow.random_normal_initializer(stddev=0.5, seed=2)

    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((BATCH, FEATURES)),
              y: tp.Numpy.Placeholder((BATCH,), dtype=flow.int32)) -> tp.Numpy:
        h = flow.layers.dense(x, HIDDEN, activation=flow.nn.relu, kernel_initializer=init, name="h")
        logits = flow.layers.dense(h, CLASSES, kernel_initializer=init, name="o")
        ce = flow.nn.sparse_softmax_cross_entropy_with_logits(y, logits)
        if mean:  # a scalar loss: the penalties join its elementwise chain
            ce = flow.math.reduce_mean(ce)
        w1 = flow.get_variable("h-weight", shape=(HIDDEN, FEATURES))
        w2 = flow.get_variable("o-weight", shape=(CLASSES, HIDDEN))
        loss = ce + flow.math.reduce_sum(w1 * w1) * 1e-3 + flow.math.reduce_sum(w2 * w2) * 1e-3
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1])).minimize(loss)
        return loss

    losses = [train(images, labels).copy() for _ in range(steps)]
    flow.sync_default_session()
    variables = get_default_session().variables
    values = {name: variables.get(name).copy() for name in ("h-weight", "h-bias", "o-weight", "o-bias")}
    return {"losses": losses, **values}, train.plan().order


@pytest.mark.parametrize("mean", [True, False], ids=["scalar-loss", "per-example-loss"])
def test_train_job_with_two_weight_penalties_in_its_loss(mean: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    got, want, order = _both(lambda: _train_with_weight_penalties(3, mean), monkeypatch)
    ops = [n.op for n in order]
    assert "elementwise_chain" in ops and "matmul_bias" in ops
    for key, value in want.items():
        np.testing.assert_array_equal(np.asarray(got[key]), np.asarray(value), err_msg=key)
