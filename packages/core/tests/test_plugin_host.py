"""The plugin host: fresh managers, built-ins, entry-point discovery, switches and loud failures."""
from __future__ import annotations

import importlib.metadata
import sys
import types

import pytest

from flowjob_core import ConfigError, OpDef, PluginError, Session, hookimpl, make_plugin_manager
from flowjob_core.plugins.host import BUILTIN_PLUGINS, describe_plugins, gather_registries
from flowjob_core.plugins.registry import Registries


def _plugin_module(name: str, **hooks) -> types.ModuleType:
    module = types.ModuleType(name)
    for hook_name, fn in hooks.items():
        setattr(module, hook_name, hookimpl(fn))
    sys.modules[name] = module
    return module


def _op(name: str) -> OpDef:
    return OpDef(name, lambda i, a: [i[0]], not_differentiable=True)


def _adds(op_name: str, calls: list[str] | None = None):
    """A ``flowjob_add_ops`` implementation registering one op (and noting the call in ``calls``)."""
    def add_ops(registry):
        if calls is not None:
            calls.append(op_name)
        registry.add(_op(op_name))
    return add_ops


class _FakeDist:
    """Enough of importlib.metadata.Distribution for discovery."""

    def __init__(self, name: str, eps: list[importlib.metadata.EntryPoint]) -> None:
        self.metadata = {"name": name, "Name": name}
        self.entry_points = eps
        self.version = "9.9"
        self.name = name

    @property
    def project_name(self) -> str:
        return self.name


@pytest.fixture
def fake_dists(monkeypatch):
    """Install fake distributions whose ``flowjob`` entry points name in-memory modules."""
    dists: list[_FakeDist] = []

    def add(dist_name: str, ep_name: str, module: types.ModuleType) -> None:
        ep = importlib.metadata.EntryPoint(ep_name, module.__name__, "flowjob")
        dists.append(_FakeDist(dist_name, [ep]))

    monkeypatch.setattr(importlib.metadata, "distributions", lambda **kw: iter(dists))
    monkeypatch.setattr(importlib.metadata, "entry_points",
                        lambda group=None, **kw: [ep for d in dists for ep in d.entry_points if ep.group == group])
    return add


def test_builtins_register_like_plugins():
    pm = make_plugin_manager(autoload=False)
    names = {name for name, _ in pm.list_name_plugin()}
    assert {name for name, _ in BUILTIN_PLUGINS} <= names
    regs = gather_registries(pm)
    assert "variable" in regs.ops and regs.ops.owner("variable") == "core-ops"
    assert [p.name for p in regs.passes.ordered()] == ["verify", "autodiff", "dce", "verify-final"]
    assert regs.backends.get("cpu").name == "numpy"


def test_each_factory_call_gives_a_fresh_manager():
    a, b = make_plugin_manager(autoload=False), make_plugin_manager(autoload=False)
    assert a is not b
    a.register(_plugin_module("fj_test_only_a", flowjob_add_ops=_adds("only_a")))
    assert "only_a" in gather_registries(a).ops
    assert "only_a" not in gather_registries(b).ops


def test_entry_point_discovery(fake_dists):
    fake_dists("fj-ext", "ext", _plugin_module("fj_test_ext", flowjob_add_ops=_adds("ext_op")))
    pm = make_plugin_manager(environ={})
    regs = gather_registries(pm)
    assert regs.ops.owner("ext_op") == "ext"
    rows = {r["name"]: r for r in describe_plugins(pm)}
    assert rows["ext"]["distribution"] == "fj-ext 9.9"
    assert rows["ext"]["hooks"] == ["flowjob_add_ops"]


def test_blocked_and_allow_list_and_disable(fake_dists):
    fake_dists("fj-one", "one", _plugin_module("fj_test_one", flowjob_add_ops=_adds("one_op")))
    fake_dists("fj-two", "two", _plugin_module("fj_test_two", flowjob_add_ops=_adds("two_op")))
    ops = lambda env: gather_registries(make_plugin_manager(environ=env)).ops  # noqa: E731
    assert "one_op" in ops({}) and "two_op" in ops({})
    blocked = ops({"FLOWJOB_BLOCKED_PLUGINS": "one"})
    assert "one_op" not in blocked and "two_op" in blocked
    only = ops({"FLOWJOB_PLUGINS": "two"})
    assert "one_op" not in only and "two_op" in only
    off = ops({"FLOWJOB_DISABLE_PLUGIN_AUTOLOAD": "1"})
    assert "one_op" not in off and "two_op" not in off
    with pytest.raises(PluginError, match="no installed distribution provides them"):
        make_plugin_manager(environ={"FLOWJOB_PLUGINS": "three"})


