"""The cpu overrides that cut work into cache blocks or parts over the host threads (``flowjob_ops.overrides.cpu``:
``activations_in_blocks``, ``cross_entropy_in_blocks``, ``chain_in_blocks``, ``matmul_parts``), run through the
conformance suite's ``check_forward`` on inputs large enough that the blocks and the parts engage, on one and on
two host threads: each against numpy and against the record's own whole-array kernel (the table of
``test_op_table`` draws small inputs, where the overrides run the record's kernel)."""
from __future__ import annotations

import numpy as np
import pytest

from flowjob_core import Session
from flowjob_core.backends import host_blocks, host_gemm
from flowjob_core.plan import planner
from flowjob_core.testing.conformance import OpCase, check_forward
from flowjob_core.testing.modules import sibling

cases = sibling(__file__, "op_cases")
RNG_SEED = 5

pytestmark = pytest.mark.filterwarnings("ignore:.*outside the class range:RuntimeWarning")  # the one label out of range


def _f32(rng: np.random.Generator, shape: tuple[int, ...], scale: float = 1.0) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def _relu_grad(rng):
    y = _f32(rng, (9, 16, 40, 40))
    return [np.where(np.abs(y) < 1e-3, np.float32(0.5), y), _f32(rng, y.shape)], {}


def _gelu(rng):
    return [_f32(rng, (3, 1000, 101), 3.0)], {}


def _gelu_grad(rng):
    return [_f32(rng, (3, 1000, 101), 3.0), _f32(rng, (3, 1000, 101))], {}


def _sparse_xent(rng):
    rows, classes = 37, 30011  # a run of 8 rows: five runs, a short last one
    labels = rng.integers(0, classes, rows).astype(np.int32)
    labels[3] = classes  # outside [0, C): no loss
    return [labels, _f32(rng, (rows, classes), 4.0)], {}


def _chain(rng):
    steps, _kind = cases.CHAINS["mul_bcast_tanh"]
    x = _f32(rng, (16, 9, 40, 40)).transpose(1, 0, 2, 3)  # a strided input
    return [np.ascontiguousarray(x), _f32(rng, (16, 1, 1))], {"steps": tuple((op, dict(a), args)
                                                                                for op, a, args in steps)}


def _matmul(transpose_a: bool, transpose_b: bool, batch: int | None = None):
    def make(rng):
        lead = () if batch is None else (batch,)
        a = _f32(rng, lead + ((200, 300) if transpose_a else (300, 200)))
        b = _f32(rng, lead + ((90, 200) if transpose_b else (200, 90)))
        return [a, b], {"transpose_a": transpose_a, "transpose_b": transpose_b}
    return make


def _matmul_bias(rng):
    (a, b), attrs = _matmul(False, True)(rng)
    return [a, b, _f32(rng, (90,))], attrs | {"data_format": None, "activation": "relu"}


# (op, inputs, reference, how the override cuts the work)
LARGE = [
    ("relu_grad", _relu_grad, lambda y, dy: dy * (y > 0), "blocks"),
    ("gelu", _gelu, cases.gelu_ref, "blocks"),
    ("gelu_grad", _gelu_grad, cases.gelu_grad_ref, "blocks"),
    ("sparse_softmax_cross_entropy", _sparse_xent, cases.sparse_xent_ref, "blocks"),
    ("elementwise_chain", _chain, cases.chain_ref, "blocks"),
    ("matmul", _matmul(False, False), cases.matmul_ref, "parts"),
    ("matmul", _matmul(True, True), cases.matmul_ref, "parts"),
    ("matmul", _matmul(False, True, batch=5), cases.matmul_ref, "parts"),
    ("matmul_bias", _matmul_bias, cases.matmul_bias_ref, "parts"),
]


@pytest.fixture(params=["1", "2"], ids=["1 thread", "2 threads"])
def session(request, monkeypatch):
    monkeypatch.setenv("FLOWJOB_HOST_THREADS", request.param)
    monkeypatch.setenv("FLOWJOB_GPU_EMULATION", "0")  # the cpu backend's overrides, whatever the suite's device
    # a one-node plan would give BLAS the threads; the plans of training steps hold it to one thread per caller,
    # and there the products are cut over the host threads (host_gemm.gemm_split)
    monkeypatch.setattr(planner, "blas_wide", lambda *args: False)
    sess = Session()
    yield sess
    sess.close()


@pytest.fixture
def cuts(monkeypatch):
    """How often work ran cut: runs of blocks (host_blocks.each_item over several items), split products."""
    seen = {"blocks": 0, "parts": 0}
    each_item, split_call = host_blocks.each_item, host_gemm.SplitMatmul.__call__

    def counting_each_item(items, body, split):
        seen["blocks"] += len(items) > 1
        return each_item(items, body, split)

    def counting_split_call(self, a, b, out):
        seen["parts"] += self._split is not None
        return split_call(self, a, b, out)

    monkeypatch.setattr(host_blocks, "each_item", counting_each_item)
    monkeypatch.setattr(host_gemm.SplitMatmul, "__call__", counting_split_call)
    return seen


@pytest.mark.parametrize("op, make, reference, cut", LARGE, ids=[f"{op}-{k}" for k, (op, *_) in enumerate(LARGE)])
def test_an_override_on_large_inputs_gives_the_records_values(session, cuts, op, make, reference, cut):
    threads = session.backend.lanes.threads
    inputs, attrs = make(np.random.default_rng(RNG_SEED))
    assert op in session.registries.kernels.overrides("cpu")
    check_forward(OpCase(op, make=lambda draw: (inputs, attrs), reference=reference), inputs, attrs, session)
    if cut == "blocks":
        assert cuts["blocks"] > 0, f"{op}: the override ran as one block"
    elif threads > 1:  # products are cut over several threads only
        assert cuts["parts"] > 0, f"{op}: the product was not cut over the host threads"
