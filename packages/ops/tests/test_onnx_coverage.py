"""Every op flowjob's own plugins register either exports to ONNX or has a stated reason why not (what
``python -m oneflow info`` lists), and the exporter's refusal names that reason."""
from __future__ import annotations

import pytest

from flowjob_core import Session

from flowjob_ops.export.onnx_coverage import describe, not_exported, reason
from flowjob_ops.export.onnx_nodes import CONVERTERS

OWN_PLUGINS = ("ops", "core-ops", "optim", "ofrecord", "watch")


@pytest.fixture(scope="module")
def registered() -> dict[str, str]:
    session = Session()
    try:
        ops = session.registries.ops
        return {op.name: ops.owner(op.name) for op in ops}
    finally:
        session.close()


def test_every_own_op_exports_or_says_why_not(registered: dict[str, str]) -> None:
    own = sorted(name for name, owner in registered.items() if owner in OWN_PLUGINS)
    unexplained = [op for op in own if op not in CONVERTERS and reason(op) is None]
    assert not unexplained, f"ops with neither an ONNX converter nor a reason: {unexplained}"


def test_the_issues_ops_export(registered: dict[str, str]) -> None:
    wanted = {"acos", "asin", "atan", "acosh", "asinh", "atanh", "tan", "sinh", "cosh", "round", "less", "greater",
              "less_equal", "greater_equal", "equal", "not_equal", "gather_nd", "fake_quantization",
              "min_max_observer", "moving_average_min_max_observer"}
    assert wanted <= set(CONVERTERS) and wanted <= set(registered)


def test_info_lists_the_ops_that_do_not_export_by_reason(registered: dict[str, str]) -> None:
    lines = describe(registered)
    assert lines[0].startswith(f"onnx export (flow.onnx.export): {len(set(registered) & set(CONVERTERS))} of "
                               f"{len(registered)} ops")
    listed = {op.strip() for line in lines[1:] for op in line.split(": ", 1)[1].split(",")}
    assert listed == set(not_exported(registered)) and "lgamma" in listed and "relu" not in listed
    assert any(line.startswith("  ONNX has no log-gamma function") for line in lines)
