"""The op conformance suite: one table of ``OpCase`` rows drives gradient, forward and coverage tests.

An op package writes, in a test module::

    CASES = [OpCase("swish", make_swish, reference=swish_ref), ...]
    test_op_gradients, test_op_forward, test_ops_covered = conformance_suite(CASES, plugin="swish")

``test_op_gradients`` runs ``check_grads`` (float64 and float32 gradient graphs) in a session
derived from the suite's; ``test_op_forward`` runs every case on every installed backend under
the kernel contract (``kernel_probe``), against the reference and, where a plugin overrides the
op's kernel, against the op's own kernel. pytest and hypothesis are imported when the suite is
made, so the rest of the kit needs neither.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from flowjob_core.ir.opdef import AMP_CLASSES
from flowjob_core.runtime.session import Session
from flowjob_core.testing.gradcheck import check_grads
from flowjob_core.testing.kernel_probe import override_tags
from flowjob_core.testing.kit_session import kit_session
from flowjob_core.testing.profiles import NIGHTLY_PROFILE
from flowjob_core.testing.single_op import run_op

if TYPE_CHECKING:
    from hypothesis.strategies import DrawFn, SearchStrategy

GRADIENT_EXAMPLES = 15  # per op: a table of ~50 ops stays under two minutes on two cores
FORWARD_EXAMPLES = 10
# forward comparison with the numpy reference, by output dtype: (rtol, atol); float32's atol is
# torch.testing's: a float32 kernel loses ~1e-7 absolute to cancellation (gelu' far from 0, say)
FORWARD_TOLERANCES = {np.dtype(np.float64): (1e-6, 1e-9), np.dtype(np.float32): (1e-5, 1e-5),
                      np.dtype(np.float16): (1e-3, 1e-3)}


@dataclass(frozen=True)
class OpCase:
    """One row of an op table.

    ``make(draw)`` is the body of a hypothesis composite strategy returning ``(inputs, attrs)``;
    build inputs away from the op's kinks and ties (``flowjob_core.testing.strategies``).
    ``reference(*inputs, **attrs)`` gives the expected output (or a tuple of outputs) with numpy.
    ``wrt``: inputs whose gradient is checked (default: every floating one); ``()`` means the
    op has no gradient to check (it is ``not_differentiable``, or a gradient op itself).
    ``rtol``/``atol``: gradient tolerances (forward ones can only be loosened by them).
    """

    op: str
    make: Callable[["DrawFn"], tuple[list[np.ndarray], dict]]
    reference: Callable[..., Any] | None = None
    wrt: tuple[int, ...] | None = None
    rtol: float | None = None
    atol: float | None = None
    name: str | None = None

    @property
    def id(self) -> str:
        return self.name or self.op

    def strategy(self) -> "SearchStrategy[tuple[list[np.ndarray], dict]]":
        from hypothesis import strategies as st

        return st.composite(self.make)()


class _SharedSession:
    """One session for the whole suite, made on first use (making one per example costs ~20 ms), and
    the kit's session derived from it (``kit_session``: the suite's own session gains nothing)."""

    def __init__(self, factory: Callable[[], Session] | None) -> None:
        self._factory = factory or Session
        self._session: Session | None = None
        self._kit: Session | None = None

    def get(self) -> Session:
        if self._session is None or self._session.closed:
            self._session = self._factory()
            self._kit = None
        return self._session

    def kit(self) -> Session:
        base = self.get()
        if self._kit is None or self._kit.closed:
            self._kit = kit_session(base)
        return self._kit


def _as_tuple(value: Any) -> tuple[Any, ...]:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def _compare(got: Sequence[np.ndarray], want: Sequence[Any], where: str, case: OpCase, attrs: dict,
             inputs: list[np.ndarray], *, scaled: bool) -> None:
    """Output by output: shapes, exact integers, floats within the dtype's tolerance (loosened by the case's).

    ``scaled``: two kernels of one op are compared, not a kernel and a formula; a sum reordered
    (Winograd, a BLAS call, a GPU reduction) moves each output by rounding of the largest terms,
    so atol grows to rtol times the largest output.
    """
    assert len(got) == len(want), f"{where}: {len(got)} outputs, against {len(want)}"
    for k, (g, w) in enumerate(zip(got, want)):
        w = np.asarray(w)
        at = f"{where}, output {k}, attrs {attrs!r}"
        assert g.shape == w.shape, f"{at}: shape {g.shape}, against {w.shape}"
        if g.dtype == object:  # a tensor buffer: element by element, each an array of its own shape
            for i, (ge, we) in enumerate(zip(g.reshape(-1), w.reshape(-1))):
                _compare([np.asarray(ge)], [we], f"{where}, output {k} element {i}", case, attrs, inputs,
                         scaled=scaled)
            continue
        if g.dtype.kind != "f":
            np.testing.assert_array_equal(g, w, err_msg=at)
            continue
        rtol, atol = FORWARD_TOLERANCES.get(g.dtype, FORWARD_TOLERANCES[np.dtype(np.float32)])
        rtol, atol = max(rtol, case.rtol or 0.0), max(atol, case.atol or 0.0)
        if scaled and w.size:
            atol = max(atol, rtol * float(np.max(np.abs(w.astype(np.float64)))))
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=f"{at}; inputs: {inputs!r}")


def check_forward(case: OpCase, inputs: list[np.ndarray], attrs: dict, session: Session) -> None:
    """The op on every installed backend, under the kernel contract (inputs read-only, fresh outputs).

    Each backend's outputs are compared with ``case.reference`` (numpy). Where the op's kernel is
    an override a plugin registered (``flowjob_add_kernels``), or the backend is not the numpy
    one, they are also compared with the op's own kernel (``OpDef.kernel``) run on ``cpu``.
    """
    regs = session.registries
    reference_tag = "cpu" if regs.backends.get("cpu") is not None else session.backend.tag
    want = _as_tuple(case.reference(*inputs, **attrs)) if case.reference is not None else None
    own: tuple[np.ndarray, ...] | None = None
    # a tensor buffer (dtype object: an array of arrays, each its own shape) lives on the host only, as in
    # legacy; an op reading or making one runs on the backends that hold host arrays
    host_only = any(np.asarray(x).dtype == object for x in inputs)
    # the numpy backend first: a wrong override shows there, where it is easiest to debug
    for backend in sorted(regs.backends, key=lambda b: (b.tag != reference_tag, b.tag)):
        if host_only and not backend.host_arrays:
            continue
        got = run_op(case.op, inputs, attrs, session=session, backend=backend.tag)
        if backend.tag == reference_tag and any(np.asarray(g).dtype == object for g in got):
            host_only = True
        where = f"op {case.op!r} (case {case.id!r}) on backend {backend.tag!r}"
        if want is not None:
            _compare(got, want, f"{where} against the reference", case, attrs, inputs, scaled=False)
        overridden = override_tags(regs.kernels, case.op, backend.tag)
        if not overridden and backend.tag == reference_tag:
            continue
        if own is None:
            own = run_op(case.op, inputs, attrs, session=session, backend=reference_tag, reference_kernel=True)
            if want is not None:
                _compare(own, want, f"op {case.op!r} (case {case.id!r}), its own kernel (OpDef.kernel) on "
                         f"{reference_tag!r}, against the reference", case, attrs, inputs, scaled=False)
        what = (f"the kernel override registered for backend {overridden[0]!r} (flowjob_add_kernels)"
                if overridden else "its kernel")
        _compare(got, own, f"{where}: {what} against the op's own kernel (OpDef.kernel) on {reference_tag!r}",
                 case, attrs, inputs, scaled=True)


def coverage_problems(cases: Sequence[OpCase], plugin: str, session: Session,
                      exempt: dict[str, str] | None = None) -> list[str]:
    """What keeps ``plugin``'s ops from being fully tested: ops without a case, without a gradient rule...

    ``exempt`` maps op names that cannot run alone (graph sources fed by the planner) to the
    reason; they still need a gradient rule or the not-differentiable mark.
    """
    exempt = exempt or {}
    ops = session.registries.ops
    owners = sorted({ops.owner(op.name) for op in ops})
    mine = sorted(op.name for op in ops if ops.owner(op.name) == plugin)
    if not mine:
        return [f"plugin {plugin!r} registers no op in this session (is it installed, and is that its "
                f"entry-point name?); plugins that registered ops: {owners}"]
    covered = {case.op for case in cases}
    problems = []
    missing = [name for name in mine if name not in covered and name not in exempt]
    if missing:
        problems.append(f"ops of plugin {plugin!r} with no OpCase: {missing}")
    unmarked = [name for name in mine if ops[name].grad is None and not ops[name].not_differentiable]
    if unmarked:
        problems.append(f"ops of plugin {plugin!r} with neither a gradient rule nor not_differentiable=True: "
                        f"{unmarked}")
    # a differentiable op takes floating inputs, so enable_auto_mixed_precision must know its class;
    # gradient ops are made by autodiff after that pass and need none
    classless = [name for name in mine if ops[name].compute.amp is None and ops[name].grad is not None
                 and not name.endswith("_grad")]
    if classless:
        problems.append(f"ops of plugin {plugin!r} with no mixed-precision class (OpDef.compute.amp: "
                        f"{', '.join(AMP_CLASSES)}): {classless}")
    unknown = sorted({case.op for case in cases if case.op not in ops})
    if unknown:
        problems.append(f"cases name ops that are not registered: {unknown}")
    idle = [case.id for case in cases if case.wrt == () and case.reference is None]
    if idle:
        problems.append(f"cases that test nothing (wrt=() and no reference): {idle}")
    return problems


def conformance_suite(cases: Sequence[OpCase], plugin: str, *, session_factory: Callable[[], Session] | None = None,
                      max_examples: int | None = None, exempt: dict[str, str] | None = None
                      ) -> tuple[Callable[..., None], Callable[..., None], Callable[[], None]]:
    """Three pytest tests over ``cases``: ``test_op_gradients, test_op_forward, test_ops_covered``.

    ``plugin`` is the name the op package registers under (its entry-point name).
    ``session_factory`` makes the session the ops are looked up in (default ``Session()``:
    every installed plugin). Hypothesis settings come from the active profile, with
    ``max_examples`` (default: at most 15 gradient and 10 forward examples per op).
    ``exempt``: ops that cannot run as a single node, each with the reason (see ``coverage_problems``).
    """
    import pytest
    from hypothesis import given, settings
    from hypothesis import strategies as st

    cases = tuple(cases)
    shared = _SharedSession(session_factory)
    profile = settings()  # the profile loaded by the pytest plugin (ci, dev or nightly)
    # the per-op caps keep ci and dev runs short; the nightly profile is the long run, uncapped
    nightly = settings.get_current_profile_name() == NIGHTLY_PROFILE
    grad_cap = profile.max_examples if nightly else min(GRADIENT_EXAMPLES, profile.max_examples)
    forward_cap = profile.max_examples if nightly else min(FORWARD_EXAMPLES, profile.max_examples)
    # one minimal failure per op reads better than a group of every distinct one
    grad_settings = settings(max_examples=max_examples or grad_cap, report_multiple_bugs=False)
    forward_settings = settings(max_examples=max_examples or forward_cap, report_multiple_bugs=False)
    grad_cases = [case for case in cases if case.wrt != ()]
    # every case: even without a reference, the forward run checks the kernel contract, every
    # backend and every kernel override against the op's own kernel
    forward_cases = list(cases)

    @pytest.mark.parametrize("case", grad_cases, ids=[case.id for case in grad_cases])
    @grad_settings
    @given(data=st.data())
    def test_op_gradients(case: OpCase, data: Any) -> None:
        session = shared.get()
        ops = session.registries.ops
        if case.op in ops and ops[case.op].not_differentiable and case.wrt is None:
            pytest.fail(f"op {case.op!r} is marked not_differentiable: give its OpCase wrt=()")
        inputs, attrs = data.draw(case.strategy(), label=f"{case.id}: inputs, attrs")
        seed = data.draw(st.integers(0, 2**16 - 1), label="seed of cotangents and directions")
        check_grads(case.op, inputs, attrs, wrt=case.wrt, rtol=case.rtol, atol=case.atol, seed=seed,
                    session=shared.kit())

    @pytest.mark.parametrize("case", forward_cases, ids=[case.id for case in forward_cases])
    @forward_settings
    @given(data=st.data())
    def test_op_forward(case: OpCase, data: Any) -> None:
        inputs, attrs = data.draw(case.strategy(), label=f"{case.id}: inputs, attrs")
        check_forward(case, inputs, attrs, shared.get())

    def test_ops_covered() -> None:
        problems = coverage_problems(cases, plugin, shared.get(), exempt)
        assert not problems, "\n".join(problems)

    return test_op_gradients, test_op_forward, test_ops_covered
