"""The gradient kit: run_op and check_grads on small ops defined here (no op package needed).

Deliberately wrong gradient rules (off by a factor of two, a missing transpose, a dropped
output, a missing gradient) must be caught with a message that names what disagrees.
"""
from __future__ import annotations

import re
import types
from typing import Any, Iterator, Sequence

import numpy as np
import pytest
from hypothesis import given, settings

from flowjob_core import BlobSpec, FlowjobError, KernelContext, OpDef, Session, ShapeError, hookimpl
from flowjob_core.ir import naming
from flowjob_core import make_plugin_manager
from flowjob_core.testing import check_grads, run_op
from flowjob_core.testing import strategies as fst


# ops used by these tests -------------------------------------------------------
def _floating(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    if inputs[0].dtype.kind != "f":
        raise ShapeError(f"needs a floating input, got {inputs[0].dtype}")
    return [inputs[0]]


def _mul_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    return [BlobSpec(np.broadcast_shapes(inputs[0].shape, inputs[1].shape),
                     np.result_type(inputs[0].dtype, inputs[1].dtype))]


def _mul_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    return lambda x, y: xp.multiply(x, y, out=out)


def _mul_grad(ctx: Any) -> list[Any]:
    x, y = ctx.inputs
    return [ctx.apply("t_mul", [ctx.dy, y]), ctx.apply("t_mul", [ctx.dy, x])]  # broadcast: core unbroadcasts


def _square_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    return lambda x: xp.multiply(x, x, out=out)


def _square_grad(factor: float) -> Any:
    def grad(ctx: Any) -> list[Any]:
        return [ctx.apply("scalar_mul", [ctx.apply("t_mul", [ctx.dy, ctx.inputs[0]])], {"scalar": factor})]

    return grad


def _float32_only(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    if inputs[0].dtype != np.float32:
        raise ShapeError(f"this op takes float32 only, got {inputs[0].dtype}")
    return [inputs[0]]


def _matmul_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    a, b = inputs[0].shape, inputs[1].shape
    a = a[::-1] if attrs.get("transpose_a") else a
    b = b[::-1] if attrs.get("transpose_b") else b
    if len(a) != 2 or len(b) != 2 or a[1] != b[0]:
        raise ShapeError(f"cannot multiply {a} by {b}")
    return [BlobSpec((a[0], b[1]), inputs[0].dtype)]


def _matmul_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    ta, tb = ctx.attrs.get("transpose_a", False), ctx.attrs.get("transpose_b", False)
    return lambda a, b: xp.matmul(a.T if ta else a, b.T if tb else b, out=out)


def _matmul_grad(ctx: Any) -> list[Any]:
    a, b = ctx.inputs
    return [ctx.apply("t_matmul", [ctx.dy, b], {"transpose_b": True}),
            ctx.apply("t_matmul", [a, ctx.dy], {"transpose_a": True})]


def _matmul_bad_grad(ctx: Any) -> list[Any]:
    a, b = ctx.inputs
    return [ctx.apply("t_matmul", [ctx.dy, b]),  # the transpose of b is missing: right shape only when square
            ctx.apply("t_matmul", [a, ctx.dy], {"transpose_a": True})]


def _take_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    if inputs[1].dtype.kind not in "iu":
        raise ShapeError(f"indices must be integers, got {inputs[1].dtype}")
    return [BlobSpec(inputs[1].shape, inputs[0].dtype)]


def _take_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    return lambda x, idx: xp.take(x, idx, out=out)


def _take_grad(factor: float) -> Any:
    def grad(ctx: Any) -> list[Any]:
        dx = ctx.apply("t_take_grad", [ctx.dy, ctx.inputs[1]], {"size": ctx.inputs[0].shape[0]})
        return [ctx.apply("scalar_mul", [dx], {"scalar": factor}), None]

    return grad


def _take_grad_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)

    def run(dy: Any, idx: Any) -> Any:
        out[...] = 0
        xp.add.at(out, idx, dy)
        return out

    return run


def _pair_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    return [inputs[0], inputs[0]]


def _pair_kernel(ctx: KernelContext) -> Any:
    xp, twice, thrice = ctx.xp, ctx.out(0), ctx.out(1)
    return lambda x: (xp.multiply(x, 2.0, out=twice), xp.multiply(x, 3.0, out=thrice))


def _pair_grad(use_second: bool) -> Any:
    def grad(ctx: Any) -> list[Any]:
        parts = [ctx.apply("scalar_mul", [g], {"scalar": s})
                 for g, s in zip(ctx.out_grads, (2.0, 3.0 if use_second else 0.0)) if g is not None]
        return [parts[0] if len(parts) == 1 else ctx.apply("add_n", parts)]

    return grad


def _training_kernel(ctx: KernelContext) -> Any:
    out = ctx.out(0)
    out[...] = 1.0 if ctx.training else 0.0  # a constant buffer: nothing writes it later
    return lambda x: out


def _masked_kernel(ctx: KernelContext) -> Any:
    xp, out, mask = ctx.xp, ctx.out(0), ctx.out(1)
    rng = ctx.rng()  # one stream per kernel: a new mask every step, the same sequence for the same seed

    def run(x: Any) -> Any:
        mask[...] = rng.uniform(size=mask.shape) < 0.5
        return xp.multiply(x, mask, out=out), mask

    return run


def _relu_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    return lambda x: xp.maximum(x, 0.0, out=out)


def _relu_grad_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    return lambda y, dy: xp.multiply(dy, y > 0, out=out)


TEST_OPS = (
    OpDef("t_mul", _mul_infer, kernel=_mul_kernel, grad=_mul_grad),
    OpDef("t_square", _floating, kernel=_square_kernel, grad=_square_grad(2.0)),
    OpDef("t_square_bad", _floating, kernel=_square_kernel, grad=_square_grad(4.0)),
    OpDef("t_square_f32", _float32_only, kernel=_square_kernel, grad=_square_grad(2.0)),
    OpDef("t_square_f32_bad", _float32_only, kernel=_square_kernel, grad=_square_grad(4.0)),
    OpDef("t_square_no_grad", _floating, kernel=_square_kernel, grad=lambda ctx: [None]),
    OpDef("t_matmul", _matmul_infer, kernel=_matmul_kernel, grad=_matmul_grad),
    OpDef("t_matmul_bad", _matmul_infer, kernel=_matmul_kernel, grad=_matmul_bad_grad),
    OpDef("t_take", _take_infer, kernel=_take_kernel, grad=_take_grad(1.0)),
    OpDef("t_take_bad", _take_infer, kernel=_take_kernel, grad=_take_grad(-1.0)),
    OpDef("t_take_grad", lambda i, a: [BlobSpec((a["size"],), i[0].dtype)], kernel=_take_grad_kernel,
          not_differentiable=True),
    OpDef("t_pair", _pair_infer, kernel=_pair_kernel, grad=_pair_grad(True)),
    OpDef("t_pair_bad", _pair_infer, kernel=_pair_kernel, grad=_pair_grad(False)),
    OpDef("t_masked", _pair_infer, kernel=_masked_kernel,
          grad=lambda ctx: [ctx.apply("t_mul", [ctx.dy, ctx.outputs[1]])]),
    OpDef("t_is_training", _floating, kernel=_training_kernel, not_differentiable=True),
    OpDef("t_relu", _floating, kernel=_relu_kernel,
          grad=lambda ctx: [ctx.apply("t_relu_grad", [ctx.outputs[0], ctx.dy])]),
    OpDef("t_relu_grad", lambda i, a: [i[1]], kernel=_relu_grad_kernel, not_differentiable=True),
)


@hookimpl
def _add_test_ops(registry: Any) -> None:
    for op in TEST_OPS:
        registry.add(op)


PLUGIN = types.ModuleType("kit-test-ops")  # a module-like plugin: pluggy names it after __name__
PLUGIN.flowjob_add_ops = _add_test_ops  # type: ignore[attr-defined]


def make_session() -> Session:
    return Session(make_plugin_manager(plugins=[PLUGIN], autoload=False))


@pytest.fixture
def session() -> Iterator[Session]:
    sess = make_session()
    yield sess
    sess.close()


def rng_array(shape: tuple[int, ...], seed: int = 1, dtype: Any = np.float64) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-2.0, 2.0, size=shape).astype(dtype)


