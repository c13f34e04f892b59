"""The gpu backend's fused optimizer updates (flowjob-kernels' cuda/optimizer.cu) against the op records' own
numpy kernels (flowjob_optim.update_ops), several steps each.

Without a device: the builders' host side against a stand-in CuPy whose ``RawModule`` reads each entry point's
parameter list from the source, checks every argument's type against it (arrays by dtype and contiguity, scalars
by their exact C type) and runs the kernel's documented arithmetic in numpy, operation by operation, on the
arguments named as the source names them; and the fallbacks to the record's kernel (float16, gated nodes, a
float64 learning rate, non-contiguous arrays). With a device (``gpu`` marker): the CUDA kernels themselves."""
from __future__ import annotations

import re

import numpy as np
import pytest

from flowjob_core import BlobSpec, FlowjobError, KernelContext
from flowjob_gpu import available_cupy, optimizer_kernels
from flowjob_gpu.sources import kernel_source
from flowjob_kernels import entry_points

flowjob_optim = pytest.importorskip("flowjob_optim.update_ops")  # the records (a test-only dependency)

RECORDS = flowjob_optim.UPDATE_OPS
C_TYPES = {"float": np.float32, "double": np.float64, "int": np.int32, "long long": np.int64}
SIGNATURE = re.compile(r'extern\s+"C"\s+__global__\s+void\s+(\w+)\s*\(([^)]*)\)')


def _signatures(code: str) -> dict[str, list[tuple[str, type, bool]]]:
    """symbol -> [(name, numpy type, is a pointer)] of each entry point, as the source declares it."""
    out = {}
    for symbol, params in SIGNATURE.findall(code):
        parsed = []
        for param in params.split(","):
            match = re.fullmatch(r"\s*(?:const\s+)?(float|double|int|long long)\s*(\*?)\s*(\w+)\s*", param)
            assert match, f"{symbol}: unexpected parameter {param!r}"
            parsed.append((match[3], C_TYPES[match[1]], bool(match[2])))
        out[symbol] = parsed
    return out


# the kernels' arithmetic, line by line as in optimizer.cu (numpy rounds each operation as the intrinsics do)
def _prepared(w, grad, grad_scale, clip, l1, l2):
    g = grad * grad_scale * clip
    if l1 != 0:
        g = g + np.sign(w) * l1
    if l2 != 0:
        g = g + w * l2
    return g


def _clip(T, clip, clipped):
    return T(clip[0]) if clipped else T(1)


def _sgd(w, grad, lr, clip, lr_scale, grad_scale, l1, l2, weight_decay, clipped, n):
    T = w.dtype.type
    rate = T(lr[0]) * lr_scale
    g = _prepared(w, grad, grad_scale, _clip(T, clip, clipped), l1, l2)
    step = (g + w * weight_decay) * rate if weight_decay != 0 else g * rate
    w[...] = w - step


def _momentum(w, m, grad, lr, clip, lr_scale, grad_scale, l1, l2, beta, weight_decay, clipped, n):
    T = w.dtype.type
    rate = T(lr[0]) * lr_scale
    decay_rate = rate * weight_decay
    g = _prepared(w, grad, grad_scale, _clip(T, clip, clipped), l1, l2)
    m[...] = m * beta - g * rate
    wn = w + m
    if weight_decay != 0:
        wn = wn - w * decay_rate
    w[...] = wn


def _adam_body(w, m, v, grad, rate, c, grad_scale, l1, l2, beta1, beta2, epsilon, weight_decay):
    T = w.dtype.type
    g = _prepared(w, grad, grad_scale, c, l1, l2)
    m[...] = m * beta1 + g * (T(1) - beta1)
    v[...] = v * beta2 + g * (T(1) - beta2) * g
    u = m / (np.sqrt(v) + epsilon)
    if weight_decay != 0:
        u = u + w * weight_decay
    w[...] = w - u * rate


def _adam(w, m, v, grad, lr, clip, grad_scale, l1, l2, beta1, beta2, epsilon, weight_decay, clipped, n):
    T = w.dtype.type
    _adam_body(w, m, v, grad, T(lr[0]), _clip(T, clip, clipped), grad_scale, l1, l2, beta1, beta2, epsilon,
               weight_decay)


def _adam_bias_corrected(w, m, v, beta1_t, beta2_t, grad, lr, clip, grad_scale, l1, l2, beta1, beta2, epsilon,
                         weight_decay, clipped, n):
    T = w.dtype.type
    rate = T(lr[0]) * np.sqrt(T(1) - beta2_t[0]) / (T(1) - beta1_t[0])
    _adam_body(w, m, v, grad, rate, _clip(T, clip, clipped), grad_scale, l1, l2, beta1, beta2, epsilon,
               weight_decay)


