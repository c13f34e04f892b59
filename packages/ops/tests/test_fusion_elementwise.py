"""Elementwise chains (flowjob_ops.passes.fuse_dense): runs of single-reader elementwise ops become one
``elementwise_chain`` node evaluated in one buffer, bitwise equal to the unfused ops; a chain stops
at a value that is observed or read twice, and where broadcasting would grow the running value."""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

import flowjob_core as fc
import flowjob_typing as tp
from flowjob_core import BlobSpec, Effects, KernelContext, OpDef
from flowjob_core.ir.job import Job, Node
from flowjob_core.testing.modules import sibling
from flowjob_ops.api import activations, initializers, layers, math
from flowjob_ops.passes import fuse_dense
from flowjob_ops.records.fused import ELEMENTWISE_CHAIN, STEPS

probe = sibling(__file__, "grad_probe")
jobs = sibling(__file__, "jobs")
SCALARS = {"scalar_add": 0.75, "scalar_rsub": 1.5, "scalar_div": 3.0, "scalar_rdiv": 0.7, "scalar_pow": 1.5,
           "scalar_mul": 0.1}


def _kernel(op: OpDef, attrs: dict, inputs: list[np.ndarray], out: BlobSpec) -> Any:
    specs = tuple(BlobSpec(a.shape, a.dtype) for a in inputs)
    return op.kernel(KernelContext(np, None, op.name, "k", attrs, specs, (out,)))


def _operands(op: str, shape: tuple[int, ...], dtype: Any, rng: np.random.Generator) -> np.ndarray:
    x = rng.standard_normal(shape).astype(dtype)
    if op in ("sqrt", "log", "scalar_pow"):
        return np.abs(x) + dtype(0.25)
    return x