# run_op ------------------------------------------------------------------------
def test_run_op_computes_the_forward_through_a_plan(session: Session) -> None:
    x, y = rng_array((2, 3)), rng_array((3,), seed=2)
    (out,) = run_op("t_mul", [x, y], session=session)
    np.testing.assert_array_equal(out, x * y)
    (out32,) = run_op("t_mul", [x.astype(np.float32), y.astype(np.float32)], session=session)
    assert out32.dtype == np.float32


def test_run_op_returns_every_output(session: Session) -> None:
    x = rng_array((4,))
    twice, thrice = run_op("t_pair", [x], session=session)
    np.testing.assert_allclose(twice, 2 * x)
    np.testing.assert_allclose(thrice, 3 * x)


def test_run_op_training_builds_train_kernels(session: Session) -> None:
    x = rng_array((2,))
    (predict,) = run_op("t_is_training", [x], session=session)
    (train,) = run_op("t_is_training", [x], session=session, training=True)
    assert predict.tolist() == [0.0, 0.0] and train.tolist() == [1.0, 1.0]


def test_run_op_default_session_gathers_installed_plugins() -> None:
    x = rng_array((3,))
    (out,) = run_op("add_n", [x, x, x])  # a core op: present whatever else is installed
    np.testing.assert_allclose(out, 3 * x)


