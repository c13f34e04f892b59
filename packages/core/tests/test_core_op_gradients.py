"""Core's own ops (gradient plumbing) through the same conformance suite as every op package."""
import numpy as np
import hypothesis.strategies as st

from flowjob_core.testing import OpCase, conformance_suite, strategies


def _add_n(draw):
    shape = draw(strategies.small_shapes(1, 3, 4))
    n = draw(st.integers(1, 3))
    return [draw(strategies.arrays(shape)) for _ in range(n)], {}


def _unbroadcast(draw):
    x = draw(strategies.arrays((3, 2, 4)))
    return [x], {"shape": draw(st.sampled_from([(2, 4), (1, 4), (2, 1), (1, 1, 4), (4,)]))}


def _broadcast_to(draw):
    x = draw(strategies.arrays(draw(st.sampled_from([(1,), (4,), (2, 1)]))))
    return [x], {"shape": (3, 2, 4) if x.shape != (2, 1) else (2, 5)}


def _scalar_mul(draw):
    return [draw(strategies.arrays(draw(strategies.small_shapes(1, 3, 4))))], {"scalar": draw(st.floats(-3, 3))}


def _ones_like(draw):
    return [draw(strategies.arrays(draw(strategies.small_shapes(1, 2, 4))))], {}


def _scale_by_loss_count(draw):
    grad = draw(strategies.arrays(draw(strategies.small_shapes(1, 3, 4))))
    losses = [draw(strategies.arrays(draw(strategies.small_shapes(1, 2, 3)))) for _ in range(draw(st.integers(1, 2)))]
    return [grad, *losses], {}


def _unbroadcast_ref(x, shape):
    lead = x.ndim - len(shape)
    keep = tuple(lead + i for i, d in enumerate(shape) if d == 1 and x.shape[lead + i] != 1)
    return np.sum(x, axis=tuple(range(lead)) + keep, keepdims=True).reshape(shape)


CASES = [
    OpCase("add_n", _add_n, reference=lambda *xs: sum(xs)),
    OpCase("unbroadcast", _unbroadcast, reference=_unbroadcast_ref),
    OpCase("broadcast_to", _broadcast_to, reference=lambda x, shape: np.broadcast_to(x, shape)),
    OpCase("scalar_mul", _scalar_mul, reference=lambda x, scalar: x * scalar),
    OpCase("scale_by_loss_count", _scale_by_loss_count,
           reference=lambda grad, *losses: grad / max(1, sum(loss.size for loss in losses)), wrt=()),
    OpCase("ones_like", _ones_like, reference=lambda x: np.ones_like(x), wrt=()),
    OpCase("return", _ones_like, reference=lambda x: x, wrt=()),
    OpCase("fetch", _ones_like, reference=lambda x: x, wrt=()),
]

EXEMPT = {
    "input": "a placeholder: the planner feeds it, it has no kernel (covered by every job test)",
    "variable": "reads session state by name (covered by the planner and autodiff tests)",
}

test_op_gradients, test_op_forward, test_ops_covered = conformance_suite(CASES, plugin="core-ops", exempt=EXEMPT)