def _beta_powers(beta1_t, beta2_t, beta1, beta2):
    beta1_t[...] = beta1_t * beta1
    beta2_t[...] = beta2_t * beta2


BODIES = {"sgd_update": _sgd, "momentum_update": _momentum, "adam_update": _adam,
          "adam_bias_corrected_update": _adam_bias_corrected, "adam_beta_powers": _beta_powers}


class _DeviceOnly(np.ndarray):
    """A device array as far as the host may touch it: no element read (``float``, ``int``, indexing)."""

    def __getitem__(self, key):
        raise AssertionError("a device value read on the host")

    def __float__(self):
        raise AssertionError("a device value read on the host")

    __int__ = __index__ = __float__

    def item(self, *args):
        raise AssertionError("a device value read on the host")


class _StandInCupy:
    """numpy behind the names the builders use; ``RawModule`` checks each launch against the source's signature."""

    def __getattr__(self, name):  # the records' kernels, for the fallbacks, run on numpy
        return getattr(np, name)

    class cuda:  # noqa: N801 (CuPy's name)
        class Device:
            id = 0

    class RawModule:
        launches: list[str] = []

        def __init__(self, code: str) -> None:
            self.entries = entry_points(code)
            self.signatures = _signatures(code)

        def get_function(self, symbol: str):
            assert symbol in self.entries
            params = self.signatures[symbol]
            body = BODIES[symbol[:-4]]

            def launch(grid, block, args):
                assert len(grid) == len(block) == 1 and grid[0] >= 1 and block[0] >= 1
                assert len(args) == len(params), f"{symbol}: {len(args)} arguments for {len(params)} parameters"
                named = {}
                for (name, ctype, pointer), arg in zip(params, args, strict=True):
                    if pointer:
                        assert isinstance(arg, np.ndarray) and arg.dtype == ctype, f"{symbol}({name}): {arg!r}"
                        assert arg.flags.c_contiguous, f"{symbol}({name}) is not contiguous"
                        named[name] = arg.view(np.ndarray).reshape(-1)
                    else:
                        assert type(arg) is ctype, f"{symbol}({name}): {type(arg)} for {ctype}"
                        named[name] = arg
                if "n" in named:
                    assert named["n"] == named["w"].size
                type(self).launches.append(symbol)
                body(**named)

            return launch


@pytest.fixture
def stand_in():
    _StandInCupy.RawModule.launches = []
    return _StandInCupy()


SLOT_INIT = {"optim_sgd_update": [], "optim_momentum_update": ["like"], "optim_adam_update": ["like", "like"],
             "optim_adam_bias_corrected_update": ["like", "like", "beta1", "beta2"]}
HYPER = {"optim_sgd_update": {}, "optim_momentum_update": {"beta": 0.9},
         "optim_adam_update": {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8},
         "optim_adam_bias_corrected_update": {"beta1": 0.8, "beta2": 0.95, "epsilon": 1e-6}}
CASES = {
    "plain": {"weight_decay": 0.0},
    "weight_decay": {"weight_decay": 0.01},
    "grad_scale": {"weight_decay": 0.0, "grad_scale": 0.37},  # folded into the rate for SGD and momentum
    "clipped": {"weight_decay": 0.0, "clipped": True},
    "everything": {"weight_decay": 0.05, "grad_scale": 0.3, "clipped": True, "l1": 0.01, "l2": 0.02},
    "regularized": {"weight_decay": 0.0, "l1": 0.001, "l2": 0.003},
}


def _specs(op, shape, dtype, attrs, lr_dtype=np.float32, extra=()):
    var = BlobSpec(shape, np.dtype(dtype))
    slots = [var if kind == "like" else BlobSpec((1,), var.dtype) for kind in SLOT_INIT[op]]
    scalars = [BlobSpec((1,), np.dtype(lr_dtype))] * (2 if attrs.get("clipped") else 1)
    return (var, *slots, var, *scalars, *extra)


def _context(xp, op, specs, attrs, ops=RECORDS):
    return KernelContext(xp, None, op, "update", attrs, tuple(specs), (), job_type="train", ops=ops)