def test_run_op_leaves_the_process_wide_name_counter_alone(session: Session) -> None:
    before = naming.next_id()
    run_op("t_square", [rng_array((2,))], session=session)
    check_grads("t_square", [rng_array((2,))], session=session)
    assert naming.next_id() == before + 1


def test_run_op_unknown_op_names_it(session: Session) -> None:
    with pytest.raises(FlowjobError, match="no op 'no_such_op'"):
        run_op("no_such_op", [rng_array((2,))], session=session)


# check_grads: correct rules pass -------------------------------------------------
CORRECT = [
    ("t_square", [rng_array((5, 5))], {}),
    ("t_square", [rng_array((3,))], {}),  # tiny: the full Jacobian too
    ("t_mul", [rng_array((2, 3)), rng_array((3,), seed=2)], {}),  # broadcasting undone by core
    ("t_mul", [rng_array((4, 1)), rng_array((1, 5), seed=2)], {}),
    ("t_matmul", [rng_array((2, 3)), rng_array((3, 4), seed=2)], {}),
    ("t_matmul", [rng_array((4, 1)), rng_array((1, 5), seed=2)], {}),
    ("t_pair", [rng_array((3, 3))], {}),
    ("t_take", [rng_array((5,)), np.array([0, 3, 3, 1], dtype=np.int64)], {}),
]


@pytest.mark.parametrize("op, inputs, attrs", CORRECT, ids=[f"{c[0]}-{i}" for i, c in enumerate(CORRECT)])
def test_check_grads_accepts_correct_rules(session: Session, op: str, inputs: list, attrs: dict) -> None:
    check_grads(op, inputs, attrs, session=session)
    check_grads(op, inputs, attrs, session=session, seed=7, full_jacobian=True)


@settings(max_examples=10)
@given(x=fst.array_away_from(fst.small_shapes(max_dims=2), points=(0.0,), gap=0.1))
def test_check_grads_accepts_relu_away_from_its_kink(x: np.ndarray) -> None:
    sess = make_session()
    try:
        check_grads("t_relu", [x], session=sess)
    finally:
        sess.close()


# check_grads: wrong rules fail, saying what disagrees -------------------------------
def test_factor_two_is_caught_along_a_direction(session: Session) -> None:
    x = rng_array((5, 5))  # 25 elements: directions only
    with pytest.raises(AssertionError) as info:
        check_grads("t_square_bad", [x], {"note": "factor"}, session=session)
    message = str(info.value)
    assert "op 't_square_bad'" in message and "random direction" in message
    assert "attrs: {'note': 'factor'}" in message
    assert "input 0 (differentiated) float64[5, 5]" in message
    assert "direction v, input 0" in message and "cotangent c, output 0" in message
    numeric = float(re.search(r"numeric .*= (\S+)", message).group(1))
    analytic = float(re.search(r"analytic <grad, v>.*= (\S+)", message).group(1))
    assert analytic == pytest.approx(2 * numeric, rel=1e-6)  # the bug: twice the true gradient