def test_blocking_a_builtin():
    pm = make_plugin_manager(autoload=False, environ={"FLOWJOB_BLOCKED_PLUGINS": "numpy-backend"})
    assert gather_registries(pm).backends.get("cpu") is None


def test_hook_typo_fails_loudly():
    typo = _plugin_module("fj_test_typo", flowjob_add_opps=lambda registry: None)
    with pytest.raises(PluginError, match="flowjob_add_opps"):
        make_plugin_manager(plugins=[typo], autoload=False)


def test_broken_plugin_is_named(fake_dists):
    fake_dists("fj-broken", "broken", types.SimpleNamespace(__name__="fj_test_missing_module_xyz"))
    with pytest.raises(PluginError, match="'broken' failed to load"):
        make_plugin_manager(environ={})


def test_duplicate_op_names_both_plugins():
    first = _plugin_module("fj_test_dup1", flowjob_add_ops=_adds("dup"))
    second = _plugin_module("fj_test_dup2", flowjob_add_ops=_adds("dup"))
    pm = make_plugin_manager(plugins=[first, second], autoload=False)
    with pytest.raises(PluginError, match="op 'dup' registered twice: by 'fj_test_dup[12]' and by 'fj_test_dup[12]'"):
        gather_registries(pm)


def test_plugin_exception_in_registration_is_named():
    def bad(registry):
        raise RuntimeError("kaput")
    pm = make_plugin_manager(plugins=[_plugin_module("fj_test_bad", flowjob_add_ops=bad)], autoload=False)
    with pytest.raises(PluginError, match="fj_test_bad.*flowjob_add_ops.*kaput"):
        gather_registries(pm)


def test_pass_placement_and_errors():
    def add_passes(registry):
        registry.add("late", lambda job, ctx: None, after="dce", before="verify-final")
        registry.add("early", lambda job, ctx: None, after="autodiff", before="dce")
    pm = make_plugin_manager(plugins=[_plugin_module("fj_test_passes", flowjob_add_passes=add_passes)], autoload=False)
    order = [p.name for p in gather_registries(pm).passes.ordered()]
    assert order == ["verify", "autodiff", "early", "dce", "late", "verify-final"]

    def unknown(registry):
        registry.add("lost", lambda job, ctx: None, after="nowhere")
    pm = make_plugin_manager(plugins=[_plugin_module("fj_test_unknown", flowjob_add_passes=unknown)], autoload=False)
    with pytest.raises(PluginError, match="unknown pass 'nowhere'"):
        gather_registries(pm).passes.ordered()

    def cycle(registry):
        registry.add("a", lambda job, ctx: None, after="b")
        registry.add("b", lambda job, ctx: None, after="a")
    pm = make_plugin_manager(plugins=[_plugin_module("fj_test_cycle", flowjob_add_passes=cycle)], autoload=False)
    with pytest.raises(PluginError, match="cycle"):
        gather_registries(pm).passes.ordered()


def test_sessions_do_not_share_registries(toy):
    with_toy = Session(make_plugin_manager(plugins=[toy], autoload=False))
    without = Session(make_plugin_manager(autoload=False))
    try:
        assert "twice" in with_toy.registries.ops
        assert "twice" not in without.registries.ops
    finally:
        with_toy.close()
        without.close()


def test_each_plugin_is_called_once_under_its_own_name():
    calls = []

    class Renamed:  # an implementation named through specname is attributed like any other
        @staticmethod
        @hookimpl(specname="flowjob_add_ops")
        def add_my_ops(registry):
            calls.append("renamed")
            registry.add(_op("renamed_op"))

    first = _plugin_module("fj_test_once", flowjob_add_ops=_adds("once_op", calls))
    pm = make_plugin_manager(plugins=[first], autoload=False)
    pm.register(Renamed, "renamed-plugin")
    regs = gather_registries(pm)
    assert sorted(calls) == ["once_op", "renamed"]
    assert regs.ops.owner("renamed_op") == "renamed-plugin" and regs.ops.owner("once_op") == "fj_test_once"
    assert regs.ops.current_plugin == "" and regs.passes.current_plugin == ""


