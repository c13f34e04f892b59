"""The conformance suite on a small inline op plugin: it passes on correct ops and fails on broken ones."""
from __future__ import annotations

import types
from typing import Any, Sequence

import numpy as np
import pytest
from hypothesis import strategies as st

from flowjob_core import BlobSpec, Compute, KernelContext, OpDef, Session, hookimpl, make_plugin_manager
from flowjob_core.testing import OpCase, conformance_suite
from flowjob_core.testing import strategies as fst

PLUGIN_NAME = "conformance-test-ops"


def _same(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    return [inputs[0]]


def _cube_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    return lambda x: xp.power(x, 3, out=out)


def _cube_grad_kernel(factor: float) -> Any:
    def build(ctx: KernelContext) -> Any:
        xp, out = ctx.xp, ctx.out(0)

        def run(x: Any, dy: Any) -> Any:
            xp.multiply(x, x, out=out)
            xp.multiply(out, factor, out=out)
            return xp.multiply(out, dy, out=out)

        return run

    return build


def _abs_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    return lambda x: xp.abs(x, out=out)


def _abs_grad_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    return lambda x, dy: xp.multiply(xp.sign(x), dy, out=out)


def _argmax_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    return lambda x: xp.argmax(x, axis=-1, out=out)


OPS = (
    OpDef("c_cube", _same, kernel=_cube_kernel, grad=lambda ctx: [ctx.apply("c_cube_grad", [ctx.inputs[0], ctx.dy])],
          compute=Compute(amp="gray")),
    OpDef("c_cube_grad", lambda i, a: [i[1]], kernel=_cube_grad_kernel(3.0), not_differentiable=True),
    OpDef("c_abs", _same, kernel=_abs_kernel, grad=lambda ctx: [ctx.apply("c_abs_grad", [ctx.inputs[0], ctx.dy])],
          compute=Compute(amp="gray")),
    OpDef("c_abs_grad", lambda i, a: [i[1]], kernel=_abs_grad_kernel, not_differentiable=True),
    OpDef("c_argmax", lambda i, a: [BlobSpec(i[0].shape[:-1], np.int64)], kernel=_argmax_kernel,
          not_differentiable=True),
)
BROKEN = (
    OpDef("c_cube_bad", _same, kernel=_cube_kernel,
          grad=lambda ctx: [ctx.apply("c_cube_bad_grad", [ctx.inputs[0], ctx.dy])]),
    OpDef("c_cube_bad_grad", lambda i, a: [i[1]], kernel=_cube_grad_kernel(2.0), not_differentiable=True),
    OpDef("c_unmarked", _same, kernel=_abs_kernel),  # neither a gradient rule nor the mark
)


def _plugin(name: str, ops: Sequence[OpDef]) -> types.ModuleType:
    @hookimpl
    def flowjob_add_ops(registry: Any) -> None:
        for op in ops:
            registry.add(op)

    module = types.ModuleType(name)  # pluggy names a plugin after __name__: the owner of its ops
    module.flowjob_add_ops = flowjob_add_ops  # type: ignore[attr-defined]
    return module


GOOD_PLUGIN = _plugin(PLUGIN_NAME, OPS)
BROKEN_PLUGIN = _plugin("broken-test-ops", BROKEN)


def make_session() -> Session:
    return Session(make_plugin_manager(plugins=[GOOD_PLUGIN, BROKEN_PLUGIN], autoload=False))


def _unary(draw: st.DrawFn) -> tuple[list[np.ndarray], dict]:
    return [draw(fst.arrays(fst.small_shapes()))], {}


def _unary_away_from_zero(draw: st.DrawFn) -> tuple[list[np.ndarray], dict]:
    return [draw(fst.array_away_from(fst.small_shapes(), points=(0.0,), gap=0.1))], {}


def _with_cotangent(draw: st.DrawFn) -> tuple[list[np.ndarray], dict]:
    shape = draw(fst.small_shapes())
    return [draw(fst.arrays(shape)), draw(fst.arrays(shape))], {}


def _distinct_rows(draw: st.DrawFn) -> tuple[list[np.ndarray], dict]:
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    return [draw(fst.distinct_values(fst.small_shapes(min_dims=1, max_dims=2))).astype(dtype)], {}


CASES = [
    OpCase("c_cube", _unary, reference=lambda x: x**3),
    OpCase("c_cube_grad", _with_cotangent, reference=lambda x, dy: 3 * x * x * dy, wrt=()),
    OpCase("c_abs", _unary_away_from_zero, reference=np.abs),
    OpCase("c_abs_grad", _with_cotangent, reference=lambda x, dy: np.sign(x) * dy, wrt=()),
    OpCase("c_argmax", _distinct_rows, reference=lambda x: np.argmax(x, axis=-1), wrt=()),
]

test_op_gradients, test_op_forward, test_ops_covered = conformance_suite(
    CASES, plugin=PLUGIN_NAME, session_factory=make_session)


# the suite fails where it should -----------------------------------------------------
def test_coverage_lists_ops_without_case_or_gradient() -> None:
    _, _, covered = conformance_suite([OpCase("c_cube_bad", _unary)], plugin="broken-test-ops",
                                      session_factory=make_session)
    with pytest.raises(AssertionError) as info:
        covered()
    message = str(info.value)
    assert "ops of plugin 'broken-test-ops' with no OpCase: ['c_cube_bad_grad', 'c_unmarked']" in message
    assert "with neither a gradient rule nor not_differentiable=True: ['c_unmarked']" in message


def test_coverage_flags_cases_that_test_nothing_and_unknown_ops() -> None:
    cases = [*CASES, OpCase("c_cube", _unary, wrt=(), name="idle"), OpCase("c_nope", _unary)]
    _, _, covered = conformance_suite(cases, plugin=PLUGIN_NAME, session_factory=make_session)
    with pytest.raises(AssertionError) as info:
        covered()
    assert "cases name ops that are not registered: ['c_nope']" in str(info.value)
    assert "cases that test nothing (wrt=() and no reference): ['idle']" in str(info.value)


def test_coverage_fails_for_a_plugin_that_registers_nothing() -> None:
    _, _, covered = conformance_suite(CASES, plugin="not-installed", session_factory=make_session)
    with pytest.raises(AssertionError, match="plugin 'not-installed' registers no op"):
        covered()


def test_gradient_test_fails_on_a_wrong_rule() -> None:
    case = OpCase("c_cube_bad", _unary)
    gradients, _, _ = conformance_suite([case], plugin="broken-test-ops", session_factory=make_session,
                                        max_examples=5)
    with pytest.raises(AssertionError, match="op 'c_cube_bad'"):
        gradients(case=case)


def test_forward_test_fails_on_a_wrong_reference() -> None:
    case = OpCase("c_cube", _unary, reference=lambda x: x**3 + 1e-3)
    _, forward, _ = conformance_suite([case], plugin=PLUGIN_NAME, session_factory=make_session, max_examples=5)
    with pytest.raises(AssertionError, match="op 'c_cube'"):
        forward(case=case)


def test_gradient_test_demands_wrt_empty_for_not_differentiable_ops() -> None:
    case = OpCase("c_argmax", _distinct_rows)
    gradients, _, _ = conformance_suite([case], plugin=PLUGIN_NAME, session_factory=make_session, max_examples=2)
    with pytest.raises(pytest.fail.Exception, match="give its OpCase wrt=()"):
        gradients(case=case)