def test_missing_transpose_is_caught(session: Session) -> None:
    a, b = rng_array((3, 3)), rng_array((3, 3), seed=2)  # square, so the wrong rule still builds
    with pytest.raises(AssertionError, match="random direction"):
        check_grads("t_matmul_bad", [a, b], session=session)
    with pytest.raises(AssertionError) as info:
        check_grads("t_matmul_bad", [a, b], session=session, full_jacobian=True)
    message = str(info.value)
    assert "the Jacobian of op 't_matmul_bad'" in message
    assert re.search(r"worst entry: d out_0\[\d, \d\] / d input_0\[\d, \d\]: analytic", message)
    check_grads("t_matmul_bad", [a, b], wrt=[1], session=session)  # the gradient of b is right


def test_full_jacobian_on_tiny_inputs_reports_the_worst_entry(session: Session) -> None:
    x = np.array([0.5, -1.0, 2.0])
    with pytest.raises(AssertionError) as info:
        check_grads("t_square_bad", [x], session=session)
    message = str(info.value)
    assert "disagrees with central differences at 3 of 9 entries" in message  # the diagonal
    assert "worst entry: d out_0[2] / d input_0[2]: analytic (gradient rule) 8.0" in message
    assert "analytic Jacobian" in message and "numeric Jacobian" in message
    with pytest.raises(AssertionError, match="random direction"):
        check_grads("t_square_bad", [x], session=session, full_jacobian=False)


def test_a_gradient_rule_that_forgets_an_input_is_caught(session: Session) -> None:
    with pytest.raises(AssertionError, match="analytic"):
        check_grads("t_square_no_grad", [rng_array((4, 5))], session=session)


def test_a_dropped_output_gradient_is_caught(session: Session) -> None:
    with pytest.raises(AssertionError, match="t_pair_bad"):
        check_grads("t_pair_bad", [rng_array((5, 5))], session=session)


def test_an_op_without_gradient_rule_fails_the_check(session: Session) -> None:
    with pytest.raises(AssertionError, match="not differentiable"):
        check_grads("t_is_training", [rng_array((2,))], session=session)


# integer and float32 inputs ------------------------------------------------------
def test_integer_inputs_are_held_fixed(session: Session) -> None:
    x, idx = rng_array((6,)), np.array([5, 0, 0, 2], dtype=np.int32)
    check_grads("t_take", [x, idx], session=session)
    with pytest.raises(AssertionError) as info:
        check_grads("t_take_bad", [x, idx], session=session)
    message = str(info.value)
    assert "input 0 (differentiated) float64[6]" in message
    assert "input 1 (held fixed) int32[4]: [5, 0, 0, 2]" in message
    with pytest.raises(ValueError, match="only floating inputs are differentiated"):
        check_grads("t_take", [x, idx], wrt=[1], session=session)


def test_float32_inputs_are_checked_in_float64(session: Session) -> None:
    x = rng_array((5, 5), dtype=np.float32)
    check_grads("t_square", [x], session=session, rtol=1e-7, atol=1e-9)
    with pytest.raises(AssertionError) as info:
        check_grads("t_square_bad", [x], session=session)
    assert "float64[5, 5]" in str(info.value) and "checked in float64" in str(info.value)


def test_ops_refusing_float64_are_checked_in_their_own_dtype(session: Session) -> None:
    x = rng_array((5, 5), dtype=np.float32)
    check_grads("t_square_f32", [x], session=session)
    with pytest.raises(AssertionError, match="checked in float32"):
        check_grads("t_square_f32_bad", [x], session=session)


def test_nothing_to_differentiate_is_an_error(session: Session) -> None:
    with pytest.raises(ValueError, match="no floating input"):
        check_grads("t_take", [rng_array((3,)), np.array([0])], wrt=(), session=session)