@pytest.mark.parametrize("op", sorted(STEPS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_each_step_is_bitwise_the_op_kernel_in_place_too(op: str, dtype: Any) -> None:
    """Step 0 alone, then the op as a later step on the running value (every operand position,
    the other operand broadcast), against the op's own kernel run out of place."""
    rng = np.random.default_rng(abs(hash(op)) % 1000)
    step = STEPS[op]
    shape = (7, 33)  # odd sizes: SIMD loops with a remainder
    attrs = {"scalar": SCALARS[op]} if op in SCALARS else {}
    out = BlobSpec(shape, dtype)
    x = _operands(op, shape, dtype, rng)
    small = np.abs(_operands(op, (33,), dtype, rng)) + dtype(0.5)
    # step 0
    inputs = [x] if step.arity == 1 else [x, small]
    args = (0,) if step.arity == 1 else (0, 1)
    want = _kernel(step.record, attrs, inputs, out)(*inputs).copy()
    got = _kernel(ELEMENTWISE_CHAIN, {"steps": ((op, attrs, args),)}, inputs, out)(*inputs)
    np.testing.assert_array_equal(got, want)
    # a later step: abs first (exact, keeps log and sqrt defined), then the op on the running value
    positions = [(-1,)] if step.arity == 1 else [(-1, 1), (1, -1)]
    for pos in positions:
        operands = [np.abs(x) + dtype(0.25)] + ([small] if step.arity == 2 else [])
        want = _kernel(step.record, attrs, [operands[0] if i == -1 else small for i in pos], out)(
            *[operands[0] if i == -1 else small for i in pos]).copy()
        chain = {"steps": (("abs", {}, (0,)), ("scalar_add", {"scalar": 0.25}, (-1,)), (op, attrs, pos))}
        run = _kernel(ELEMENTWISE_CHAIN, chain, [x, small] if step.arity == 2 else [x], out)
        for _ in range(2):  # the second call reuses the buffer
            got = run(*([x, small] if step.arity == 2 else [x]))
        np.testing.assert_array_equal(got, want, err_msg=f"{op} at {pos}")


def _predict(fn: Any, arrays: list[np.ndarray], monkeypatch: pytest.MonkeyPatch, fused: bool) -> tuple[Any, list]:
    monkeypatch.setenv("FLOWJOB_FUSION", "1" if fused else "0")
    fc.clear_default_session()
    import inspect

    def job(*blobs: Any) -> Any:
        return fn(*blobs)

    params = [inspect.Parameter(f"a{i}", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                annotation=tp.Numpy.Placeholder(a.shape, dtype=a.dtype)) for i, a in enumerate(arrays)]
    job.__signature__ = inspect.Signature(params, return_annotation=tp.Numpy)  # type: ignore[attr-defined]
    function = fc.global_function()(job)
    result = function(*arrays)
    return result, list(function.plan().order)


def _both(fn: Any, arrays: list[np.ndarray], monkeypatch: pytest.MonkeyPatch) -> tuple[np.ndarray, list[Node]]:
    got, nodes = _predict(fn, arrays, monkeypatch, True)
    want, ref_nodes = _predict(fn, arrays, monkeypatch, False)
    assert "elementwise_chain" not in [n.op for n in ref_nodes]
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    return got, nodes


def _chains(nodes: list[Node]) -> list[list[str]]:
    return [[op for op, _, _ in n.attrs["steps"]] for n in nodes if n.op == "elementwise_chain"]


def test_scalar_ops_and_relu_make_one_chain(monkeypatch: pytest.MonkeyPatch) -> None:
    x = np.random.default_rng(0).standard_normal((5, 9)).astype(np.float32)
    got, nodes = _both(lambda x: math.square(activations.relu(x * 2.0 + 1.0)) / 3.0, [x], monkeypatch)
    assert _chains(nodes) == [["scalar_mul", "scalar_add", "relu", "square", "scalar_div"]]
    (chain,) = [n for n in nodes if n.op == "elementwise_chain"]
    assert len([n for n in nodes if n.op not in ("input", "return")]) == 1
    # numpy, op by op in float32, gives the very same bits
    want = np.square(np.maximum(x * np.float32(2.0) + np.float32(1.0), 0)) / np.float32(3.0)
    np.testing.assert_array_equal(got, want)


def test_broadcast_operands_join_the_chain(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((8, 6)).astype(np.float32)
    r = rng.standard_normal((6,)).astype(np.float32)
    c = np.abs(rng.standard_normal((8, 1))).astype(np.float32) + 0.5

    def fn(x: Any, r: Any, c: Any) -> Any:
        t = math.exp(math.multiply(math.subtract(x, r), c))  # x - r: step 0, both operands outside
        t = math.divide(1.0 - t, x)  # scalar_rsub, then the running value as the dividend
        t = math.maximum(r, t)  # the running value second, r broadcast
        return math.minimum(math.subtract(c, t), x)

    got, nodes = _both(fn, [x, r, c], monkeypatch)
    assert _chains(nodes) == [["subtract", "multiply", "exp", "scalar_rsub", "divide", "maximum", "subtract",
                               "minimum"]]
    (chain,) = [n for n in nodes if n.op == "elementwise_chain"]
    assert [args for _, _, args in chain.attrs["steps"]] == [(0, 1), (-1, 2), (-1,), (-1,), (-1, 0), (1, -1),
                                                            (2, -1), (-1, 0)]
    want = np.minimum(c - np.maximum(r, (np.float32(1.0) - np.exp((x - r) * c)) / x), x)  # float32 throughout
    jobs.assert_matches_numpy(got, want)


def test_a_growing_running_value_starts_a_new_chain(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(2)
    a = rng.standard_normal((8, 1)).astype(np.float32)
    b = rng.standard_normal((1, 6)).astype(np.float32)

    def fn(a: Any, b: Any) -> Any:
        t = math.negative(math.exp(a * 0.5))  # (8, 1)
        return math.tanh(t + b) * 0.5 + 0.5  # (8, 6): the add broadcasts the running value up

    got, nodes = _both(fn, [a, b], monkeypatch)
    assert _chains(nodes) == [["scalar_mul", "exp", "negative"], ["add", "tanh", "scalar_mul", "scalar_add"]]
    first, second = (n for n in nodes if n.op == "elementwise_chain")
    assert len(second.inputs) == 2 and second.inputs[0] == first.outputs[0]


def test_a_second_reader_or_an_observed_value_interrupts_the_chain(monkeypatch: pytest.MonkeyPatch) -> None:
    x = np.random.default_rng(3).standard_normal((4, 5)).astype(np.float32)

    def fn(x: Any) -> Any:
        t = math.exp(x * 0.25)  # t is read twice: the chain ends at t
        v = (t * 3.0 + 1.0) * t
        return math.sqrt(math.square(v) + 1.0)

    got, nodes = _both(fn, [x], monkeypatch)
    assert _chains(nodes) == [["scalar_mul", "exp"], ["scalar_mul", "scalar_add", "multiply", "square", "scalar_add",
                                                      "sqrt"]]
    first, second = (n for n in nodes if n.op == "elementwise_chain")
    assert second.inputs == (first.outputs[0],)
    assert second.attrs["steps"][2][2] == (-1, 0)  # t * 3 + 1, times t: input 0 of the fused node


def test_returned_intermediate_stays_a_value(monkeypatch: pytest.MonkeyPatch) -> None:
    x = np.random.default_rng(4).standard_normal((3, 4)).astype(np.float32)
    results = {}
    for fused in (True, False):
        monkeypatch.setenv("FLOWJOB_FUSION", "1" if fused else "0")
        fc.clear_default_session()

        @fc.global_function()
        def infer(x: tp.Numpy.Placeholder((3, 4))) -> tuple[tp.Numpy, tp.Numpy]:
            doubled = math.negative(x * 2.0)  # returned: ends its chain
            return doubled, math.tanh(activations.relu(doubled) + 1.0)

        results[fused] = (infer(x), infer.plan().order)
    (got, nodes), (want, _) = results[True], results[False]
    assert _chains(nodes) == [["scalar_mul", "negative"], ["relu", "scalar_add", "tanh"]]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_integer_chain(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(5)
    x = rng.integers(-50, 50, (6, 7)).astype(np.int32)
    y = rng.integers(1, 9, (7,)).astype(np.int32)
    got, nodes = _both(lambda x, y: math.maximum(math.square(math.negative(x)) + 3, y) * y - x, [x, y], monkeypatch)
    assert _chains(nodes) == [["negative", "square", "scalar_add", "maximum", "multiply", "subtract"]]
    np.testing.assert_array_equal(got, np.maximum(np.square(-x) + 3, y) * y - x)


def test_train_job_with_a_chain_gives_the_unfused_gradients_bitwise(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(6)
    x = rng.standard_normal((8, 5)).astype(np.float32)
    target = rng.standard_normal((8, 3)).astype(np.float32)
    runs = {}
    for fused in (True, False):
        monkeypatch.setenv("FLOWJOB_FUSION", "1" if fused else "0")
        session = probe.session_with_probe()
        try:
            @probe.job(session)
            def train(x: tp.Numpy.Placeholder((8, 5)), t: tp.Numpy.Placeholder((8, 3))) -> tp.Numpy:
                init = initializers.random_normal_initializer(stddev=0.5)
                h = layers.dense(x, 3, kernel_initializer=init, bias_initializer=init, name="d")
                y = math.tanh(h) * 0.5 + 0.25  # a chain in the forward pass
                loss = math.square(math.subtract(y, t))  # another one, ending at the loss
                fc.add_loss(loss)
                probe.probe(fc.get_variable("d-weight", shape=(3, 5)), "w")
                probe.probe(fc.get_variable("d-bias", shape=(3,)), "b")
                probe.probe(x, "x")
                return loss

            probe.RESULTS.clear()
            loss = train(x, target)
            order = train.plan().order
            runs[fused] = (loss, dict(probe.RESULTS), [n.op for n in order], _chains(order))
        finally:
            session.close()
    (loss, grads, ops, _), (ref_loss, ref_grads, ref_ops, ref_chains) = runs[True], runs[False]
    assert not ref_chains and "tanh" in ref_ops
    chains = runs[True][3]
    # tanh's output is read by its gradient too, y - t by square's: the forward chain is what lies between
    assert ["scalar_mul", "scalar_add", "subtract"] in chains and "matmul_bias" in ops
    assert len(chains) >= 2  # the backward pass has one too (square's and scalar_mul's gradients)
    np.testing.assert_array_equal(loss, ref_loss)
    assert set(grads) == {"w", "b", "x"}
    for key in grads:
        np.testing.assert_array_equal(grads[key], ref_grads[key], err_msg=key)


def _job(nodes: list[Node], specs: dict[str, tuple], returns: list[str]) -> Job:
    job = Job("j")
    job.specs.update({lbn: BlobSpec(shape, np.float32) for lbn, shape in specs.items()})
    job.nodes = nodes
    job.returns = returns
    return job


def test_a_gradient_scale_read_by_an_in_place_update_is_not_swallowed() -> None:
    """optim-fusion folds a scalar_mul read by an update into the update: a chain never ends with it."""
    update = OpDef("test_update", lambda inputs, attrs: [], not_differentiable=True, effects=Effects(mutates=(0,)))
    ctx = SimpleNamespace(registries=SimpleNamespace(ops={"test_update": update}), backend=None)
    specs = {"v/out": (3,), "g/out": (3,), "n/out_0": (3,), "s/out_0": (3,)}
    nodes = [Node("input", "v", (), ("v/out",)), Node("input", "g", (), ("g/out",)),
             Node("negative", "n", ("g/out",), ("n/out_0",)),
             Node("scalar_mul", "s", ("n/out_0",), ("s/out_0",), {"scalar": 0.5}),
             Node("test_update", "u", ("v/out", "s/out_0"), ())]
    job = _job(nodes, specs, [])
    assert fuse_dense.fuse_elementwise_chains(job, ctx) == 0
    # read by anything else, the same scalar_mul ends a chain
    nodes[-1] = Node("exp", "u", ("s/out_0",), ("u/out_0",))
    job = _job(nodes, specs | {"u/out_0": (3,)}, ["u/out_0"])
    assert fuse_dense.fuse_elementwise_chains(job, ctx) == 1
    (fused,) = [n for n in job.nodes if n.op == "elementwise_chain"]
    assert fused.name == "u" and fused.outputs == ("u/out_0",) and fused.inputs == ("g/out",)
    assert "n/out_0" not in job.specs and "s/out_0" not in job.specs


def test_a_backends_own_chain_kernel_keeps_chains_and_a_member_override_ends_them() -> None:
    """The gpu backend runs chains with its own elementwise_chain kernel (generated CUDA): chains are
    still made for it. An op it overrides stays a node of its own (its kernel is not the chain step's)."""
    from flowjob_core.plugins.registry import KernelRegistry, OpRegistry
    ops = {op: STEPS[op].record for op in ("negative", "exp", "tanh")} | {"elementwise_chain": ELEMENTWISE_CHAIN}
    records = OpRegistry()
    for record in ops.values():
        records.add(record)
    kernels = KernelRegistry(records)
    ctx = SimpleNamespace(registries=SimpleNamespace(ops=ops, kernels=kernels), backend=SimpleNamespace(tag="dev"))
    specs = {"x/out": (3,), "n/out_0": (3,), "e/out_0": (3,), "t/out_0": (3,)}

    def chained() -> list[list[str]]:
        nodes = [Node("input", "x", (), ("x/out",)), Node("negative", "n", ("x/out",), ("n/out_0",)),
                 Node("exp", "e", ("n/out_0",), ("e/out_0",)), Node("tanh", "t", ("e/out_0",), ("t/out_0",))]
        job = _job(nodes, specs, ["t/out_0"])
        fuse_dense.fuse_elementwise_chains(job, ctx)
        return _chains(job.nodes)

    kernels.add("elementwise_chain", "dev", lambda kctx: None)
    assert chained() == [["negative", "exp", "tanh"]]
    kernels.add("exp", "dev", lambda kctx: None)
    assert chained() == []  # negative and tanh, each alone around the overridden exp: no run of two
    del ops["elementwise_chain"]
    kernels.remove("exp", "dev")
    assert chained() == []  # no chain op registered: nothing to fuse into


def test_chain_inference_refuses_a_step_that_cannot_run_in_place() -> None:
    from flowjob_core import ShapeError

    a, b = BlobSpec((4, 1), np.float32), BlobSpec((1, 5), np.float32)
    assert ELEMENTWISE_CHAIN.infer((a, b), {"steps": (("add", {}, (0, 1)), ("exp", {}, (-1,)))}) == [
        BlobSpec((4, 5), np.float32)]
    with pytest.raises(ShapeError, match="in place"):
        ELEMENTWISE_CHAIN.infer((a, b), {"steps": (("exp", {}, (0,)), ("add", {}, (-1, 1)))})
    with pytest.raises(ShapeError, match="running value"):
        ELEMENTWISE_CHAIN.infer((a,), {"steps": (("exp", {}, (0,)), ("exp", {}, (0,)))})
    with pytest.raises(ShapeError, match="not one of"):
        ELEMENTWISE_CHAIN.infer((a,), {"steps": (("sigmoid", {}, (0,)),)})


def test_two_chains_meeting_at_one_binary_node_do_not_overlap() -> None:
    """Both operands of an add are single-reader candidates: the add joins one chain only (the first
    operand's, in job order); the other chain ends before it and its result is an input of the first."""
    specs = {"x/out": (1,), "r1/out": (1,), "r2/out": (1,), "m1/out_0": (1,), "a/out_0": (1,), "m2/out_0": (1,),
             "e2/out_0": (1,), "b/out_0": (1,)}
    nodes = [Node("input", "x", (), ("x/out",)), Node("input", "r1", (), ("r1/out",)),
             Node("input", "r2", (), ("r2/out",)),
             Node("scalar_mul", "m1", ("r1/out",), ("m1/out_0",), {"scalar": 2.0}),
             Node("add", "a", ("x/out", "m1/out_0"), ("a/out_0",)),
             Node("scalar_mul", "m2", ("r2/out",), ("m2/out_0",), {"scalar": 2.0}),
             Node("exp", "e2", ("m2/out_0",), ("e2/out_0",)),
             Node("add", "b", ("a/out_0", "e2/out_0"), ("b/out_0",))]
    job = _job(nodes, specs, ["b/out_0"])
    assert fuse_dense.fuse_elementwise_chains(job) == 2
    first, second = [n for n in job.nodes if n.op == "elementwise_chain"]
    assert [op for op, _, _ in first.attrs["steps"]] == ["scalar_mul", "exp"] and first.outputs == ("e2/out_0",)
    assert [op for op, _, _ in second.attrs["steps"]] == ["scalar_mul", "add", "add"]
    assert second.inputs == ("r1/out", "x/out", "e2/out_0") and second.outputs == ("b/out_0",)
    defined: set[str] = set()
    for node in job.nodes:  # defined before use, in the rewritten order
        assert set(node.inputs) <= defined, node.name
        defined.update(node.outputs)
    assert set(job.specs) == {"x/out", "r1/out", "r2/out", "e2/out_0", "b/out_0"}


def test_a_node_in_two_fused_groups_is_refused() -> None:
    from flowjob_core import FlowjobError
    from flowjob_ops.passes.fuse_conv import rewrite

    nodes = [Node("input", "x", (), ("x/out",)), Node("exp", "e", ("x/out",), ("e/out_0",)),
             Node("negative", "n", ("e/out_0",), ("n/out_0",))]
    job = _job(nodes, {"x/out": (2,), "e/out_0": (2,), "n/out_0": (2,)}, ["n/out_0"])
    one = Node("elementwise_chain", "n", ("x/out",), ("n/out_0",))
    with pytest.raises(FlowjobError, match="'n' \\(negative\\) is in two fused groups"):
        rewrite(job, [([nodes[1], nodes[2]], one), ([nodes[2]], one)], set())
