"""docs/compatibility.md and ``python -m oneflow info --api NAME``: the legacy names, their status
here, and the page kept in step with the face."""
from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

import oneflow as flow
from flowjob_core.config.function_config import FunctionConfig
from flowjob_core.errors import ConfigError
from oneflow import _coverage_report as report
from oneflow.__main__ import main

PAGE = Path(__file__).resolve().parents[3] / "docs" / "compatibility.md"


def test_committed_page_is_current():
    assert PAGE.read_text(encoding="utf-8") == report.page(), (
        f"docs/compatibility.md is stale: regenerate it with `{report.PAGE_COMMAND}`")


def test_legacy_list_is_flow_names_once_each():
    names = report.legacy_names()
    assert len(names) == len(set(names))
    for name in names:
        assert re.fullmatch(r"flow(\.[A-Za-z_][A-Za-z0-9_]*)+", name), name
        assert not name.startswith("flow.experimental."), name
    # a few names every legacy program uses, from several modules and both versions
    for name in ("flow.global_function", "flow.math.top_k", "flow.nn.conv2d", "flow.layers.dense",
                 "flow.optimizer.Adam", "flow.config.gpu_device_num", "flow.float32", "flow.typing.Numpy",
                 "flow.MirroredTensorListDef"):
        assert name in names


def _resolve(name: str) -> object:
    value: object = flow
    for part in name.split(".")[1:]:
        value = getattr(value, part)
    return value


def test_status_of_every_name_matches_the_face():
    options = report.session_options()
    for entry in report.legacy_entries():
        if entry.name in options or entry.name in report.REFUSED:
            continue
        if entry.status == report.SUPPORTED:
            _resolve(entry.name)  # raises if the page claims too much
        else:
            assert entry.status == report.MISSING, entry
            with pytest.raises(AttributeError):
                _resolve(entry.name)


def test_option_statuses_follow_their_declarations():
    entries = {e.name: e for e in report.function_config_entries()}
    assert entries["function_config.enable_cudnn"].status == report.NO_EFFECT
    assert entries["function_config.train.primary_lr"].status == report.SUPPORTED
    assert entries["function_config.enable_auto_mixed_precision"].status == report.SUPPORTED
    assert entries["function_config.enable_qat"].status == report.SUPPORTED
    assert entries["function_config.enable_ssp"].status == report.SUPPORTED
    half = entries["function_config.tensorrt.use_fp16"]
    assert half.status == report.REFUSED_STATUS and "legacy default is accepted" in half.note
    calibration = entries["function_config.tensorrt.int8_calibration"]
    assert calibration.status == report.REFUSED_STATUS and "accepted" not in calibration.note
    # every declared option is on the page, nested ones too
    page = report.page()
    for name, _ in report.walk_options(FunctionConfig):
        assert f"| `{name}` |" in page
    for name in report.session_options():
        assert f"| `{name}` |" in page


def test_refusals_are_real():
    cfg = flow.function_config()
    with pytest.raises(ConfigError, match="not supported yet"):
        cfg.tensorrt.use_fp16(True)
    cfg.tensorrt.use_fp16(False)  # the legacy default, accepted as the page says
    for name in report.REFUSED:  # options refuse with ConfigError; names without a flowjob form, NotImplementedError
        reasons = r"Python plugin|TensorBoard does not read|no TensorRT backend|python -m oneflow launch"
        with pytest.raises((ConfigError, NotImplementedError), match=reasons):
            refused = _resolve(name)
            refused(*(("libcustom_op.so",) if inspect.signature(refused).parameters else ()))


def test_info_api_for_one_name(capsys):
    assert main(["info", "--api", "flow.math.reduce_sum"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("flow.math.reduce_sum: supported (from flowjob_ops.api.reduce)")
    assert "legacy v0.3/v0.4 name" in out and "reduce_sum(input_tensor" in out
    # other spellings of the same name, and an option
    assert main(["info", "--api", "oneflow.math.reduce_sum"]) == 0
    assert capsys.readouterr().out.startswith("flow.math.reduce_sum: supported")
    assert main(["info", "--api", "function_config.enable_cudnn"]) == 0
    assert "no effect" in capsys.readouterr().out
    assert main(["info", "--api", "flow.summary.Graph"]) == 0
    assert "refused" in capsys.readouterr().out
    # a compiled library goes on where a plugin declares its ops (flowjob_op_libraries)
    assert main(["info", "--api", "flow.config.load_library"]) == 0
    assert capsys.readouterr().out.startswith("flow.config.load_library: supported")


def test_info_api_unknown_name_suggests(capsys):
    assert main(["info", "--api", "flow.math.reduce_summ"]) == 1
    assert "did you mean flow.math.reduce_sum?" in capsys.readouterr().out
    assert main(["info", "--api", "function_config.enable_cudn"]) == 1
    assert "did you mean function_config.enable_cudnn?" in capsys.readouterr().out


def test_info_api_missing_legacy_name(capsys, monkeypatch):
    # a legacy name the face lacks is answered as missing, not as unknown
    monkeypatch.setattr(report, "legacy_names", lambda path=None: ["flow.not_here_yet"])
    assert main(["info", "--api", "flow.not_here_yet"]) == 0
    assert capsys.readouterr().out.splitlines() == ["flow.not_here_yet: missing", "  legacy v0.3/v0.4 name"]


def test_the_compat_command_writes_the_page(tmp_path, capsys):
    target = tmp_path / "compatibility.md"
    assert main(["compat", "--write", str(target)]) == 0
    assert target.read_text(encoding="utf-8") == report.page()
    assert main(["compat"]) == 0
    assert capsys.readouterr().out == report.page()
