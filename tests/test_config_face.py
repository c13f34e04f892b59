"""flow.config through the face: every legacy name there, a misspelt one names the closest,
and ``python -m oneflow info`` lists the no-effect options this process set."""
from __future__ import annotations

import pytest

import oneflow as flow
from oneflow.__main__ import main as oneflow_main
from flowjob_core import ConfigError
from flowjob_core.api.flow_config_options import TopLevel


@pytest.fixture(autouse=True)
def fresh_session(monkeypatch):
    monkeypatch.setenv("FLOWJOB_DISABLE_PLUGIN_AUTOLOAD", "1")
    flow.clear_default_session()
    yield
    flow.clear_default_session()


def test_every_legacy_flow_config_name_is_there():
    legacy = {"gpu_device_num", "cpu_device_num", "machine_num", "enable_debug_mode", "load_library",
              "load_library_now", "legacy_model_io_enabled", "collective_boxing", "cudnn", *TopLevel._options}
    assert legacy <= set(flow.config.__all__)
    for name in flow.config.__all__:
        assert callable(getattr(flow.config, name)) or name in ("collective_boxing", "cudnn")


def test_misspelt_flow_config_option():
    with pytest.raises(ConfigError, match="unknown flow.config option .gpu_device_nums.; did you mean"):
        flow.config.gpu_device_nums(1)
    assert not hasattr(flow.config, "no_such_option")


def test_info_lists_the_recorded_options(capsys):
    flow.config.use_rdma(False)
    flow.config.collective_boxing.nccl_fusion_threshold_mb(32)
    cfg = flow.function_config()
    cfg.cudnn_conv_heuristic_search_algo(False)
    assert oneflow_main(["info"]) == 0
    out = capsys.readouterr().out
    section = out[out.index("recorded options (no effect here):"):]
    assert "flow.config.use_rdma = False" in section
    assert "flow.config.collective_boxing.nccl_fusion_threshold_mb = 32" in section
    assert "function_config.cudnn_conv_heuristic_search_algo = False" in section
    assert flow.config.recorded_options()["flow.config.use_rdma"] is False