def _state(op, shape, dtype, attrs, seed, lr_dtype=np.float32):
    """(w, *slots, lr[, clip]) as host arrays, and a gradient per step."""
    rng = np.random.default_rng(seed)
    w = rng.normal(size=shape).astype(dtype)
    w.reshape(-1)[:2] = 0  # sign(0) for the l1 term
    slots = []
    for kind in SLOT_INIT[op]:
        slots.append(rng.normal(size=shape).astype(dtype) * 0.1 if kind == "like"
                     else np.array([HYPER[op][kind]], dtype))
    if op.startswith("optim_adam"):
        slots[1] = np.abs(slots[1])  # a second moment
    scalars = [np.array([0.05], lr_dtype)] + ([np.array([0.7], lr_dtype)] if attrs.get("clipped") else [])
    grads = [rng.normal(size=shape).astype(dtype) for _ in range(3)]
    return [w, *slots], scalars, grads


def _run_both(op, cp, dtype, attrs, shape=(6, 9), seed=0, wrap=lambda a: a, to_host=np.asarray):
    """Three steps of the builder on ``cp`` and of the record's kernel on numpy, from the same state."""
    state, scalars, grads = _state(op, shape, dtype, attrs, seed)
    specs = _specs(op, shape, dtype, attrs)
    ours = optimizer_kernels.KERNEL_BUILDERS[op](_context(cp, op, specs, attrs))
    theirs = RECORDS[op].kernel(_context(np, op, specs, attrs))
    mine = [wrap(a.copy()) for a in state]
    scalars_mine = [wrap(a.copy()) for a in scalars]
    for g in grads:
        assert ours(*mine, wrap(g.copy()), *scalars_mine) is None
        theirs(*state, g, *scalars)
    return [to_host(a) for a in mine], state


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op", sorted(optimizer_kernels.KERNEL_BUILDERS))
def test_the_host_side_matches_the_records_kernel(op, dtype, case, stand_in):
    attrs = {**HYPER[op], **CASES[case]}

    def device_only(a):
        return a.view(_DeviceOnly)

    got, want = _run_both(op, stand_in, dtype, attrs, wrap=device_only, to_host=lambda a: a.view(np.ndarray))
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)  # the same operations, each rounded as numpy rounds it
    dt = np.dtype(dtype).name
    launches = [optimizer_kernels.SYMBOLS[op][dt]]
    if op == optimizer_kernels.ADAM_BIAS_CORRECTED:
        launches.append(optimizer_kernels.BETA_POWERS[dt])
    assert _StandInCupy.RawModule.launches == launches * 3  # one fused launch per step (two for the beta powers)


def test_every_symbol_is_an_entry_point_of_the_source():
    code = kernel_source(optimizer_kernels.FAMILY)
    wanted = {s for symbols in optimizer_kernels.SYMBOLS.values() for s in symbols.values()}
    wanted |= set(optimizer_kernels.BETA_POWERS.values())
    assert wanted == set(entry_points(code))
    assert set(_signatures(code)) == wanted
    assert optimizer_kernels.OVERRIDES == {op: ("optimizer", s) for op, s in optimizer_kernels.SYMBOLS.items()}
    assert set(optimizer_kernels.KERNEL_BUILDERS) == set(optimizer_kernels.SYMBOLS) <= set(RECORDS)


def test_the_slot_layouts_are_the_records():
    for op, slots in optimizer_kernels.SLOTS.items():
        assert len(slots) == len(SLOT_INIT[op])
        assert RECORDS[op].effects.mutates == tuple(range(len(slots) + 1))


class _Spy:
    """The op registry, counting the records' kernels built through it."""

    def __init__(self):
        self.built = []

    def __getitem__(self, name):
        self.built.append(name)
        return RECORDS[name]


@pytest.mark.parametrize("what", ["float16", "accumulation", "loss_scale", "lr_float64", "scalar_momentum"])
def test_what_is_not_covered_runs_the_records_kernel(what, stand_in):
    op, dtype, attrs, extra, lr_dtype = "optim_momentum_update", np.float32, {"beta": 0.9, "weight_decay": 0.0}, (), \
        np.float32
    counter = BlobSpec((1,), np.dtype(np.int64))
    if what == "float16":
        dtype = np.float16
    elif what == "accumulation":
        attrs, extra = {**attrs, "accumulation_steps": 2}, (counter,)
    elif what == "loss_scale":
        attrs, extra = {**attrs, "skip_if_not_finite": True}, (counter,)
    elif what == "lr_float64":
        lr_dtype = np.float64
    specs = _specs(op, (4, 3), dtype, attrs, lr_dtype, extra)
    if what == "scalar_momentum":
        specs = (specs[0], BlobSpec((1,), specs[0].dtype), *specs[2:])
    spy = _Spy()
    run = optimizer_kernels.KERNEL_BUILDERS[op](_context(stand_in, op, specs, attrs, ops=spy))
    assert spy.built == [op]
    if what in ("accumulation", "loss_scale"):
        rng = np.random.default_rng(3)
        w, m, g = (rng.normal(size=(4, 3)).astype(dtype) for _ in range(3))
        w0 = w.copy()
        run(w, m, g, np.array([0.1], lr_dtype), np.array([0], np.int64))  # micro-step 0 of 2 / finite: gate
        if what == "accumulation":
            np.testing.assert_array_equal(w, w0)  # not the last micro-batch: nothing ran
        else:
            assert not np.array_equal(w, w0)
    assert _StandInCupy.RawModule.launches == []


