"""``OpDef.legacy.legacy_names``: the registry resolves them to the record (for ``flow.user_op_builder``) and refuses
a name two records would share."""
from __future__ import annotations

import pytest

from flowjob_core import LegacyFace, OpDef, PluginError
from flowjob_core.plugins.registry import OpRegistry


def _record(name: str, legacy: tuple[str, ...] = ()) -> OpDef:
    return OpDef(name, lambda inputs, attrs: list(inputs), legacy=LegacyFace(legacy_names=legacy))


def test_legacy_names_resolve_and_may_not_collide():
    ops = OpRegistry()
    ops.add(_record("pkg_schedule", ("schedule",)))
    assert ops.resolve("schedule").name == "pkg_schedule" and ops.resolve("pkg_schedule").name == "pkg_schedule"
    assert "schedule" not in ops  # a legacy name is no record of its own
    with pytest.raises(PluginError, match="legacy name 'schedule' of op 'pkg_schedule'"):
        ops.add(_record("other", ("schedule",)))
    with pytest.raises(PluginError, match="is the legacy name of op 'pkg_schedule'"):
        ops.add(_record("schedule"))
    with pytest.raises(PluginError, match="legacy name 'pkg_schedule'"):
        ops.add(_record("third", ("pkg_schedule",)))
