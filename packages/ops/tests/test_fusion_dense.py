"""The dense fusion (flowjob_ops.passes.fuse_dense): ``matmul -> bias_add (-> relu)`` becomes one
``matmul_bias`` node whose results are bitwise the unfused nodes' (losses, gradients, a training
trajectory), and a value the fusion would swallow (the raw product, the pre-activation) stays
observable: a fetch or return of it turns that part of the fusion off."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import flowjob_core as fc
import flowjob_typing as tp
from flowjob_core import BlobSpec, KernelContext
from flowjob_core.testing.modules import sibling
from flowjob_ops.api import activations, bias_add, initializers, layers
from flowjob_ops.api import losses as losses_api
from flowjob_ops.passes import fuse_dense
from flowjob_ops.api.array import reshape
from flowjob_ops.records.fused import MATMUL_BIAS

probe = sibling(__file__, "grad_probe")
jobs = sibling(__file__, "jobs")
BATCH = 16
VARIABLES = {"h-weight": (20, 36), "h-bias": (20,), "o-weight": (5, 20), "o-bias": (5,)}


def _mlp_job(session: Any, watch: str | None = None) -> Any:
    @probe.job(session)
    def train_job(images: tp.Numpy.Placeholder((BATCH, 1, 6, 6)),
                  labels: tp.Numpy.Placeholder((BATCH,), dtype=np.int32)) -> tp.Numpy:
        init = initializers.random_normal_initializer(stddev=0.3)
        flat = reshape(images, [BATCH, -1])
        hidden = layers.dense(flat, 20, activation=activations.relu, kernel_initializer=init, bias_initializer=init,
                              name="h")
        logits = layers.dense(hidden, 5, kernel_initializer=init, bias_initializer=init, name="o")
        loss = losses_api.sparse_softmax_cross_entropy_with_logits(labels, logits)
        fc.add_loss(loss)
        for name, shape in VARIABLES.items():
            probe.probe(fc.get_variable(name, shape=shape), name)  # the same name gives the layer's variable
        if watch is not None:  # a value inside the hidden layer's chain, fetched after every step
            probe.probe(hidden.builder.blob(watch), "watched", diff=False)
        return loss

    return train_job


def _train(fused: bool, monkeypatch: pytest.MonkeyPatch, watch: str | None = None, steps: int = 4,
           lr: float = 0.05) -> dict[str, Any]:
    """A few steps of SGD (updates applied on the host from the probed raw gradients)."""
    monkeypatch.setenv("FLOWJOB_FUSION", "1" if fused else "0")
    rng = np.random.default_rng(5)
    images = rng.standard_normal((BATCH, 1, 6, 6)).astype(np.float32)
    labels = rng.integers(0, 5, BATCH).astype(np.int32)
    session = probe.session_with_probe()
    try:
        job = _mlp_job(session, watch)
        losses, grads, watched = [], [], []
        for _ in range(steps):
            probe.RESULTS.clear()
            losses.append(np.array(job(images, labels), copy=True))
            grads.append({name: probe.RESULTS[name] for name in VARIABLES})
            watched.append(probe.RESULTS.get("watched"))
            for name in VARIABLES:
                session.variables.assign(name, session.variables.get(name) - np.float32(lr) * grads[-1][name])
        values = {name: session.variables.get(name) for name in VARIABLES}
        nodes = list(job.plan().order)
        return {"losses": losses, "grads": grads, "values": values, "watched": watched, "nodes": nodes,
                "ops": [n.op for n in nodes]}
    finally:
        session.close()


def _assert_same_run(got: dict, want: dict) -> None:
    for a, b in zip(got["losses"], want["losses"]):
        np.testing.assert_array_equal(a, b)
    for step_got, step_want in zip(got["grads"], want["grads"]):
        for name in VARIABLES:
            np.testing.assert_array_equal(step_got[name], step_want[name], err_msg=name)
    for name in VARIABLES:
        np.testing.assert_array_equal(got["values"][name], want["values"][name], err_msg=name)


def test_fused_mlp_trains_bitwise_like_the_unfused_one(monkeypatch: pytest.MonkeyPatch) -> None:
    got = _train(True, monkeypatch)
    want = _train(False, monkeypatch)
    fused = {n.name: n for n in got["nodes"] if n.op == "matmul_bias"}
    assert set(fused) == {"h_matmul", "o_matmul"}
    assert fused["h_matmul"].attrs["activation"] == "relu" and fused["h_matmul"].outputs == ("h_activation/out_0",)
    assert fused["o_matmul"].attrs["activation"] is None and fused["o_matmul"].outputs == ("o_bias_add/out_0",)
    assert "bias_add" not in got["ops"] and "relu" not in got["ops"]
    assert "matmul_bias" not in want["ops"] and want["ops"].count("bias_add") == 2 and "relu" in want["ops"]
    # the backward pass is untouched: the same matmuls, reductions and relu mask
    for op in ("relu_grad", "reduce_sum", "sparse_softmax_cross_entropy_grad"):
        assert got["ops"].count(op) == want["ops"].count(op), op
    assert got["ops"].count("matmul") == want["ops"].count("matmul") - 2
    _assert_same_run(got, want)
    assert not np.array_equal(got["values"]["h-weight"], _train(True, monkeypatch, steps=1)["values"]["h-weight"])


@pytest.mark.parametrize("watch, expect", [
    ("h_bias_add/out_0", ("matmul_bias", None)),  # the pre-activation is fetched: its relu stays a node
    ("h_matmul/out_0", ("matmul", "bias_add")),  # the raw product is fetched: no fusion in that layer
])
def test_a_fetched_intermediate_turns_its_part_of_the_fusion_off(watch: str, expect: tuple,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    got = _train(True, monkeypatch, watch=watch, steps=2)
    want = _train(False, monkeypatch, watch=watch, steps=2)
    hidden = {n.name: n.op for n in got["nodes"] if n.name.startswith("h_")}
    first, second = expect
    assert hidden["h_matmul"] == first
    if first == "matmul_bias":
        assert hidden["h_activation"] == "relu" and "h_bias_add" not in hidden
    else:
        assert hidden["h_bias_add"] == second and hidden["h_activation"] == "relu"
    o_layer = [n for n in got["nodes"] if n.name == "o_matmul"]
    assert o_layer[0].op == "matmul_bias"  # the other layer still fuses
    _assert_same_run(got, want)
    for a, b in zip(got["watched"], want["watched"]):
        assert a is not None
        np.testing.assert_array_equal(a, b)


def test_returned_pre_activation_blocks_the_relu(monkeypatch: pytest.MonkeyPatch) -> None:
    x = np.random.default_rng(0).standard_normal((4, 7)).astype(np.float32)
    results = {}
    for fused in (True, False):
        monkeypatch.setenv("FLOWJOB_FUSION", "1" if fused else "0")
        fc.clear_default_session()

        @fc.global_function()
        def infer(x: tp.Numpy.Placeholder((4, 7))) -> tuple[tp.Numpy, tp.Numpy, tp.Numpy]:
            init = initializers.random_normal_initializer(stddev=0.5)
            z = layers.dense(x, 6, kernel_initializer=init, bias_initializer=init, name="d1")  # returned
            a = activations.relu(z)
            b = layers.dense(a, 3, activation=activations.relu, kernel_initializer=init, bias_initializer=init,
                             name="d2")
            return z, a, b

        results[fused] = (infer(x), {n.name: n for n in infer.plan().order})
    (got, nodes), (want, _) = results[True], results[False]
    assert nodes["d1_matmul"].op == "matmul_bias" and nodes["d1_matmul"].attrs["activation"] is None
    assert nodes["d2_matmul"].op == "matmul_bias" and nodes["d2_matmul"].attrs["activation"] == "relu"
    assert sum(n.op == "relu" for n in nodes.values()) == 1
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_matmul_read_twice_stays_unfused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLOWJOB_FUSION", "1")
    x = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)

    @fc.global_function()
    def infer(x: tp.Numpy.Placeholder((3, 4))) -> tp.Numpy:
        w = fc.get_variable("w", shape=(4, 5), initializer=initializers.random_normal_initializer())
        b = fc.get_variable("b", shape=(5,), initializer=initializers.random_normal_initializer())
        y = fc.apply("matmul", [x, w], {"transpose_a": False, "transpose_b": False})
        return activations.relu(bias_add.bias_add(y, b)) + y  # y has a second reader

    got = infer(x)
    ops = [n.op for n in infer.plan().order]
    assert "matmul_bias" not in ops and "matmul" in ops and "bias_add" in ops
    w, b = (fc.get_default_session().variables.get(n) for n in ("w", "b"))
    y = x @ w
    jobs.assert_matches_numpy(got, np.maximum(y + b, 0) + y)


@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
@pytest.mark.parametrize("activation", [None, "relu"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_matmul_bias_kernel_is_bitwise_the_chain_of_kernels(ta: bool, tb: bool, activation: Any, dtype: Any) -> None:
    from flowjob_ops.records.activations import RELU
    from flowjob_ops.records.matmul import BIAS_ADD, MATMUL

    rng = np.random.default_rng(2)
    a = rng.standard_normal((9, 13) if ta else (13, 9)).astype(dtype)
    b = rng.standard_normal((11, 9) if tb else (9, 11)).astype(dtype)
    bias = rng.standard_normal(11).astype(dtype)
    y = BlobSpec((13, 11), dtype)
    mm_attrs = {"transpose_a": ta, "transpose_b": tb}

    def kernel(op: Any, attrs: dict, inputs: tuple) -> Any:
        return op.kernel(KernelContext(np, None, op.name, "k", attrs, inputs, (y,)))

    z = kernel(MATMUL, mm_attrs, (BlobSpec(a.shape, dtype), BlobSpec(b.shape, dtype)))(a, b)
    want = kernel(BIAS_ADD, {"data_format": None}, (y, BlobSpec(bias.shape, dtype)))(z, bias)
    if activation == "relu":
        want = kernel(RELU, {}, (y,))(want)
    fused = kernel(MATMUL_BIAS, mm_attrs | {"data_format": None, "activation": activation},
                   (BlobSpec(a.shape, dtype), BlobSpec(b.shape, dtype), BlobSpec(bias.shape, dtype)))
    for _ in range(2):  # the second call reuses the buffer
        got = fused(a, b, bias)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, want)


def test_bias_along_a_middle_axis_of_a_batched_matmul(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((2, 3, 4)).astype(np.float32), rng.standard_normal((4, 5)).astype(np.float32)
    bias = rng.standard_normal(3).astype(np.float32)
    results = {}
    for fused in (True, False):
        monkeypatch.setenv("FLOWJOB_FUSION", "1" if fused else "0")
        fc.clear_default_session()

        @fc.global_function()
        def infer(a: tp.Numpy.Placeholder((2, 3, 4)), b: tp.Numpy.Placeholder((4, 5)),
                  bias: tp.Numpy.Placeholder((3,))) -> tp.Numpy:
            return activations.relu(bias_add.bias_add(fc.apply("matmul", [a, b], {}), bias))  # data_format None: axis 1

        results[fused] = (infer(a, b, bias), [n.op for n in infer.plan().order])
    assert "matmul_bias" in results[True][1] and "matmul_bias" not in results[False][1]
    np.testing.assert_array_equal(results[True][0], results[False][0])
    np.testing.assert_allclose(results[True][0], np.maximum(a @ b + bias[:, None], 0), rtol=1e-6)


def test_fuse_dense_pass_runs_after_fuse_conv_and_before_verify_final() -> None:
    session = probe.session_with_probe()
    try:
        order = [p.name for p in session.registries.passes.ordered()]
    finally:
        session.close()
    assert order.index("fuse-conv") < order.index("fuse-dense") < order.index("verify-final")


def test_switched_off_by_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from flowjob_core.ir.job import Job, Node

    job = Job("j")
    job.specs.update({"a/out": BlobSpec((2, 3), np.float32), "w/out": BlobSpec((3, 4), np.float32),
                      "b/out": BlobSpec((4,), np.float32), "m/out_0": BlobSpec((2, 4), np.float32),
                      "z/out_0": BlobSpec((2, 4), np.float32)})
    job.nodes = [Node("input", "a", (), ("a/out",)), Node("input", "w", (), ("w/out",)),
                 Node("input", "b", (), ("b/out",)),
                 Node("matmul", "m", ("a/out", "w/out"), ("m/out_0",), {"transpose_a": False, "transpose_b": False}),
                 Node("bias_add", "z", ("m/out_0", "b/out"), ("z/out_0",), {"data_format": None})]
    job.returns = ["z/out_0"]
    monkeypatch.setenv("FLOWJOB_FUSION", "0")
    off = job.copy()
    fuse_dense.run(off)
    assert [n.op for n in off.nodes][-2:] == ["matmul", "bias_add"]
    monkeypatch.setenv("FLOWJOB_FUSION", "1")
    fuse_dense.run(job)
    assert [n.op for n in job.nodes][-1] == "matmul_bias" and "m/out_0" not in job.specs
    assert job.nodes[-1].name == "m" and job.nodes[-1].outputs == ("z/out_0",)
