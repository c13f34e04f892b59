"""The CUDA sources flowjob-gpu compiles, on any machine: flowjob-kernels' by default, FLOWJOB_KERNEL_DIR's
when set, and every symbol ``OVERRIDES`` asks for an entry point of its source (flowjob-kernels' own tests
check, with nvcc, that the entry points are those of the compiled PTX). No GPU is needed."""
from __future__ import annotations

import pytest

import flowjob_kernels
from flowjob_core import switches
from flowjob_gpu import kernel_dir, kernel_families, kernel_source
from flowjob_gpu.overrides import FAMILIES, OVERRIDES


def _requested_symbols() -> dict[str, set[str]]:
    """family -> the symbols the overrides look up in it."""
    wanted: dict[str, set[str]] = {}
    for family, symbols in OVERRIDES.values():
        wanted.setdefault(family, set()).update(symbols.values())
    return wanted


def test_the_sources_are_flowjob_kernels_by_default(monkeypatch):
    monkeypatch.delenv("FLOWJOB_KERNEL_DIR", raising=False)
    assert kernel_dir() == flowjob_kernels.source_dir()
    assert kernel_families() == flowjob_kernels.families()
    assert set(_requested_symbols()) <= set(kernel_families())


@pytest.mark.parametrize("family", sorted(_requested_symbols()))
def test_every_override_names_an_entry_point_of_its_source(family, monkeypatch):
    monkeypatch.delenv("FLOWJOB_KERNEL_DIR", raising=False)
    missing = _requested_symbols()[family] - set(flowjob_kernels.entry_points(kernel_source(family)))
    assert not missing, f"{family}.cu: OVERRIDES asks for {sorted(missing)}, which it does not define"


def test_kernel_dir_switch_replaces_the_packaged_sources(monkeypatch, tmp_path):
    (tmp_path / "cuda").mkdir()
    (tmp_path / "cuda" / "mine.cu").write_text('extern "C" __global__ void mine_f32() {}\n')
    monkeypatch.setenv("FLOWJOB_KERNEL_DIR", str(tmp_path))
    assert kernel_dir() == tmp_path
    assert kernel_families() == ["mine"]
    assert "mine_f32" in kernel_source("mine")


def test_a_missing_family_names_itself_and_the_switch(monkeypatch, tmp_path):
    monkeypatch.setenv("FLOWJOB_KERNEL_DIR", str(tmp_path))
    with pytest.raises(FileNotFoundError, match=r"'elementwise'.*FLOWJOB_KERNEL_DIR"):
        kernel_source("elementwise")
    monkeypatch.delenv("FLOWJOB_KERNEL_DIR")
    with pytest.raises(FileNotFoundError, match=r"'no_such_family'.*packaged kernels"):
        kernel_source("no_such_family")


def test_kernel_dir_is_read_through_the_switches(monkeypatch, tmp_path):
    monkeypatch.setenv("FLOWJOB_KERNEL_DIR", "")  # empty means unset, as for every FLOWJOB_* string switch
    assert kernel_dir() == flowjob_kernels.source_dir()
    monkeypatch.setattr(switches, "current", lambda: switches.Switches(kernel_dir=str(tmp_path)))
    assert kernel_dir() == tmp_path


def test_each_family_is_a_module_named_after_its_source(monkeypatch):
    """``cuda/<family>.cu`` has its builders in ``flowjob_gpu/<family>_kernels.py``, whose entries the overrides
    list; each module's overrides name its own family only."""
    monkeypatch.delenv("FLOWJOB_KERNEL_DIR", raising=False)
    modules = {module.__name__.rsplit(".", 1)[1]: module for module in FAMILIES}
    assert sorted(modules) == sorted(f"{family}_kernels" for family in kernel_families())
    for family in kernel_families():
        module = modules[f"{family}_kernels"]
        assert module.FAMILY == family
        assert {entry[0] for entry in module.OVERRIDES.values()} == {family}
        assert set(module.OVERRIDES) == set(module.KERNEL_BUILDERS)
