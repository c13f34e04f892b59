"""The legacy MLP (784 -> 512 relu -> 10, batch 100) through a train job: its raw gradients against a
hand-written numpy backward pass, and the number of array-module calls one step makes.

Kernels must do all array work through ``ctx.xp`` (the same code then runs on CuPy), and a
static graph should cost about one call per op: the step is counted on a backend whose
``xp`` is numpy behind a counter.
"""
from __future__ import annotations

import collections
from typing import Any

import numpy as np

import flowjob_core as fc
import flowjob_ops.plugin
import flowjob_typing as tp
import flowjob_typing.plugin
from flowjob_core import Backend, Session, hookimpl, make_plugin_manager
from flowjob_ops.api import activations, initializers, layers, losses
from flowjob_ops.api.array import reshape
from flowjob_core.testing.modules import sibling


probe = sibling(__file__, "grad_probe")
BATCH = 100
VARIABLES = {"hidden-weight": (512, 784), "hidden-bias": (512,), "output-weight": (10, 512), "output-bias": (10,)}


class _Counted:
    """A numpy callable (function or ufunc) that counts its calls; ufunc methods (``reduce``, ``at``) too."""

    def __init__(self, target: Any, name: str, calls: collections.Counter) -> None:
        self._target, self._name, self._calls = target, name, calls

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self._calls[self._name] += 1
        return self._target(*args, **kwargs)

    def __getattr__(self, attr: str) -> Any:
        value = getattr(self._target, attr)
        return _Counted(value, f"{self._name}.{attr}", self._calls) if callable(value) else value


class CountingNumpy:
    """numpy as an array module, counting every call of a numpy function or ufunc."""

    def __init__(self) -> None:
        self.calls: collections.Counter = collections.Counter()

    def __getattr__(self, name: str) -> Any:
        value = getattr(np, name)
        if isinstance(value, np.ufunc) or (callable(value) and not isinstance(value, type)):
            value = _Counted(value, name, self.calls)
        setattr(self, name, value)
        return value


class CountingBackendPlugin:
    def __init__(self) -> None:
        self.xp = CountingNumpy()

    @hookimpl
    def flowjob_add_backends(self, registry: Any) -> None:
        registry.add(Backend(tag="cpu", name="counting numpy", xp=self.xp, make_rng=np.random.default_rng))

    @hookimpl
    def flowjob_select_backend(self, device_tag: str, backends: Any) -> Any:
        return backends.get("cpu")


def _session(counting: CountingBackendPlugin) -> Session:
    builtins = (("core-ops", "flowjob_core.plugins.builtin_ops"), ("core-passes", "flowjob_core.passes.pipeline"))
    plugins = [flowjob_ops.plugin, flowjob_typing.plugin, probe, counting]
    return Session(make_plugin_manager(builtins=builtins, plugins=plugins, autoload=False))


def _mlp_job(session: Session) -> Any:
    @probe.job(session)
    def train_job(images: tp.Numpy.Placeholder((BATCH, 1, 28, 28)),
                  labels: tp.Numpy.Placeholder((BATCH,), dtype=np.int32)) -> tp.Numpy:
        initializer = initializers.truncated_normal(0.1)
        flat = reshape(images, [images.shape[0], -1])
        hidden = layers.dense(flat, 512, activation=activations.relu, kernel_initializer=initializer, name="hidden")
        logits = layers.dense(hidden, 10, kernel_initializer=initializer, name="output")
        loss = losses.sparse_softmax_cross_entropy_with_logits(labels, logits)
        fc.add_loss(loss)
        for name, shape in VARIABLES.items():
            probe.probe(fc.get_variable(name, shape=shape), name)  # the same name gives the layer's variable
        return loss

    return train_job


def _numpy_mlp(x: np.ndarray, labels: np.ndarray, w1: np.ndarray, b1: np.ndarray, w2: np.ndarray,
               b2: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    x = x.reshape(len(x), -1).astype(np.float64)
    h = np.maximum(x @ w1.T + b1, 0)
    z = h @ w2.T + b2
    z = z - z.max(1, keepdims=True)
    p = np.exp(z) / np.exp(z).sum(1, keepdims=True)
    loss = -np.log(p[np.arange(len(x)), labels])
    dz = p.copy()
    dz[np.arange(len(x)), labels] -= 1  # the seed is ones per sample: raw gradients are sums
    dh = (dz @ w2) * (h > 0)
    return loss, {"output-weight": dz.T @ h, "output-bias": dz.sum(0), "hidden-weight": dh.T @ x,
                  "hidden-bias": dh.sum(0)}


def test_mlp_gradients_match_a_hand_written_backward_pass() -> None:
    counting = CountingBackendPlugin()
    session = _session(counting)
    train_job = _mlp_job(session)
    rng = np.random.default_rng(0)
    images = rng.random((BATCH, 1, 28, 28), dtype=np.float32)
    labels = rng.integers(0, 10, BATCH).astype(np.int32)
    loss = train_job(images, labels)
    values = {name: session.variables.get(name).astype(np.float64) for name in VARIABLES}
    want_loss, want_grads = _numpy_mlp(images, labels, values["hidden-weight"], values["hidden-bias"],
                                       values["output-weight"], values["output-bias"])
    np.testing.assert_allclose(loss, want_loss, rtol=1e-5)
    for name, want in want_grads.items():
        got = probe.RESULTS[name]
        assert got.dtype == np.float32 and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max(), err_msg=name)
    session.close()


def test_mlp_train_step_costs_about_one_array_call_per_op() -> None:
    counting = CountingBackendPlugin()
    session = _session(counting)
    train_job = _mlp_job(session)
    rng = np.random.default_rng(1)
    images = rng.random((BATCH, 1, 28, 28), dtype=np.float32)
    labels = rng.integers(0, 10, BATCH).astype(np.int32)
    train_job(images, labels)  # trace, plan, first step
    counting.xp.calls.clear()
    train_job(images, labels)
    calls = counting.xp.calls
    # the probe's 4 gradient fetches and the returned loss are copies (xp.array) outside the step proper
    step = sum(calls.values()) - calls["array"]
    assert calls["array"] == 5, dict(calls)
    # forward 12: 2 matmuls, 2 bias adds, relu, and 7 calls of the fused softmax loss (max, subtract, exp, sum,
    # divide, log, subtract); backward 9: the loss gradient, 2 bias reductions, 3 matmuls, relu's mask and
    # product (the first layer's input needs no gradient). An optimizer adds its 1/N scalings and updates.
    assert step <= 21, dict(calls)
    session.close()
