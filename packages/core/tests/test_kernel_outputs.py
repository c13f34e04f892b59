# no "from __future__ import annotations": the job signatures below use local names
"""A kernel's results against its op's inference: a plugin kernel returning another shape, dtype or number
of values is stopped at its first call, naming the job, op, line and kernel; checked once per plan (the bare
kernel runs afterwards) and on every call in debug mode."""
import types
from typing import Any

import numpy as np
import pytest

from flowjob_core import JobFunction, OpDef, Session, apply, hookimpl, make_plugin_manager
from flowjob_core.ir.job import BlobSpec
from flowjob_core.ir.opdef import KernelContext
from flowjob_core.plan.kernel_outputs import KernelOutputError

RETURNS: dict[str, Any] = {}  # what the kernel returns on its next call: "ok", "shape", "dtype", "count"


def _infer(inputs, attrs):
    return [BlobSpec((4, 3), np.float32)]


def _kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)

    def run_wrong_op(x):
        kind = RETURNS["next"]
        if kind == "shape":
            return xp.zeros((4, 5), np.float32)
        if kind == "dtype":
            return xp.zeros((4, 3), np.float64)
        if kind == "count":
            return out, out
        xp.multiply(x, 2, out=out)
        return out

    return run_wrong_op


WRONG = OpDef("wrong_op", _infer, kernel=_kernel, not_differentiable=True)
plugin = types.SimpleNamespace()


@hookimpl
def flowjob_add_ops(registry: Any) -> None:
    registry.add(WRONG)


plugin.flowjob_add_ops = flowjob_add_ops


@pytest.fixture
def wrong_session(toy):
    s = Session(make_plugin_manager(plugins=[toy, plugin], autoload=False))
    yield s
    s.close()


def _job(session, toy, debug: bool = False):
    def job(x: toy.Array((4, 3), "float32")) -> toy.Sync:
        return apply("wrong_op", [x])  # the op under test

    if debug:
        session.config.debug_mode = True
    return JobFunction(job, "predict", None, session)


@pytest.mark.parametrize("kind, says", [
    ("shape", r"output 0 is \(4, 5\):float32, inference says \(4, 3\):float32"),
    ("dtype", r"output 0 is \(4, 3\):float64, inference says \(4, 3\):float32"),
    ("count", r"it returned 2 value\(s\), the op has 1 output\(s\)"),
])
def test_a_kernel_disagreeing_with_inference_is_named(wrong_session, toy, kind, says):
    RETURNS["next"] = kind
    fn = _job(wrong_session, toy)
    with pytest.raises(KernelOutputError, match=r"job 'job', op '\w+' \(wrong_op\) at .*test_kernel_outputs.py:"
                                                r"\d+: the kernel .*_kernel.<locals>.run_wrong_op disagrees with the "
                                                r"op's inference: " + says):
        fn(np.ones((4, 3), np.float32))
    RETURNS["next"] = "ok"  # the session goes on
    np.testing.assert_array_equal(fn(np.ones((4, 3), np.float32)), np.full((4, 3), 2, np.float32))


def test_checked_once_per_plan_and_every_call_in_debug_mode(wrong_session, toy):
    RETURNS["next"] = "ok"
    fn = _job(wrong_session, toy)
    fn(np.ones((4, 3), np.float32))
    RETURNS["next"] = "shape"  # after a good first call the bare kernel runs: no check
    assert fn(np.ones((4, 3), np.float32)).shape == (4, 5)


def test_debug_mode_checks_every_call(toy):
    session = Session(make_plugin_manager(plugins=[toy, plugin], autoload=False))
    try:
        RETURNS["next"] = "ok"
        fn = _job(session, toy, debug=True)
        fn(np.ones((4, 3), np.float32))
        RETURNS["next"] = "dtype"
        with pytest.raises(KernelOutputError, match="float64"):
            fn(np.ones((4, 3), np.float32))
    finally:
        session.close()
