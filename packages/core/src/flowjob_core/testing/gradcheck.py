"""``check_grads``: an op's gradient rule, as the autodiff pass emits it, against central differences.

The loss is ``L = sum_k <out_k, c_k>`` with random cotangents ``c_k`` (so one scalar sees
every output and every gradient path). Analytic gradients come from a real train job:
the op node, the loss, the core ``autodiff`` pass. Numeric ones are float64 central
differences of that same plan's ``L`` along random unit directions ``v``:
``(L(x + eps v) - L(x - eps v)) / (2 eps) ~ <grad, v>`` (Chainer's ``check_backward``,
JAX's ``check_vjp``). Tiny inputs also get a full Jacobian comparison, element by element.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from flowjob_core.errors import FlowjobError, OpBuildError
from flowjob_core.ir.job import BlobSpec, Intent
from flowjob_core.plan.planner import Plan, build_plan
from flowjob_core.plugins.host import BUILTIN_PLUGINS
from flowjob_core.plugins.registry import Registries
from flowjob_core.runtime.session import Session
from flowjob_core.testing import _kit_plugin
from flowjob_core.testing.kernel_probe import with_contract_kernels
from flowjob_core.testing.kit_session import kit_scope
from flowjob_core.testing.single_op import add_returns, plan_job, run_plan, trace_op

# per dtype: (eps, rtol, atol); float64 is what gradients are checked in whenever the op accepts it
DEFAULT_TOLERANCES: dict[np.dtype, tuple[float, float, float]] = {
    np.dtype(np.float64): (1e-6, 1e-5, 1e-6),
    np.dtype(np.float32): (1e-3, 1e-2, 1e-3),
    np.dtype(np.float16): (1e-2, 5e-2, 5e-2),
}
DIRECTIONS = 3
JACOBIAN_MAX_INPUT_SIZE = 16  # the full Jacobian is checked by default up to this many input elements
JACOBIAN_MAX_OUTPUT_SIZE = 1024  # ... and this many output elements (one gradient run per output element)
ROUNDOFF_FACTOR = 8.0  # allowance, in units of machine epsilon, for rounding in the forward pass


def _fmt(value: Any, threshold: int = 64) -> str:
    text = np.array2string(np.asarray(value), precision=8, threshold=threshold, edgeitems=4, separator=", ",
                           max_line_width=110)
    return text.replace("\n", "\n    ")  # continuation lines stay inside the message's indentation


def _index(shape: tuple[int, ...], flat: int) -> str:
    return str([int(i) for i in np.unravel_index(flat, shape)]) if shape else "[]"


@dataclass
class _GradJob:
    """One planned train job: inputs and cotangents in; loss, floating outputs and raw gradients out."""

    op: str
    attrs: dict[str, Any]
    plan: Plan
    inputs: list[np.ndarray]
    wrt: tuple[int, ...]
    out_specs: list[BlobSpec]
    out_numbers: list[int]  # position of each floating output among the op's outputs
    grad_slots: list[int | None]  # per wrt input: its position in the returns, None when no gradient reached it
    session: Session
    registries: Registries  # the session's, with the op's kernel under the kernel contract
    fresh_kernels: bool = False  # rebuild the kernels for every run: a seeded random op then repeats itself

    @property
    def dtype(self) -> np.dtype:
        """The least precise dtype taking part: tolerances follow it."""
        dtypes = [self.inputs[i].dtype for i in self.wrt] + [s.dtype for s in self.out_specs]
        return min(dtypes, key=lambda d: d.itemsize)

    def evaluate(self, xs: Sequence[np.ndarray], cotangents: Sequence[np.ndarray]
                 ) -> tuple[float, list[np.ndarray], list[np.ndarray]]:
        """``L``, the floating outputs and the gradients (zeros where no gradient reached an input)."""
        plan = self.plan
        if self.fresh_kernels:
            sess = self.session
            plan = build_plan(plan.job, sess.backend, self.registries, sess.variables)
        try:
            values = run_plan(plan, [*xs, *cotangents])
        except FlowjobError as exc:
            raise AssertionError(f"check_grads: running op {self.op!r} (attrs {self.attrs!r}) or its gradient "
                                 f"failed: {exc}") from exc
        outs = list(values[1:1 + len(self.out_specs)])
        grads = [values[slot] if slot is not None else np.zeros_like(xs[i])
                 for i, slot in zip(self.wrt, self.grad_slots)]
        return float(values[0]), outs, grads

    def describe(self, xs: Sequence[np.ndarray] | None = None) -> str:
        lines = [f"  op: {self.op!r}", f"  attrs: {self.attrs!r}"]
        for i, x in enumerate(self.inputs if xs is None else xs):
            role = "differentiated" if i in self.wrt else "held fixed"
            lines.append(f"  input {i} ({role}) {x.dtype}{list(x.shape)}: {_fmt(x)}")
        return "\n".join(lines)


def _trace_forward(session: Session, op: str, originals: list[np.ndarray], attrs: dict[str, Any]) -> Any:
    """Trace in float64 copies when the op accepts them, else in the dtypes given."""
    cast = [x.astype(np.float64) if x.dtype.kind == "f" else x for x in originals]
    name = f"testing_check_grads_{op}"
    try:
        return trace_op(session, op, [BlobSpec(x.shape, x.dtype) for x in cast], attrs,
                        job_type="train", job_name=name), cast
    except OpBuildError:
        if all(c.dtype == x.dtype for c, x in zip(cast, originals)):
            raise
    return trace_op(session, op, [BlobSpec(x.shape, x.dtype) for x in originals], attrs,
                    job_type="train", job_name=name), originals


def _build(session: Session, op: str, originals: list[np.ndarray], attrs: dict[str, Any],
           wrt: tuple[int, ...]) -> _GradJob:
    traced, inputs = _trace_forward(session, op, originals, attrs)
    return _build_traced(session, op, traced, inputs, attrs, wrt)


def _build_traced(session: Session, op: str, traced: Any, inputs: list[np.ndarray], attrs: dict[str, Any],
                  wrt: tuple[int, ...], what: str = "") -> _GradJob:
    """Add the loss and the gradient fetch to a traced op and plan it; ``what`` qualifies messages ("float32 ")."""
    job, builder = traced.job, traced.builder
    numbers = [k for k, b in enumerate(traced.outputs) if b.dtype.kind == "f"]
    if not numbers:
        raise ValueError(f"check_grads: op {op!r} has no floating output to differentiate")
    outs = [traced.outputs[k] for k in numbers]
    cotangents = [builder.add_placeholder(b.spec, param=f"cotangents[{k}]", batch_axis=None,
                                          name=f"testing_cotangent_{k}") for k, b in enumerate(outs)]
    pairs = [blob for pair in zip(outs, cotangents) for blob in pair]
    (loss,) = builder.add_op("testing_weighted_sum", pairs, scoped_name="testing_loss")
    job.losses.append(loss.lbn)
    targets = [traced.inputs[i].lbn for i in wrt]
    job.grad_targets.extend(targets)
    job.intents.append(Intent(_kit_plugin.FETCH_INTENT, {"lbns": targets}, "flowjob_core.testing.check_grads"))
    add_returns(traced, [loss, *outs], "testing_return")
    # core's passes (verify, autodiff, dce) and the kit's: plugin passes such as the optimizer's expect a
    # program's train job (one with an optimizer), not this probe
    core = {name for name, _ in BUILTIN_PLUGINS} | {_kit_plugin.PLUGIN_NAME}
    registries = with_contract_kernels(session.registries, op)
    try:
        plan = plan_job(session, job, only_plugins=core, registries=registries)
    except FlowjobError as exc:
        raise AssertionError(f"check_grads: building the {what}gradient of op {op!r} (attrs {attrs!r}) failed: "
                             f"{exc}") from exc
    returned = {node.name: node.outputs[0] for node in plan.job.nodes}
    position = {lbn: p for p, lbn in enumerate(plan.job.returns)}
    slots = [position.get(returned.get(_kit_plugin.grad_return_name(i), "")) for i in range(len(wrt))]
    gj = _GradJob(op, attrs, plan, inputs, wrt, [b.spec for b in outs], numbers, slots, session, registries)
    _settle_randomness(gj)
    return gj


def _same_values(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal, up to the order in which a device sums (a GPU's scatter-add accumulates with atomics, in
    no fixed order): a few units in the last place of the largest magnitude; a random op differs by far more."""
    if a.dtype.kind not in "fc" or a.shape != b.shape:
        return np.array_equal(a, b, equal_nan=True)
    both = np.isnan(a) & np.isnan(b)
    scale = float(np.max(np.abs(np.where(both, 0, a)), initial=1.0))
    return bool(np.all(both | (np.abs(a - b) <= 64 * np.finfo(a.dtype).eps * scale)))