# random ops, plugin passes ----------------------------------------------------------------
def test_a_seeded_random_op_is_checked_with_its_mask_repeated(session: Session) -> None:
    check_grads("t_masked", [rng_array((4, 5))], {"seed": 3}, session=session)
    check_grads("t_masked", [rng_array((2,))], {"seed": 3}, session=session)  # full Jacobian


def test_an_unseeded_random_op_is_refused_with_advice(session: Session) -> None:
    with pytest.raises(AssertionError, match="give a random op a fixed seed"):
        check_grads("t_masked", [rng_array((4, 5))], session=session)


@hookimpl
def _add_strict_pass(registry: Any) -> None:
    def needs_an_optimizer(job: Any, ctx: Any) -> None:  # like flowjob-optim: a train job needs minimize()
        if job.type == "train" and not any(i.kind == "minimize" for i in job.intents):
            raise FlowjobError(f"train job {job.name!r} has a loss but no optimizer")

    registry.add("strict", needs_an_optimizer, after="autodiff", before="dce")


def test_plugin_passes_do_not_see_the_kits_probe_jobs() -> None:
    strict = types.ModuleType("strict-pass")
    strict.flowjob_add_passes = _add_strict_pass  # type: ignore[attr-defined]
    sess = Session(make_plugin_manager(plugins=[PLUGIN, strict], autoload=False))
    try:
        check_grads("t_square", [rng_array((3, 3))], session=sess)
        (out,) = run_op("t_is_training", [rng_array((2,))], session=sess, training=True)
        assert out.tolist() == [1.0, 1.0]
    finally:
        sess.close()


# the kit's plugin and the fixture -----------------------------------------------------
def _session_contents(session: Session) -> tuple[list[Any], list[str], list[str]]:
    regs = session.registries
    return (session.pm.list_name_plugin(), sorted(op.name for op in regs.ops),
            [spec.name for spec in regs.passes.ordered()])


def test_check_grads_leaves_the_callers_session_as_it_was(session: Session) -> None:
    before = _session_contents(session)
    check_grads("t_square", [rng_array((2,))], session=session)
    check_grads("t_square", [rng_array((2,))], session=session)
    assert _session_contents(session) == before
    assert "testing_weighted_sum" not in session.registries.ops
    assert session.pm.get_plugin("flowjob-testing") is None
    assert not session.closed


def test_check_grads_leaves_the_default_session_as_it_was() -> None:
    from flowjob_core import clear_default_session, get_default_session

    clear_default_session()
    try:
        default = get_default_session()
        before = _session_contents(default)
        check_grads("scalar_mul", [rng_array((2, 3))], {"scalar": 2.5}, session=default)
        assert _session_contents(default) == before
        assert "testing_weighted_sum" not in default.registries.ops
        assert "testing-fetch-grads" not in default.registries.passes
    finally:
        clear_default_session()


def test_the_kits_derived_session_has_the_callers_plugins_and_its_own(session: Session) -> None:
    from flowjob_core.testing.kit_session import kit_session

    derived = kit_session(session)
    try:
        assert derived is not session and derived.registries is not session.registries
        names = [name for name, _ in derived.pm.list_name_plugin()]
        assert names == [name for name, _ in session.pm.list_name_plugin()] + ["flowjob-testing"]
        assert derived.registries.ops.owner("testing_weighted_sum") == "flowjob-testing"
        assert derived.registries.ops.owner("t_square") == "kit-test-ops"
        assert kit_session(derived) is derived  # a session with the kit is used as it is
    finally:
        derived.close()


def test_the_derived_session_keeps_blocked_plugins_blocked() -> None:
    from flowjob_core.testing.kit_session import kit_session

    pm = make_plugin_manager(plugins=[PLUGIN], autoload=False)
    pm.set_blocked("x-y")  # what FLOWJOB_BLOCKED_PLUGINS=x-y does
    sess = Session(pm)
    derived = kit_session(sess)
    try:
        assert derived.pm.is_blocked("x-y")
    finally:
        derived.close()
        sess.close()


def test_flowjob_session_fixture_gives_an_open_session(flowjob_session: Session) -> None:
    assert isinstance(flowjob_session, Session) and not flowjob_session.closed
    assert "add_n" in flowjob_session.registries.ops
