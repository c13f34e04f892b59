"""The registries refuse what would silently replace or lose a plugin's registration: a second kernel override
of one (op, backend) pair, an override of an op no plugin registered, a second backend of one tag and a second
watch sink of one name are errors naming the plugins involved."""
from __future__ import annotations

import sys
import types

import numpy as np
import pytest

from flowjob_core import Backend, OpDef, PluginError, hookimpl, make_plugin_manager
from flowjob_core.plugins.host import gather_registries

BUILTINS = (("core-ops", "flowjob_core.plugins.builtin_ops"),)


def _plugin(name: str, **hooks) -> types.ModuleType:
    module = types.ModuleType(name)
    for hook_name, fn in hooks.items():
        setattr(module, hook_name, hookimpl(fn))
    sys.modules[name] = module
    return module


def _op(name: str) -> OpDef:
    return OpDef(name, lambda i, a: [i[0]], not_differentiable=True)


def _gather(*plugins: types.ModuleType):
    return gather_registries(make_plugin_manager(builtins=BUILTINS, plugins=plugins, autoload=False))


def _kernel(ctx):
    return lambda x: x


SQUARE = _op("fj_square")
OWNER = _plugin("fj_owner", flowjob_add_ops=lambda registry: registry.add(SQUARE))


def test_an_override_of_a_registered_op_is_kept_with_its_plugin():
    tuner = _plugin("fj_tuner", flowjob_add_kernels=lambda registry: registry.add(SQUARE, "cpu", _kernel))
    regs = _gather(tuner, OWNER)  # the overriding plugin registered first: ops are still added before kernels
    assert regs.kernels.lookup(SQUARE, "cpu") is _kernel
    assert regs.kernels.owner("fj_square", "cpu") == "fj_tuner"


def test_a_second_override_of_one_op_and_backend_names_both_plugins():
    first = _plugin("fj_first_tuner", flowjob_add_kernels=lambda registry: registry.add(SQUARE, "cpu", _kernel))
    second = _plugin("fj_second_tuner",
                     flowjob_add_kernels=lambda registry: registry.add("fj_square", "cpu", lambda ctx: None))
    with pytest.raises(PluginError, match=r"the kernel of op 'fj_square' \(plugin 'fj_owner'\) on backend 'cpu' is "
                                          r"overridden twice: by plugin 'fj_(first|second)_tuner' and by plugin "
                                          r"'fj_(first|second)_tuner'"):
        _gather(OWNER, first, second)


def test_an_override_of_another_backend_is_no_duplicate():
    both = _plugin("fj_both_tuner", flowjob_add_kernels=lambda registry: (
        registry.add(SQUARE, "cpu", _kernel), registry.add(SQUARE, "*", _kernel)))
    assert _gather(OWNER, both).kernels.overrides("*") == ["fj_square"]


def test_an_override_of_an_unknown_op_names_the_plugin_and_close_names():
    renamed = _plugin("fj_stale_tuner",
                      flowjob_add_kernels=lambda registry: registry.add("fj_squares", "cpu", _kernel))
    with pytest.raises(PluginError, match=r"plugin 'fj_stale_tuner' overrides the kernel of op 'fj_squares' on "
                                          r"backend 'cpu', but no plugin registered an op of that name "
                                          r"\(registered ops with close names: \['fj_square'\]\)"):
        _gather(OWNER, renamed)


def test_an_optional_override_waits_for_its_ops_plugin():
    optional = _plugin("fj_optional_tuner",
                       flowjob_add_kernels=lambda registry: registry.add(SQUARE, "gpu", _kernel, optional=True))
    assert _gather(optional).kernels.overrides("gpu") == []
    assert _gather(optional, OWNER).kernels.overrides("gpu") == ["fj_square"]


def test_removing_an_override_lets_another_plugin_add_one():
    regs = _gather(OWNER, _plugin("fj_removed_tuner",
                                  flowjob_add_kernels=lambda registry: registry.add(SQUARE, "cpu", _kernel)))
    regs.kernels.remove(SQUARE, "cpu")
    regs.kernels.add(SQUARE, "cpu", _kernel)
    assert regs.kernels.lookup(SQUARE, "cpu") is _kernel


def test_a_second_backend_of_one_tag_names_both_plugins():
    def backend_plugin(name: str) -> types.ModuleType:
        return _plugin(name, flowjob_add_backends=lambda registry: registry.add(
            Backend(tag="fj_dev", name=f"{name}'s device", xp=np)))
    with pytest.raises(PluginError, match=r"backend tag 'fj_dev' registered twice: \"fj_dev_[ab]'s device\" by plugin "
                                          r"'fj_dev_[ab]' and \"fj_dev_[ab]'s device\" by plugin 'fj_dev_[ab]'"):
        _gather(backend_plugin("fj_dev_a"), backend_plugin("fj_dev_b"))


def test_a_second_watch_sink_of_one_name_names_both_plugins():
    def sink_plugin(name: str) -> types.ModuleType:
        return _plugin(name, flowjob_add_watch_sinks=lambda registry: registry.add("fj_sink", lambda target: print))
    with pytest.raises(PluginError, match=r"watch sink 'fj_sink' registered twice: by plugin 'fj_sink_[ab]' and by "
                                          r"plugin 'fj_sink_[ab]'"):
        _gather(sink_plugin("fj_sink_a"), sink_plugin("fj_sink_b"))


def test_a_second_tensor_method_of_one_name_names_both_plugins():
    def method_plugin(name: str) -> types.ModuleType:
        return _plugin(name, flowjob_add_ops=lambda registry: registry.add_tensor_method("fj_double", lambda t: t))
    with pytest.raises(PluginError, match=r"tensor method 'fj_double' registered twice: by 'fj_method_[ab]' and by "
                                          r"'fj_method_[ab]'"):
        _gather(method_plugin("fj_method_a"), method_plugin("fj_method_b"))
    with pytest.raises(PluginError, match=r"tensor method name '_private' is not a public identifier"):
        _gather(_plugin("fj_private_method",
                        flowjob_add_ops=lambda registry: registry.add_tensor_method("_private", lambda t: t)))
