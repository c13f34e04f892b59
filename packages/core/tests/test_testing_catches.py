"""What the gradient kit catches besides wrong gradient rules, each on a deliberately broken toy op.

Kernels that write into or return their inputs, gradients of the wrong dtype, float32 gradient
graphs that fail or disagree with float64, a backend whose kernel is wrong, and kernel overrides
(``flowjob_add_kernels``) that disagree with the op's own kernel: each gives a message naming the op.
"""
from __future__ import annotations

import types
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import pytest
from hypothesis import strategies as st

from flowjob_core import BlobSpec, Effects, KernelContext, OpDef, Session, ShapeError, hookimpl, make_plugin_manager
from flowjob_core.plugins.registry import Backend
from flowjob_core.testing import OpCase, check_grads, conformance_suite, run_op
from flowjob_core.testing import strategies as fst
from flowjob_core.testing.conformance import check_forward
from flowjob_core.testing.kernel_probe import KernelContractError


def _same(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    return [inputs[0]]


def _scale_kernel(factor: float) -> Callable[[KernelContext], Any]:
    def build(ctx: KernelContext) -> Any:
        xp, out = ctx.xp, ctx.out(0)
        return lambda x: xp.multiply(x, factor, out=out)

    return build


def _double_grad(ctx: Any) -> list[Any]:
    return [ctx.apply("k_double", [ctx.dy])]


# kernels that break the contract ----------------------------------------------------------
def _in_place_kernel(ctx: KernelContext) -> Any:
    xp = ctx.xp
    return lambda x: xp.multiply(x, 2.0, out=x)


def _sneaky_in_place_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)

    def run(x: Any) -> Any:
        x.setflags(write=True)  # defeats the read-only feed: the check after the call still sees it
        xp.multiply(x, 2.0, out=x)
        return xp.copyto(out, x) or out

    return run


def _identity_kernel(ctx: KernelContext) -> Any:
    return lambda x: x


def _first_of_pair_kernel(ctx: KernelContext) -> Any:
    return lambda x, y: y.reshape(ctx.outputs[0].shape)


def _reshape_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    return [BlobSpec((inputs[0].size,), inputs[0].dtype)]


def _reshape_kernel(ctx: KernelContext) -> Any:
    shape = ctx.outputs[0].shape
    return lambda x, *rest: x.reshape(shape)


# gradients that go wrong in float32 ------------------------------------------------------------
def _to_float64_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    return [BlobSpec(inputs[0].shape, np.float64)]


def _to_float64_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    return lambda x: xp.multiply(x, 2.0, out=out)


