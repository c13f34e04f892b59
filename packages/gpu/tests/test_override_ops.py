"""The gpu overrides name the ops of flowjob-ops and flowjob-optim by the names those packages export: every
override is of a registered op (checked here on any machine, since the plugin registers them only on a device),
flowjob-optim's updates are skipped where its plugin is not loaded, and flowjob-ops' are refused without it."""
from __future__ import annotations

import types

import numpy as np
import pytest

from flowjob_core import PluginError, make_plugin_manager
from flowjob_core.plugins.host import gather_registries
from flowjob_gpu import plugin, optimizer_kernels
from flowjob_gpu.overrides import ARRAY_KERNEL_BUILDERS, KERNEL_BUILDERS, LIBRARY_KERNEL_BUILDERS, OVERRIDES
from flowjob_ops import plugin as ops_plugin
from flowjob_optim import plugin as optim_plugin


@pytest.fixture
def device(monkeypatch):
    fake = types.SimpleNamespace(__version__="0", asnumpy=np.asarray, asarray=np.asarray,
                                 cuda=types.SimpleNamespace(runtime=types.SimpleNamespace(getDeviceCount=lambda: 1)))
    monkeypatch.setattr(plugin, "available_cupy", lambda: fake)
    monkeypatch.setenv("FLOWJOB_GPU_EMULATION", "0")  # the CUDA overrides are a real device's


def test_every_override_is_of_a_registered_op():
    regs = gather_registries(make_plugin_manager(plugins=[ops_plugin, optim_plugin], autoload=False))
    unknown = sorted((set(KERNEL_BUILDERS) | set(OVERRIDES) | set(LIBRARY_KERNEL_BUILDERS))
                     - {op.name for op in regs.ops})
    assert not unknown, f"gpu overrides of ops no plugin registers (renamed?): {unknown}"


def test_the_updates_are_overridden_where_flowjob_optim_is_loaded(device):
    regs = gather_registries(make_plugin_manager(plugins=[ops_plugin, optim_plugin, plugin], autoload=False))
    everything = set(KERNEL_BUILDERS) | set(ARRAY_KERNEL_BUILDERS) | set(LIBRARY_KERNEL_BUILDERS)
    assert set(regs.kernels.overrides("gpu")) == everything
    assert {regs.kernels.owner(op, "gpu") for op in everything} == {"flowjob_gpu.plugin"}
    without = gather_registries(make_plugin_manager(plugins=[ops_plugin, plugin], autoload=False))
    assert set(without.kernels.overrides("gpu")) == everything - set(optimizer_kernels.KERNEL_BUILDERS)


def test_without_flowjob_ops_the_overrides_are_refused_naming_the_plugin(device):
    with pytest.raises(PluginError, match=r"plugin 'flowjob_gpu.plugin' overrides the kernel of op '\w+' on "
                                          r"backend 'gpu', but no plugin registered"):
        gather_registries(make_plugin_manager(plugins=[plugin], autoload=False))
