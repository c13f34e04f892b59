"""The installed plugins' passes form one pipeline, whatever order the plugins register in."""
from __future__ import annotations

import itertools
from types import ModuleType

import flowjob_ops.plugin
import flowjob_optim.plugin
import flowjob_swish.plugin
import flowjob_watch.plugin
import pytest

import flowjob_core.passes.pipeline
from flowjob_core import PluginError, hookimpl, make_plugin_manager
from flowjob_core.plugins.pass_order import PassRegistry
from flowjob_core.plugins.host import gather_registries

PLUGINS: dict[str, ModuleType] = {
    "core-passes": flowjob_core.passes.pipeline,
    "ops": flowjob_ops.plugin,
    "optim": flowjob_optim.plugin,
    "watch": flowjob_watch.plugin,
    "swish": flowjob_swish.plugin,
}

PIPELINE = ["verify", "auto-mixed-precision", "loss-scale", "quantization-aware-training", "autodiff", "watch",
            "optimizer", "ssp-variable-proxy", "repeat-acc", "dce", "fuse-conv", "optim-fusion", "fuse-dense",
            "verify-final"]


def _pipeline(names: tuple[str, ...]) -> list[str]:
    """The pass order when the named plugins' ``flowjob_add_passes`` run in this order."""
    registry = PassRegistry()
    for name in names:
        add_passes = getattr(PLUGINS[name], "flowjob_add_passes", None)  # swish registers ops only
        if add_passes is not None:
            registry.current_plugin = name
            add_passes(registry)
    return [spec.name for spec in registry.ordered()]


def test_every_registration_order_gives_the_same_pipeline() -> None:
    orders = {tuple(_pipeline(permutation)) for permutation in itertools.permutations(PLUGINS)}
    assert orders == {tuple(PIPELINE)}


@pytest.mark.parametrize("left_out", ["optim", "watch", "swish"])
def test_without_an_optional_plugin_the_others_keep_their_order(left_out: str) -> None:
    present = [name for name in PLUGINS if name != left_out]
    dropped = {"optim": ("loss-scale", "optimizer", "optim-fusion"), "watch": ("watch",)}.get(left_out, ())
    expected = [p for p in PIPELINE if p not in dropped]
    assert {tuple(_pipeline(permutation)) for permutation in itertools.permutations(present)} == {tuple(expected)}


def test_through_the_plugin_manager_in_every_registration_order() -> None:
    extras = [PLUGINS[name] for name in ("ops", "optim", "watch", "swish")]
    for permutation in itertools.permutations(extras):
        pm = make_plugin_manager(plugins=permutation, autoload=False)
        assert [spec.name for spec in gather_registries(pm).passes.ordered()] == PIPELINE


def test_entry_points_give_the_pipeline_and_record_each_plugins_passes() -> None:
    pm = make_plugin_manager(environ={"FLOWJOB_PLUGINS": "watch,swish,optim,ops"})
    specs = gather_registries(pm).passes.ordered()
    assert [spec.name for spec in specs] == PIPELINE
    owners = {spec.name: spec.plugin for spec in specs}
    assert owners["fuse-dense"] == "ops" and owners["optimizer"] == "optim" and owners["watch"] == "watch"
    assert owners["dce"] == "core-passes"


def test_a_third_party_pass_in_the_older_form_lands_between_its_anchors() -> None:
    class Legacy:
        @staticmethod
        @hookimpl
        def flowjob_add_passes(registry: PassRegistry) -> None:
            registry.add("legacy", lambda job, ctx: None, after="autodiff", before="dce")

    for order in ((Legacy, flowjob_watch.plugin, flowjob_optim.plugin),
                  (flowjob_optim.plugin, flowjob_watch.plugin, Legacy)):
        pm = make_plugin_manager(plugins=order, autoload=False)
        names = [spec.name for spec in gather_registries(pm).passes.ordered()]
        # it joins autodiff's phase (differentiate), right after it: before watch and the optimizer
        assert names[:6] == ["verify", "loss-scale", "autodiff", "legacy", "watch", "optimizer"]


def test_a_fusion_placed_before_dce_is_refused_naming_both_passes() -> None:
    class Wrong:
        @staticmethod
        @hookimpl
        def flowjob_add_passes(registry: PassRegistry) -> None:
            registry.add("too-early", lambda job, ctx: None, phase="fuse", before="optimizer")

    registries = gather_registries(make_plugin_manager(plugins=[Wrong, flowjob_optim.plugin], autoload=False))
    with pytest.raises(PluginError, match=r"'optimizer' \(phase 'update'.*after 'too-early' \(phase 'fuse'"):
        registries.passes.ordered()