def _settle_randomness(gj: _GradJob) -> None:
    """Central differences need the same function at every run: a random op (dropout) draws a new
    mask per step, but with a fixed seed it repeats when its kernels are rebuilt."""
    cotangents = [np.ones(s.shape, s.dtype) for s in gj.out_specs]

    def same_twice() -> bool:
        first, second = (gj.evaluate(gj.inputs, cotangents) for _ in range(2))
        return all(_same_values(a, b) for a, b in zip([*first[1], *first[2]], [*second[1], *second[2]]))

    if same_twice():
        return
    gj.fresh_kernels = True
    if not same_twice():
        raise AssertionError(f"check_grads: op {gj.op!r} gives different values for the same inputs, even with "
                             f"freshly built kernels: give a random op a fixed seed (attrs {gj.attrs!r})")


def _resolve_wrt(inputs: list[np.ndarray], wrt: Sequence[int] | None) -> tuple[int, ...]:
    if wrt is None:
        chosen = tuple(i for i, x in enumerate(inputs) if x.dtype.kind == "f")
    else:
        chosen = tuple(dict.fromkeys(int(i) for i in wrt))
        for i in chosen:
            if not 0 <= i < len(inputs):
                raise ValueError(f"check_grads: wrt names input {i}, the op has {len(inputs)} inputs")
            if inputs[i].dtype.kind != "f":
                raise ValueError(f"check_grads: input {i} is {inputs[i].dtype}; only floating inputs are "
                                 f"differentiated (integer inputs such as labels are held fixed)")
    if not chosen:
        raise ValueError("check_grads: no floating input to differentiate (an op with no gradient to check "
                         "gets wrt=() in its OpCase, and no check_grads call)")
    return chosen