def test_registration_follows_pluggys_call_order():
    seen = []
    late = _plugin_module("fj_test_late", flowjob_add_ops=lambda registry: seen.append("late"))
    first = types.ModuleType("fj_test_first")
    first.flowjob_add_ops = hookimpl(tryfirst=True)(lambda registry: seen.append("first"))
    gather_registries(make_plugin_manager(plugins=[first, late], autoload=False))
    assert seen[:2] == ["first", "late"]


def test_the_entry_point_that_fails_is_named_not_one_loaded_before(fake_dists):
    fake_dists("fj-good", "good", _plugin_module("fj_test_good", flowjob_add_ops=lambda registry: None))
    fake_dists("fj-broken", "broken", types.SimpleNamespace(__name__="fj_test_missing_module_xyz"))
    with pytest.raises(PluginError, match="flowjob plugin 'broken' failed to load: ModuleNotFoundError"):
        make_plugin_manager(environ={})
    with pytest.raises(PluginError, match="flowjob plugin 'broken' failed to load"):
        make_plugin_manager(environ={"FLOWJOB_PLUGINS": "good,broken"})
    # a blocked entry point is never imported, so a broken one can be blocked away
    pm = make_plugin_manager(environ={"FLOWJOB_BLOCKED_PLUGINS": "broken"})
    assert pm.has_plugin("good") and not pm.has_plugin("broken")


def test_an_invalid_entry_point_is_named(fake_dists):
    fake_dists("fj-ok", "ok", _plugin_module("fj_test_ok", flowjob_add_ops=lambda registry: None))
    fake_dists("fj-invalid", "invalid", _plugin_module("fj_test_invalid", flowjob_add_ops=lambda oops: None))
    with pytest.raises(PluginError, match="(?s)flowjob plugin 'invalid' is invalid.*oops"):
        make_plugin_manager(environ={})


def test_switches_are_read_from_the_process_environment(fake_dists, monkeypatch):
    fake_dists("fj-env", "env", _plugin_module("fj_test_env", flowjob_add_ops=_adds("env_op")))
    monkeypatch.setenv("FLOWJOB_BLOCKED_PLUGINS", "env")
    assert "env_op" not in gather_registries(make_plugin_manager()).ops
    monkeypatch.delenv("FLOWJOB_BLOCKED_PLUGINS")
    monkeypatch.setenv("FLOWJOB_DISABLE_PLUGIN_AUTOLOAD", "yes")
    assert "env_op" not in gather_registries(make_plugin_manager()).ops
    assert "env_op" in gather_registries(make_plugin_manager(autoload=True)).ops  # the argument wins
    monkeypatch.setenv("FLOWJOB_DISABLE_PLUGIN_AUTOLOAD", "maybe")
    with pytest.raises(ConfigError, match="FLOWJOB_DISABLE_PLUGIN_AUTOLOAD='maybe'"):
        make_plugin_manager()


def test_registries_hold_only_the_registries():
    assert sorted(f for f in Registries.__dataclass_fields__) == [
        "backends", "kernels", "ops", "passes", "result_kinds", "watch_sinks"]


def test_an_unhashable_plugin_is_called_once_and_named():
    calls = []
    loose = types.SimpleNamespace(  # unhashable: pluggy's subset callers cannot hold it
        flowjob_add_ops=hookimpl(lambda registry: calls.append("loose") or registry.add(_op("loose_op"))),
        flowjob_add_passes=hookimpl(lambda registry: registry.add("loose-pass", lambda job, ctx: None, phase="fuse")))
    other = _plugin_module("fj_test_beside", flowjob_add_ops=_adds("beside_op", calls))
    pm = make_plugin_manager(plugins=[other], autoload=False)
    pm.register(loose, "loose-plugin")
    regs = gather_registries(pm)
    assert sorted(calls) == ["beside_op", "loose"]
    assert regs.ops.owner("loose_op") == "loose-plugin" and regs.ops.owner("beside_op") == "fj_test_beside"
    assert regs.ops.owner("variable") == "core-ops"
    assert {spec.name: spec.plugin for spec in regs.passes.ordered()}["loose-pass"] == "loose-plugin"
    clash = types.SimpleNamespace(flowjob_add_ops=hookimpl(lambda registry: registry.add(_op("beside_op"))))
    pm.register(clash, "clash-plugin")
    with pytest.raises(PluginError, match="op 'beside_op' registered twice: by '(fj_test_beside|clash-plugin)' and by "
                                          "'(fj_test_beside|clash-plugin)'"):
        gather_registries(pm)
