"""flowjob-swish: the conformance suite over its ops, and the op used in a real job."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import strategies as st

import flowjob_swish
import flowjob_swish.plugin
from flowjob_core import JobFunction, OpBuildError, Session, make_plugin_manager
from flowjob_core.testing import kinds
from flowjob_core.testing import OpCase, conformance_suite
from flowjob_core.testing import strategies as fst

GELU_K = math.sqrt(2.0 / math.pi)


# numpy references (float64) ---------------------------------------------------------
def swish_ref(x: np.ndarray, beta: float = 1.0) -> np.ndarray:
    x = x.astype(np.float64)
    return x / (1.0 + np.exp(-beta * x))


def swish_grad_ref(x: np.ndarray, dy: np.ndarray, beta: float = 1.0) -> np.ndarray:
    x = x.astype(np.float64)
    s = 1.0 / (1.0 + np.exp(-beta * x))
    return dy * (s + beta * x * s * (1.0 - s))


def gelu_ref(u: np.ndarray) -> np.ndarray:
    return 0.5 * u * (1.0 + np.tanh(GELU_K * (u + 0.044715 * u**3)))


def bias_add_gelu_ref(x: np.ndarray, b: np.ndarray) -> np.ndarray:
    return gelu_ref(x.astype(np.float64) + b)


def bias_add_gelu_grad_ref(x: np.ndarray, b: np.ndarray, dy: np.ndarray) -> np.ndarray:
    u = x.astype(np.float64) + b
    t = np.tanh(GELU_K * (u + 0.044715 * u**3))
    return dy * (0.5 * (1 + t) + 0.5 * u * (1 - t * t) * GELU_K * (1 + 3 * 0.044715 * u * u))


# cases: inputs drawn in float32 or float64 (gradients are checked in float64 copies) --------
def _dtype(draw: st.DrawFn) -> type:
    return draw(st.sampled_from([np.float32, np.float64]))


def swish_case(draw: st.DrawFn) -> tuple[list[np.ndarray], dict]:
    x = draw(fst.arrays(fst.small_shapes())).astype(_dtype(draw))
    return [x], {"beta": draw(st.floats(0.25, 2.0))}


def swish_grad_case(draw: st.DrawFn) -> tuple[list[np.ndarray], dict]:
    shape, dtype = draw(fst.small_shapes()), _dtype(draw)
    return [draw(fst.arrays(shape)).astype(dtype), draw(fst.arrays(shape)).astype(dtype)], \
        {"beta": draw(st.floats(0.25, 2.0))}


def bias_add_gelu_case(draw: st.DrawFn) -> tuple[list[np.ndarray], dict]:
    shape, dtype = draw(fst.small_shapes(max_dims=3)), _dtype(draw)
    return [draw(fst.arrays(shape)).astype(dtype), draw(fst.arrays(shape[-1:])).astype(dtype)], {}


def bias_add_gelu_grad_case(draw: st.DrawFn) -> tuple[list[np.ndarray], dict]:
    (x, b), _ = bias_add_gelu_case(draw)
    return [x, b, draw(fst.arrays(x.shape)).astype(x.dtype)], {}


CASES = [
    OpCase("swish", swish_case, reference=swish_ref),
    OpCase("swish_grad", swish_grad_case, reference=swish_grad_ref, wrt=()),
    OpCase("bias_add_gelu", bias_add_gelu_case, reference=bias_add_gelu_ref),
    OpCase("bias_add_gelu_grad", bias_add_gelu_grad_case, reference=bias_add_gelu_grad_ref, wrt=()),
]

test_op_gradients, test_op_forward, test_ops_covered = conformance_suite(CASES, plugin="swish")


# the ops in real jobs ---------------------------------------------------------------------
# Core alone runs them: the plugin plus the testing kit's bare result kinds (no other package).
@pytest.fixture
def session() -> Session:
    s = Session(make_plugin_manager(plugins=[flowjob_swish.plugin, kinds], autoload=False))
    yield s
    s.close()


def test_swish_in_a_global_function(session: Session) -> None:
    def job(x: kinds.Array((4, 3))) -> kinds.Sync:
        return flowjob_swish.swish(x)

    x = np.linspace(-3, 3, 12, dtype=np.float32).reshape(4, 3)
    out = JobFunction(job, "predict", None, session)(x)
    assert out.dtype == np.float32 and out.shape == (4, 3)
    np.testing.assert_allclose(out, swish_ref(x), rtol=1e-6, atol=1e-7)


def test_bias_add_gelu_in_a_global_function(session: Session) -> None:
    def job(x: kinds.Array((2, 5)), b: kinds.Array((5,))) -> kinds.Sync:
        return flowjob_swish.bias_add_gelu(x, b, name="fused")

    x = np.random.default_rng(0).standard_normal((2, 5)).astype(np.float32)
    b = np.arange(5, dtype=np.float32) / 5
    out = JobFunction(job, "predict", None, session)(x, b)
    np.testing.assert_allclose(out, bias_add_gelu_ref(x, b), rtol=1e-5, atol=1e-6)


def test_shape_errors_name_the_op_and_the_users_line(session: Session) -> None:
    def job(x: kinds.Array((2, 5)), b: kinds.Array((4,))) -> kinds.Sync:
        return flowjob_swish.bias_add_gelu(x, b)

    with pytest.raises(OpBuildError) as info:
        JobFunction(job, "predict", None, session)(np.zeros((2, 5), np.float32), np.zeros((4,), np.float32))
    message = str(info.value)
    assert "(bias_add_gelu) at " in message and "test_swish.py:" in message
    assert "b must have shape (x.shape[-1],) = (5,), got (4,)" in message