def check_grads(op: str, inputs: list[np.ndarray], attrs: dict | None = None, *, wrt: Sequence[int] | None = None,
                eps: float | None = None, rtol: float | None = None, atol: float | None = None,
                full_jacobian: bool | None = None, seed: int = 0, session: Session | None = None) -> None:
    """Check the gradient rule of ``op`` at ``inputs``; raise AssertionError naming what disagrees.

    ``wrt``: the inputs to differentiate (default: every floating one; integer inputs are
    never differentiated). Floating inputs are checked in float64 copies when the op accepts
    float64, otherwise in their own dtype with looser defaults (``DEFAULT_TOLERANCES``).
    ``full_jacobian``: compare every Jacobian entry too (default: when the differentiated
    inputs hold at most 16 elements). ``seed`` fixes the cotangents and directions.
    ``session``: where the op is looked up (default: a fresh ``Session()`` with every installed plugin);
    the check runs in a session derived from it with the kit's plugin, so ``session`` gains no op or pass.
    The gradient job runs core's passes (``verify``, ``autodiff``, ``dce``) and none of the
    plugins' (an optimizer pass wants a program's train job, with an optimizer).
    Inputs must keep a distance much larger than ``eps`` from the op's kinks and ties.
    """
    originals = [np.asarray(x) for x in inputs]
    attrs = dict(attrs or {})
    chosen = _resolve_wrt(originals, wrt)
    with kit_scope(session) as sess:
        gj = _build(sess, op, originals, attrs, chosen)
        d_eps, d_rtol, d_atol = DEFAULT_TOLERANCES.get(gj.dtype, DEFAULT_TOLERANCES[np.dtype(np.float32)])
        tol = _Tolerance(eps or d_eps, d_rtol if rtol is None else rtol, d_atol if atol is None else atol,
                         float(np.finfo(gj.dtype).eps))
        rng = np.random.default_rng(seed)
        cotangents = [rng.standard_normal(s.shape).astype(s.dtype) for s in gj.out_specs]
        _, outs, grads = gj.evaluate(gj.inputs, cotangents)
        _check_finite(gj, grads)
        _check_grad_dtypes(gj, grads)
        _check_float32_graph(sess, gj, cotangents, tol)
        in_size = sum(gj.inputs[i].size for i in chosen)
        out_size = sum(s.size for s in gj.out_specs)
        if full_jacobian or (full_jacobian is None and in_size <= JACOBIAN_MAX_INPUT_SIZE
                             and out_size <= JACOBIAN_MAX_OUTPUT_SIZE):
            _check_jacobian(gj, tol)
        scale = sum(float(np.abs(y.astype(np.float64) * c).sum()) for y, c in zip(outs, cotangents))
        for _ in range(DIRECTIONS):
            _check_direction(gj, tol, cotangents, grads, rng, scale)


