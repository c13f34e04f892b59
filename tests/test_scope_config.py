"""flow.experimental.scope.config: legacy's scope attributes, checked by name and type, kept on the nodes traced
inside (nested calls merge), the no-effect ones recorded."""
from __future__ import annotations

import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core import ConfigError
from flowjob_core.config.options import UnknownOptionError, recorded_options


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


def test_scope_config_checks_names_and_values():
    with pytest.raises(UnknownOptionError, match=r"flow\.experimental\.scope\.config: unknown scope attribute "
                                                 r"'ssp_num_stage'; did you mean 'ssp_num_stages'\?"):
        flow.experimental.scope.config(ssp_num_stage=2)
    with pytest.raises(ConfigError, match=r"quantization_aware_training expects a bool, got 1"):
        flow.experimental.scope.config(quantization_aware_training=1)
    with flow.experimental.scope.config(checkpointing=True):
        pass
    assert recorded_options()["flow.experimental.scope.config.checkpointing"] is True


def test_experimental_scope_keeps_flow_scope_names_for_v04_programs():
    import oneflow.experimental as experimental

    assert experimental.scope.config is flow.experimental.scope.config
    assert experimental.scope.placement is flow.scope.placement  # import oneflow.experimental as flow


def test_nested_scope_configs_merge_onto_the_nodes():
    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        with flow.experimental.scope.config(ssp_num_stages=2):
            with flow.experimental.scope.config(ssp_stage_id=1, quantization_aware_training=False):
                y = flow.math.relu(x, name="inner")
            z = flow.math.relu(y, name="outer")
        return flow.math.relu(z, name="plain")

    nodes = {n.name: n for n in job.ensure_traced().nodes}
    assert dict(nodes["inner"].scope) == {"ssp_num_stages": 2, "ssp_stage_id": 1, "quantization_aware_training": False}
    assert dict(nodes["outer"].scope) == {"ssp_num_stages": 2}
    assert nodes["plain"].scope == ()