def test_a_non_contiguous_call_runs_the_records_kernel_built_once(stand_in):
    op, attrs = "optim_adam_update", {**HYPER["optim_adam_update"], "weight_decay": 0.01}
    specs = _specs(op, (5, 4), np.float64, attrs)
    spy = _Spy()
    ours = optimizer_kernels.KERNEL_BUILDERS[op](_context(stand_in, op, specs, attrs, ops=spy))
    theirs = RECORDS[op].kernel(_context(np, op, specs, attrs))
    assert spy.built == []
    state, scalars, grads = _state(op, (5, 4), np.float64, attrs, seed=4)
    mine = [a.copy() for a in state]
    for step, g in enumerate(grads):
        transposed = np.ascontiguousarray(g.T).T  # the same values, column-major
        ours(*mine, transposed if step else g, *scalars)
        theirs(*state, g, *scalars)
    assert spy.built == [op]  # built on the first non-contiguous call, kept for the next
    assert _StandInCupy.RawModule.launches == ["adam_update_f64"]
    for got, want in zip(mine, state, strict=True):
        np.testing.assert_array_equal(got, want)


def test_without_the_op_registry_an_uncovered_node_names_the_reason(stand_in):
    specs = _specs("optim_sgd_update", (3,), np.float16, {"weight_decay": 0.0})
    ctx = _context(stand_in, "optim_sgd_update", specs, {"weight_decay": 0.0}, ops=None)
    with pytest.raises(FlowjobError, match=r"'update' \(optim_sgd_update\): no CUDA kernel for float16"):
        optimizer_kernels.sgd_update_kernel(ctx)


@pytest.mark.gpu
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op", sorted(optimizer_kernels.KERNEL_BUILDERS))
@pytest.mark.parametrize("shape", [(6, 9), (1000, 1537)])
def test_the_cuda_kernels_match_the_records_kernel(op, dtype, case, shape):
    cp = available_cupy()
    attrs = {**HYPER[op], **CASES[case]}
    got, want = _run_both(op, cp, dtype, attrs, shape=shape, seed=1, wrap=cp.asarray, to_host=cp.asnumpy)
    tol = 1e-6 if dtype == np.float32 else 1e-12
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol * 1e-2)


@pytest.mark.gpu
def test_the_cuda_updates_are_bitwise_the_records():
    """The intrinsics round each operation once, as numpy does: not merely close, equal (FMA contraction would
    differ in the last bit)."""
    cp = available_cupy()
    for op in sorted(optimizer_kernels.KERNEL_BUILDERS):
        attrs = {**HYPER[op], **CASES["everything"]}
        got, want = _run_both(op, cp, np.float32, attrs, shape=(257, 33), seed=2, wrap=cp.asarray,
                              to_host=cp.asnumpy)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(g, w)


@pytest.mark.gpu
def test_a_step_reads_nothing_back_and_captures_in_a_cuda_graph():
    cp = available_cupy()
    op = "optim_adam_bias_corrected_update"
    attrs = {**HYPER[op], **CASES["everything"]}
    specs = _specs(op, (64, 33), np.float32, attrs)
    state, scalars, grads = _state(op, (64, 33), np.float32, attrs, seed=5)
    run = optimizer_kernels.KERNEL_BUILDERS[op](_context(cp, op, specs, attrs))
    theirs = RECORDS[op].kernel(_context(np, op, specs, attrs))
    mine = [cp.asarray(a) for a in (*state, grads[0], *scalars)]
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        run(*mine)  # compiles and loads the module outside the capture
        stream.begin_capture()
        run(*mine)
        graph = stream.end_capture()
        graph.launch()
    stream.synchronize()
    for _ in range(2):  # the capture itself runs nothing
        theirs(*state, grads[0], *scalars)
    for got, want in zip(mine, state, strict=False):
        np.testing.assert_allclose(cp.asnumpy(got), want, rtol=1e-6, atol=1e-8)