@dataclass(frozen=True)
class _Tolerance:
    eps: float
    rtol: float
    atol: float
    machine_eps: float

    def allowed(self, numeric: Any, analytic: Any, scale: Any) -> Any:
        """atol + rtol * magnitude + the rounding a central difference of values of size ``scale`` carries."""
        roundoff = ROUNDOFF_FACTOR * self.machine_eps * np.abs(scale) / self.eps
        return self.atol + self.rtol * np.maximum(np.abs(numeric), np.abs(analytic)) + roundoff

    def __str__(self) -> str:
        return f"eps={self.eps:g}, rtol={self.rtol:g}, atol={self.atol:g}"


def _check_finite(gj: _GradJob, grads: list[np.ndarray]) -> None:
    for i, g in zip(gj.wrt, grads):
        if g.shape != gj.inputs[i].shape:
            raise AssertionError(f"check_grads: the gradient of input {i} has shape {g.shape}, the input "
                                 f"{gj.inputs[i].shape}\n{gj.describe()}")
        if not np.all(np.isfinite(g)):
            raise AssertionError(f"check_grads: the gradient rule gives non-finite values for input {i}: "
                                 f"{_fmt(g)}\n{gj.describe()}")


def _check_grad_dtypes(gj: _GradJob, grads: list[np.ndarray]) -> None:
    for i, g in zip(gj.wrt, grads):
        if g.dtype != gj.inputs[i].dtype:
            raise AssertionError(f"check_grads: the gradient rule of op {gj.op!r} gives input {i} a {g.dtype} "
                                 f"gradient, the input is {gj.inputs[i].dtype} (a gradient keeps its input's "
                                 f"dtype)\n{gj.describe()}")