def _float64_only(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    if inputs[0].dtype != np.float64:
        raise ShapeError(f"takes float64 only, got {inputs[0].dtype}")
    return [inputs[0]]


def _dtype_dependent_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    factor = 2.0 if ctx.inputs[0].dtype == np.float64 else 2.5  # a float32 fast path with a bug
    return lambda dy: xp.multiply(dy, factor, out=out)


OPS = (
    OpDef("k_double", _same, kernel=_scale_kernel(2.0), grad=_double_grad),
    OpDef("k_in_place", _same, kernel=_in_place_kernel, grad=_double_grad),
    OpDef("k_sneaky", _same, kernel=_sneaky_in_place_kernel, grad=_double_grad),
    OpDef("k_identity", _same, kernel=_identity_kernel, grad=lambda ctx: [ctx.dy]),
    OpDef("k_view", _reshape_infer, kernel=_reshape_kernel, not_differentiable=True, effects=Effects(view=True)),
    OpDef("k_view_of_second", lambda i, a: [BlobSpec((i[1].size,), i[1].dtype)], kernel=_first_of_pair_kernel,
          not_differentiable=True, effects=Effects(view=True)),
    OpDef("k_grad_f64", _same, kernel=_scale_kernel(2.0), grad=lambda ctx: [ctx.apply("k_to_f64", [ctx.dy])]),
    OpDef("k_to_f64", _to_float64_infer, kernel=_to_float64_kernel, not_differentiable=True),
    OpDef("k_grad_f64_only", _same, kernel=_scale_kernel(2.0),
          grad=lambda ctx: [ctx.apply("k_f64_double", [ctx.dy])]),
    OpDef("k_f64_double", _float64_only, kernel=_scale_kernel(2.0), not_differentiable=True),
    OpDef("k_grad_f32_wrong", _same, kernel=_scale_kernel(2.0),
          grad=lambda ctx: [ctx.apply("k_dtype_dependent", [ctx.dy])]),
    OpDef("k_dtype_dependent", _same, kernel=_dtype_dependent_kernel, not_differentiable=True),
    OpDef("k_tripled", _same, kernel=_scale_kernel(3.0), grad=lambda ctx: [ctx.apply("scalar_mul", [ctx.dy],
                                                                                      {"scalar": 3.0})]),
)


def _plugin(name: str, **hooks: Callable[..., None]) -> types.ModuleType:
    module = types.ModuleType(name)  # pluggy names a module-like plugin after __name__
    for hook_name, fn in hooks.items():
        setattr(module, hook_name, hookimpl(fn))
    return module


def _add_ops(registry: Any) -> None:
    for op in OPS:
        registry.add(op)


OPS_PLUGIN = _plugin("catch-test-ops", flowjob_add_ops=_add_ops)


def _fake_backend() -> Backend:
    return Backend(tag="fake", name="a second numpy backend", xp=np, make_rng=np.random.default_rng,
                   to_host=np.asarray, from_host=lambda a: np.array(a, copy=True))


def _backend_plugin(kernels: dict[tuple[str, str], Callable[[KernelContext], Any]]) -> types.ModuleType:
    def flowjob_add_backends(registry: Any) -> None:
        registry.add(_fake_backend())

    def flowjob_add_kernels(registry: Any) -> None:
        for (op, tag), builder in kernels.items():
            registry.add(op, tag, builder)

    return _plugin("catch-test-backend", flowjob_add_backends=flowjob_add_backends,
                   flowjob_add_kernels=flowjob_add_kernels)


def make_session(*extra: types.ModuleType) -> Session:
    return Session(make_plugin_manager(plugins=[OPS_PLUGIN, *extra], autoload=False))


@pytest.fixture
def session() -> Iterator[Session]:
    sess = make_session()
    yield sess
    sess.close()


def x_values(shape: tuple[int, ...] = (2, 3), dtype: Any = np.float64) -> np.ndarray:
    return np.random.default_rng(3).uniform(0.5, 2.0, size=shape).astype(dtype)


# inputs are read-only, outputs fresh ---------------------------------------------------------
def test_a_kernel_writing_into_its_input_is_caught(session: Session) -> None:
    x = x_values()
    with pytest.raises(KernelContractError, match=r"op 'k_in_place' .*the kernel writes into an input"):
        run_op("k_in_place", [x], session=session)
    np.testing.assert_array_equal(x, x_values())  # the caller's array is untouched either way


def test_a_kernel_changing_its_input_behind_the_read_only_flag_is_caught(session: Session) -> None:
    with pytest.raises(KernelContractError, match=r"op 'k_sneaky' .*the kernel changed its input 0"):
        run_op("k_sneaky", [x_values()], session=session)


def test_check_grads_catches_a_kernel_writing_into_its_input(session: Session) -> None:
    with pytest.raises(AssertionError, match=r"op 'k_in_place'.*writes into an input"):
        check_grads("k_in_place", [x_values()], session=session)


def test_a_kernel_returning_its_input_is_caught(session: Session) -> None:
    with pytest.raises(KernelContractError, match=r"op 'k_identity' .*output 0 shares memory with input 0"):
        run_op("k_identity", [x_values()], session=session)


def test_a_view_op_may_alias_input_0_only(session: Session) -> None:
    x = x_values()
    (flat,) = run_op("k_view", [x], session=session)
    np.testing.assert_array_equal(flat, x.ravel())
    with pytest.raises(KernelContractError, match=r"op 'k_view_of_second' .*output 0 shares memory with input 1"):
        run_op("k_view_of_second", [x, x_values((3, 2))], session=session)


# gradients in float32 ----------------------------------------------------------------------
def test_a_float64_gradient_of_a_float32_input_is_caught(session: Session) -> None:
    # checked in float64 the dtypes agree; the float32 gradient graph shows the promotion
    with pytest.raises(AssertionError, match=r"op 'k_grad_f64' gives input 0 a float64 gradient, the input is float32"):
        check_grads("k_grad_f64", [x_values(dtype=np.float32)], session=session)


def test_a_gradient_graph_that_fails_in_float32_is_caught(session: Session) -> None:
    with pytest.raises(AssertionError, match=r"building the float32 gradient of op 'k_grad_f64_only'.*float64 only"):
        check_grads("k_grad_f64_only", [x_values()], session=session)


def test_a_float32_gradient_that_disagrees_with_float64_is_caught(session: Session) -> None:
    with pytest.raises(AssertionError, match=r"the float32 gradient of op 'k_grad_f32_wrong' disagrees with the "
                                             r"float64 one for input 0 at 6 of 6 elements"):
        check_grads("k_grad_f32_wrong", [x_values()], session=session)


def test_a_correct_op_passes_in_both_dtypes(session: Session) -> None:
    check_grads("k_double", [x_values()], session=session)
    check_grads("k_double", [x_values(dtype=np.float32)], session=session)


# every backend, every override --------------------------------------------------------------
def _case(op: str, reference: Callable[..., Any] | None = None) -> OpCase:
    return OpCase(op, lambda draw: ([draw(fst.arrays(fst.small_shapes()))], {}), reference=reference)


def test_run_op_runs_on_a_named_backend() -> None:
    sess = make_session(_backend_plugin({}))
    try:
        (out,) = run_op("k_double", [x_values()], session=sess, backend="fake")
        np.testing.assert_allclose(out, 2 * x_values())
        with pytest.raises(ValueError, match=r"no backend 'tpu' is installed; installed: \['cpu', 'fake'\]"):
            run_op("k_double", [x_values()], session=sess, backend="tpu")
    finally:
        sess.close()


def test_a_wrong_kernel_on_another_backend_is_caught() -> None:
    sess = make_session(_backend_plugin({("k_double", "fake"): _scale_kernel(2.001)}))
    try:
        check_forward(_case("k_double"), [x_values()], {}, sess)  # no reference: the cpu kernel is the yardstick
    except AssertionError as exc:
        message = str(exc)
    else:
        pytest.fail("a wrong kernel on backend 'fake' went unnoticed")
    finally:
        sess.close()
    assert ("op 'k_double' (case 'k_double') on backend 'fake': the kernel override registered for backend 'fake' "
            "(flowjob_add_kernels) against the op's own kernel (OpDef.kernel) on 'cpu'") in message


def test_a_wrong_cpu_override_is_caught_against_the_ops_own_kernel() -> None:
    sess = make_session(_backend_plugin({("k_tripled", "cpu"): _scale_kernel(3.0003)}))
    try:
        with pytest.raises(AssertionError, match=r"on backend 'cpu': the kernel override registered for backend "
                                                 r"'cpu' \(flowjob_add_kernels\) against the op's own kernel"):
            check_forward(_case("k_tripled"), [x_values()], {}, sess)
    finally:
        sess.close()


def test_an_override_for_every_backend_is_checked_on_each() -> None:
    sess = make_session(_backend_plugin({("k_tripled", "*"): _scale_kernel(3.0003)}))
    try:
        with pytest.raises(AssertionError, match=r"on backend 'cpu': the kernel override registered for backend '\*'"):
            check_forward(_case("k_tripled"), [x_values()], {}, sess)
    finally:
        sess.close()


def test_correct_overrides_and_backends_pass() -> None:
    # a different float32 summation order is not an error: the comparison scales with the outputs
    sess = make_session(_backend_plugin({("k_tripled", "cpu"): lambda ctx: (
        lambda x: ctx.xp.add(ctx.xp.add(x, x, out=ctx.out(0)), x, out=ctx.out(0)))}))
    try:
        for dtype in (np.float64, np.float32):
            check_forward(_case("k_tripled", reference=lambda x: 3 * x), [x_values(dtype=dtype)], {}, sess)
    finally:
        sess.close()


def test_the_conformance_suites_forward_test_checks_overrides() -> None:
    broken = _backend_plugin({("k_tripled", "cpu"): _scale_kernel(3.0003)})
    case = _case("k_tripled")  # no reference: the forward test still runs, for the override
    _, forward, _ = conformance_suite([case], plugin="catch-test-ops", session_factory=lambda: make_session(broken),
                                      max_examples=3)
    with pytest.raises(AssertionError, match=r"op 'k_tripled' \(case 'k_tripled'\) on backend 'cpu': the kernel "
                                             r"override registered for backend 'cpu'"):
        forward(case=case)


def test_the_conformance_suites_forward_test_catches_a_kernel_writing_its_input() -> None:
    case = OpCase("k_in_place", lambda draw: ([draw(fst.arrays(fst.small_shapes()))], {}),
                  reference=lambda x: 2 * x)
    _, forward, _ = conformance_suite([case], plugin="catch-test-ops", session_factory=make_session, max_examples=2)
    with pytest.raises(KernelContractError, match="op 'k_in_place'"):
        forward(case=case)


def test_strategies_stay_importable() -> None:  # the module under test above draws with them
    assert isinstance(fst.small_shapes(), st.SearchStrategy)
