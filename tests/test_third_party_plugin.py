"""A third-party op package (examples/plugins/flowjob-swish, installed) is found, owned, blockable and usable."""
from __future__ import annotations

from importlib import metadata

import numpy as np
import pytest

import flowjob_swish
import oneflow as flow
import oneflow.typing as tp
from flowjob_core import OpBuildError, Session, make_plugin_manager
from flowjob_core.testing import check_grads, run_op


def test_the_entry_point_is_installed() -> None:
    found = {ep.name: ep.value for ep in metadata.entry_points(group="flowjob")}
    assert found.get("swish") == "flowjob_swish.plugin"


def test_a_default_session_loads_it_under_its_entry_point_name(flowjob_session: Session) -> None:
    ops = flowjob_session.registries.ops
    assert ops.owner("swish") == "swish"
    assert {op.name for op in ops if ops.owner(op.name) == "swish"} == {
        "swish", "swish_grad", "bias_add_gelu", "bias_add_gelu_grad"}
    assert flowjob_session.pm.get_plugin("swish") is not None


def test_blocking_it_removes_its_ops() -> None:
    session = Session(make_plugin_manager(environ={"FLOWJOB_BLOCKED_PLUGINS": "swish"}))
    try:
        assert "swish" not in session.registries.ops
        assert "relu" in session.registries.ops  # the other plugins still load
        with pytest.raises(OpBuildError, match="no op 'swish'"):
            run_op("swish", [np.ones(3)], session=session)
    finally:
        session.close()


def test_only_listed_plugins_load() -> None:
    session = Session(make_plugin_manager(environ={"FLOWJOB_PLUGINS": "swish"}))
    try:
        owners = {session.registries.ops.owner(op.name) for op in session.registries.ops}
        assert owners == {"swish", "core-ops"}
    finally:
        session.close()


def test_the_kit_checks_its_gradients_in_an_installed_session(flowjob_session: Session) -> None:
    x = np.random.default_rng(0).standard_normal((3, 4))
    b = np.random.default_rng(1).standard_normal(4)
    check_grads("swish", [x], {"beta": 1.5}, session=flowjob_session)
    check_grads("bias_add_gelu", [x, b], session=flowjob_session)


def test_swish_next_to_the_ops_packages_relu_in_one_job() -> None:
    flow.clear_default_session()

    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((4, 3))) -> tp.Numpy:
        return flowjob_swish.swish(flow.nn.relu(x), beta=2.0)

    x = np.linspace(-2, 2, 12, dtype=np.float32).reshape(4, 3)
    relu = np.maximum(x, 0).astype(np.float64)
    np.testing.assert_allclose(job(x), relu / (1 + np.exp(-2 * relu)), rtol=1e-6, atol=1e-7)
    flow.clear_default_session()