def _check_float32_graph(session: Session, gj: _GradJob, cotangents: list[np.ndarray], tol: "_Tolerance") -> None:
    """Build and run the gradient graph in float32 too (programs train in float32; the main check runs in
    float64): it must build, keep float32 gradients, stay finite and agree with float64 at the same point.

    Skipped when the op takes no float32 inputs, or when the main check already ran in float32.
    """
    if all(gj.inputs[i].dtype == np.float32 for i in gj.wrt):
        return
    cast = [x.astype(np.float32) if x.dtype.kind == "f" else x for x in gj.inputs]
    try:
        traced = trace_op(session, gj.op, [BlobSpec(x.shape, x.dtype) for x in cast], gj.attrs, job_type="train",
                          job_name=f"testing_check_grads_float32_{gj.op}")
    except OpBuildError:
        return  # the op does not take float32
    g32 = _build_traced(session, gj.op, traced, cast, gj.attrs, gj.wrt, what="float32 ")
    c32 = [c.astype(s.dtype) for c, s in zip(cotangents, g32.out_specs)]
    _, _, grads32 = g32.evaluate(cast, c32)
    _check_finite(g32, grads32)
    _check_grad_dtypes(g32, grads32)
    if gj.fresh_kernels or g32.fresh_kernels:
        return  # a random op: the two dtypes' kernels may draw different numbers; nothing to compare
    # float64 at the float32-rounded point with the float32 cotangents: only float32 rounding separates them
    same_point = [x.astype(x64.dtype) for x, x64 in zip(cast, gj.inputs)]
    _, _, grads64 = gj.evaluate(same_point, [c.astype(s.dtype) for c, s in zip(c32, gj.out_specs)])
    rtol32, atol32 = DEFAULT_TOLERANCES[np.dtype(np.float32)][1:]
    rtol, atol = max(rtol32, tol.rtol), max(atol32, tol.atol)
    for i, g, want in zip(gj.wrt, grads32, grads64):
        if not want.size:
            continue
        allowed = atol + rtol * float(np.max(np.abs(want))) + rtol * np.abs(want)
        excess = np.abs(g.astype(np.float64) - want) - allowed
        if np.all(excess <= 0):
            continue
        worst = int(np.argmax(excess))
        raise AssertionError(
            f"check_grads: the float32 gradient of op {gj.op!r} disagrees with the float64 one for input {i} at "
            f"{np.count_nonzero(excess > 0)} of {want.size} elements\n{g32.describe()}\n"
            f"  worst element {_index(want.shape, worst)}: float32 {float(g.flat[worst])!r}, "
            f"float64 {float(want.flat[worst])!r} (rtol={rtol:g}, atol={atol:g}, plus rtol times the largest)\n"
            f"  float32 gradient: {_fmt(g)}\n  float64 gradient: {_fmt(want)}")


def _shifted(gj: _GradJob, step: dict[int, np.ndarray], sign: float) -> list[np.ndarray]:
    xs = list(gj.inputs)
    for i, delta in step.items():
        xs[i] = (xs[i] + sign * delta).astype(gj.inputs[i].dtype)
    return xs


def _check_direction(gj: _GradJob, tol: _Tolerance, cotangents: list[np.ndarray], grads: list[np.ndarray],
                     rng: np.random.Generator, scale: float) -> None:
    raw = {i: rng.standard_normal(gj.inputs[i].shape) for i in gj.wrt}
    norm = np.sqrt(sum(float(np.sum(v * v)) for v in raw.values()))
    if norm == 0.0:
        return  # the differentiated inputs are empty
    v = {i: d / norm for i, d in raw.items()}
    step = {i: tol.eps * d for i, d in v.items()}
    plus, minus = _shifted(gj, step, 1.0), _shifted(gj, step, -1.0)
    l_plus, _, _ = gj.evaluate(plus, cotangents)
    l_minus, _, _ = gj.evaluate(minus, cotangents)
    numeric = (l_plus - l_minus) / (2 * tol.eps)
    # the step actually taken (rounded to the input dtype), so float32 inputs are not penalised for it
    analytic = sum(float(np.sum(g.astype(np.float64) * (plus[i].astype(np.float64) - minus[i])))
                   for i, g in zip(gj.wrt, grads)) / (2 * tol.eps)
    allowed = float(tol.allowed(numeric, analytic, scale))
    if np.isfinite(numeric) and abs(numeric - analytic) <= allowed:
        return
    lines = [f"check_grads: the gradient of op {gj.op!r} disagrees with central differences along a random "
             f"direction v", gj.describe()]
    lines += [f"  direction v, input {i}: {_fmt(d)}" for i, d in v.items()]
    lines += [f"  cotangent c, output {k}: {_fmt(c)}" for k, c in zip(gj.out_numbers, cotangents)]
    lines += [f"  analytic gradient, input {i}: {_fmt(g)}" for i, g in zip(gj.wrt, grads)]
    lines += [
        f"  loss L = sum_k <out_k, c_k>; L(x+eps v) = {l_plus!r}, L(x-eps v) = {l_minus!r}",
        f"  numeric  (L(x+eps v) - L(x-eps v)) / (2 eps) = {numeric!r}",
        f"  analytic <grad, v> (gradient rule)            = {analytic!r}",
        f"  |difference| = {abs(numeric - analytic):.6g} > allowed {allowed:.6g} ({tol}, checked in {gj.dtype})",
    ]
    if not np.isfinite(numeric):
        lines.append("  the forward pass is not finite near x: keep inputs inside the op's domain")
    raise AssertionError("\n".join(lines))


