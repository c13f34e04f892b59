"""PassRegistry: phases, then anchors (hard and conditional), then names; never registration order."""
from __future__ import annotations

import itertools
from typing import Any

import pytest

from flowjob_core import PluginError
from flowjob_core.plugins.pass_order import DEFAULT_PHASE, PHASES, PassRegistry


def _noop(job: Any, ctx: Any) -> None:
    return None


# (plugin, name, keyword arguments of add) for a registry shaped like a real installation
_CORE = [("core", "verify", {"phase": "verify"}), ("core", "autodiff", {"phase": "differentiate"}),
         ("core", "dce", {"phase": "cleanup"}), ("core", "verify-final", {"phase": "finalize"})]


def _registry(entries: list[tuple[str, str, dict[str, Any]]]) -> PassRegistry:
    registry = PassRegistry()
    for plugin, name, kwargs in entries:
        registry.current_plugin = plugin
        registry.add(name, _noop, **kwargs)
    return registry


def _names(registry: PassRegistry) -> list[str]:
    return [spec.name for spec in registry.ordered()]


def test_phases_then_anchors_then_names_whatever_the_registration_order() -> None:
    entries = _CORE + [
        ("p", "zeta", {"phase": "fuse"}),
        ("p", "alpha", {"phase": "fuse", "after": "zeta"}),
        ("q", "beta", {"phase": "fuse"}),
        ("q", "look", {"phase": "instrument"}),
        ("r", "train", {"phase": "update"}),
    ]
    expected = ["verify", "autodiff", "look", "train", "dce", "beta", "zeta", "alpha", "verify-final"]
    for permutation in itertools.permutations(entries[4:]):
        assert _names(_registry(_CORE + list(permutation))) == expected
    for permutation in itertools.permutations(_CORE):
        assert _names(_registry(list(permutation) + entries[4:])) == expected


def test_phase_order_is_the_documented_one() -> None:
    assert list(PHASES) == ["verify", "differentiate", "instrument", "update", "transform", "cleanup", "fuse",
                            "finalize"]
    registry = _registry([("p", f"pass-{phase}", {"phase": phase}) for phase in reversed(PHASES)])
    assert [spec.phase for spec in registry.ordered()] == list(PHASES)


def test_conditional_anchors_apply_only_when_the_pass_is_there() -> None:
    dense = ("ops", "fuse-dense", {"phase": "fuse", "after": "fuse-conv", "after_if_present": "optim-fusion"})
    conv = ("ops", "fuse-conv", {"phase": "fuse"})
    optim = ("optim", "optim-fusion", {"phase": "fuse"})
    assert _names(_registry(_CORE + [dense, conv])) == [
        "verify", "autodiff", "dce", "fuse-conv", "fuse-dense", "verify-final"]
    for permutation in itertools.permutations([dense, conv, optim]):
        assert _names(_registry(_CORE + list(permutation)))[3:6] == ["fuse-conv", "optim-fusion", "fuse-dense"]
    early = ("x", "aaa", {"phase": "fuse", "before_if_present": "absent"})
    assert "aaa" in _names(_registry(_CORE + [early]))
    before = ("x", "zzz", {"phase": "fuse", "before_if_present": "fuse-conv"})
    assert _names(_registry(_CORE + [conv, before]))[3:5] == ["zzz", "fuse-conv"]


def test_an_unphased_pass_joins_its_anchors_phase() -> None:
    registry = _registry(_CORE + [
        ("old", "late", {"after": "dce", "before": "verify-final"}),  # the older form: joins cleanup
        ("old", "early", {"after": "autodiff", "before": "dce"}),  # joins differentiate
        ("old", "pre", {"before": "autodiff"}),  # joins differentiate, before autodiff
        ("old", "chained", {"after": "late"}),  # joins late's phase: cleanup
        ("old", "free", {}),  # no phase, no anchor: the default phase
        ("new", "look", {"phase": "instrument"}),
    ])
    assert _names(registry) == ["verify", "pre", "autodiff", "early", "look", "free", "dce", "late", "chained",
                                "verify-final"]
    assert registry.phase_of("late") == "cleanup" and registry.phase_of("pre") == "differentiate"
    assert registry.phase_of("free") == DEFAULT_PHASE == "transform"
    assert {spec.name: spec.phase for spec in registry.ordered()}["chained"] == "cleanup"


def test_unknown_hard_anchor_names_the_pass_its_plugin_and_the_anchor() -> None:
    registry = _registry(_CORE + [("lost-plugin", "lost", {"phase": "fuse", "after": "nowhere"})])
    with pytest.raises(PluginError, match=r"pass 'lost' \(from plugin 'lost-plugin'\).*unknown pass 'nowhere'"):
        registry.ordered()


def test_a_cycle_names_its_passes_in_order() -> None:
    registry = _registry(_CORE + [
        ("p", "a", {"phase": "fuse", "after": "c"}),
        ("p", "b", {"phase": "fuse", "after": "a"}),
        ("q", "c", {"phase": "fuse", "after": "b"}),
        ("q", "d", {"phase": "fuse", "after": "c"}),  # waits on the cycle, is not part of it
    ])
    with pytest.raises(PluginError, match="cycle") as info:
        registry.ordered()
    message = str(info.value)
    assert "'d'" not in message
    assert "'a' ('p') -> 'b' ('p') -> 'c' ('q') -> 'a' ('p')" in message
    looped = _registry(_CORE + [("p", "self", {"phase": "fuse", "after_if_present": "self"})])
    with pytest.raises(PluginError, match=r"cycle: 'self' \('p'\) -> 'self'"):
        looped.ordered()


def test_an_anchor_against_the_phase_order_is_an_error_naming_both_passes() -> None:
    registry = _registry(_CORE + [("p", "fuse-x", {"phase": "fuse", "before": "dce"})])
    with pytest.raises(PluginError, match=r"'dce' \(phase 'cleanup'.*cannot run after 'fuse-x' \(phase 'fuse'"):
        registry.ordered()


def test_bad_registrations_are_named() -> None:
    registry = _registry(_CORE)
    registry.current_plugin = "mine"
    with pytest.raises(PluginError, match=r"pass 'x' \(from plugin 'mine'\): unknown phase 'fusing'; phases: verify"):
        registry.add("x", _noop, phase="fusing")
    with pytest.raises(PluginError, match="run must be callable"):
        registry.add("x", "not a function")  # type: ignore[arg-type]
    with pytest.raises(PluginError, match="non-empty string"):
        registry.add("", _noop)
    with pytest.raises(PluginError, match="pass 'dce' registered twice: by 'core' and by 'mine'"):
        registry.add("dce", _noop, phase="cleanup")


def test_a_pass_added_later_shows_in_the_next_ordering() -> None:
    registry = _registry(_CORE)
    before = _names(registry)
    registry.add("fetch", _noop, after="autodiff", before="dce")
    assert "fetch" not in before
    assert _names(registry) == ["verify", "autodiff", "fetch", "dce", "verify-final"]
    assert len(registry) == 5 and "fetch" in registry
    returned = registry.ordered()
    returned.clear()  # the caller's copy: the registry's pipeline is unchanged
    assert len(registry.ordered()) == 5
