"""A third-party op that declares an ``Elementwise`` descriptor gets its kernel from it and joins
elementwise chains like a built-in op: the chain registered in a session finds its steps in that
session's op registry, not in a list of flowjob-ops."""
from __future__ import annotations

import sys
from typing import Any, Sequence

import numpy as np
import pytest

import flowjob_core as fc
import flowjob_typing as tp
from flowjob_core import BlobSpec, Elementwise, JobFunction, OpDef, Session, hookimpl, make_plugin_manager
from flowjob_ops.api import math
from flowjob_ops.records.fused import ELEMENTWISE_CHAIN, STEPS


def _same(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    return [inputs[0]]


CBRT = OpDef("test_cbrt", _same, not_differentiable=True, elementwise=Elementwise("cbrt"), doc="cube root")
HYPOT = OpDef("test_hypot", _same, not_differentiable=True, elementwise=Elementwise("hypot", arity=2),
              doc="sqrt(a^2 + b^2), b broadcast into a")


@hookimpl
def flowjob_add_ops(registry: Any) -> None:
    registry.add(CBRT)
    registry.add(HYPOT)


def _session() -> Session:
    import flowjob_ops.plugin
    import flowjob_typing.plugin

    plugins = [flowjob_ops.plugin, flowjob_typing.plugin, sys.modules[__name__]]
    return Session(make_plugin_manager(plugins=plugins, autoload=False))


def _run(fused: bool, x: np.ndarray, y: np.ndarray, monkeypatch: pytest.MonkeyPatch) -> tuple[np.ndarray, list]:
    monkeypatch.setenv("FLOWJOB_FUSION", "1" if fused else "0")
    session = _session()
    try:
        def body(x: tp.Numpy.Placeholder((6, 5)), y: tp.Numpy.Placeholder((5,))) -> tp.Numpy:
            t = fc.apply("test_cbrt", [math.exp(x * 0.5)])
            return math.negative(fc.apply("test_hypot", [t, y]))

        job = JobFunction(body, "predict", None, session)
        return job(x, y), list(job.plan().order)
    finally:
        session.close()


def test_a_plugin_op_with_a_descriptor_joins_a_chain_bitwise(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 5)).astype(np.float32)
    y = rng.standard_normal((5,)).astype(np.float32)
    got, order = _run(True, x, y, monkeypatch)
    want, ref_order = _run(False, x, y, monkeypatch)
    chains = [[op for op, _, _ in n.attrs["steps"]] for n in order if n.op == "elementwise_chain"]
    assert chains == [["scalar_mul", "exp", "test_cbrt", "test_hypot", "negative"]]
    assert "test_cbrt" in [n.op for n in ref_order]
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, -np.hypot(np.cbrt(np.exp(x * np.float32(0.5))), y))


def test_the_kernel_comes_from_the_descriptor() -> None:
    x = np.array([-8.0, 27.0], np.float32)
    run = CBRT.kernel(fc.KernelContext(np, None, CBRT.name, "k", {}, (BlobSpec((2,), np.float32),),
                                       (BlobSpec((2,), np.float32),)))
    np.testing.assert_array_equal(run(x), np.cbrt(x))


def test_the_chain_without_a_session_knows_only_the_built_in_steps() -> None:
    assert "test_cbrt" not in STEPS and "relu" in STEPS and "scalar_mul" in STEPS and "greater" in STEPS
    with pytest.raises(fc.ShapeError, match="'test_cbrt' is not one of the elementwise ops"):
        ELEMENTWISE_CHAIN.infer((BlobSpec((2,), np.float32),), {"steps": (("test_cbrt", {}, (0,)),)})