def _check_jacobian(gj: _GradJob, tol: _Tolerance) -> None:
    out_sizes = [s.size for s in gj.out_specs]
    in_sizes = [gj.inputs[i].size for i in gj.wrt]
    rows, cols = sum(out_sizes), sum(in_sizes)
    analytic = np.zeros((rows, cols))
    numeric = np.zeros((rows, cols))
    zeros = [np.zeros(s.shape, s.dtype) for s in gj.out_specs]
    row = 0
    for k, spec in enumerate(gj.out_specs):  # row j of the Jacobian is the gradient for cotangent e_j
        for j in range(spec.size):
            cotangents = list(zeros)
            cotangents[k] = np.zeros(spec.shape, spec.dtype)
            cotangents[k].flat[j] = 1
            _, _, grads = gj.evaluate(gj.inputs, cotangents)
            analytic[row] = np.concatenate([g.astype(np.float64).ravel() for g in grads])
            row += 1
    col = 0
    scale = np.zeros(rows)
    for i in gj.wrt:  # column e is the central difference of every output along input element e
        for e in range(gj.inputs[i].size):
            step = np.zeros(gj.inputs[i].shape)
            step.flat[e] = tol.eps
            plus, minus = _shifted(gj, {i: step}, 1.0), _shifted(gj, {i: step}, -1.0)
            _, out_plus, _ = gj.evaluate(plus, zeros)
            _, out_minus, _ = gj.evaluate(minus, zeros)
            y_plus = np.concatenate([y.astype(np.float64).ravel() for y in out_plus])
            y_minus = np.concatenate([y.astype(np.float64).ravel() for y in out_minus])
            taken = float(plus[i].flat[e]) - float(minus[i].flat[e])
            numeric[:, col] = (y_plus - y_minus) / taken
            scale = np.maximum(scale, np.maximum(np.abs(y_plus), np.abs(y_minus)))
            col += 1
    allowed = tol.allowed(numeric, analytic, scale[:, None])
    excess = np.where(np.isfinite(numeric), np.abs(numeric - analytic) / allowed, np.inf)
    bad = int(np.count_nonzero(excess > 1))
    if not bad:
        return
    r, c = np.unravel_index(int(np.argmax(excess)), excess.shape)
    k = int(np.searchsorted(np.cumsum(out_sizes), r, side="right"))
    j = int(r - sum(out_sizes[:k]))
    w = int(np.searchsorted(np.cumsum(in_sizes), c, side="right"))
    e = int(c - sum(in_sizes[:w]))
    i = gj.wrt[w]
    lines = [f"check_grads: the Jacobian of op {gj.op!r} disagrees with central differences at {bad} of "
             f"{rows * cols} entries", gj.describe(),
             f"  worst entry: d out_{gj.out_numbers[k]}{_index(gj.out_specs[k].shape, j)} / "
             f"d input_{i}{_index(gj.inputs[i].shape, e)}: analytic (gradient rule) {float(analytic[r, c])!r}, "
             f"numeric {float(numeric[r, c])!r}, |difference| {abs(numeric[r, c] - analytic[r, c]):.6g} > "
             f"allowed {float(allowed[r, c]):.6g} ({tol}, checked in {gj.dtype})"]
    if rows * cols <= 256:
        lines += ["  analytic Jacobian (rows: output elements, columns: input elements):",
                  "    " + _fmt(analytic, threshold=256), "  numeric Jacobian:", "    " + _fmt(numeric, threshold=256)]
    raise AssertionError("\n".join(lines))
