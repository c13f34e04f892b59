"""The CUDA sources on any machine: found as package data, overridable, and (with nvcc) compiling
to PTX whose entry points are the symbols ``OVERRIDES`` asks for. No GPU is needed."""
from __future__ import annotations

import importlib.resources
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from flowjob_core import switches
from flowjob_gpu import kernel_dir, kernel_families, kernel_source
from flowjob_gpu.overrides import OVERRIDES

NVCC = shutil.which("nvcc")


def _requested_symbols() -> dict[str, set[str]]:
    """family -> the symbols the overrides look up in it."""
    wanted: dict[str, set[str]] = {}
    for family, symbols in OVERRIDES.values():
        wanted.setdefault(family, set()).update(symbols.values())
    return wanted


def test_sources_are_package_data_of_flowjob_gpu(monkeypatch):
    monkeypatch.delenv("FLOWJOB_KERNEL_DIR", raising=False)
    packaged = importlib.resources.files("flowjob_gpu") / "kernels" / "cuda"
    assert kernel_dir() / "cuda" == packaged
    assert {f"{family}.cu" for family in kernel_families()} == {
        entry.name for entry in packaged.iterdir() if entry.name.endswith(".cu")}
    assert set(_requested_symbols()) <= set(kernel_families())


def test_every_override_names_a_symbol_in_the_sources(monkeypatch):
    monkeypatch.delenv("FLOWJOB_KERNEL_DIR", raising=False)
    for family, symbols in _requested_symbols().items():
        source = kernel_source(family)
        for symbol in symbols:
            assert re.search(rf'extern "C" __global__ void {symbol}\(', source), (family, symbol)


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
    assert kernel_dir() == importlib.resources.files("flowjob_gpu") / "kernels"
    monkeypatch.setattr(switches, "current", lambda: switches.Settings(kernel_dir=str(tmp_path)))
    assert kernel_dir() == tmp_path


@pytest.mark.skipif(NVCC is None, reason="nvcc is not on PATH: the CUDA sources are not compiled to PTX")
@pytest.mark.parametrize("family", sorted(_requested_symbols()))
def test_each_source_compiles_to_ptx_with_the_requested_entries(family, monkeypatch, tmp_path):
    monkeypatch.delenv("FLOWJOB_KERNEL_DIR", raising=False)
    source = tmp_path / f"{family}.cu"
    source.write_text(kernel_source(family))
    ptx = tmp_path / f"{family}.ptx"
    done = subprocess.run([NVCC, "--ptx", "-o", str(ptx), str(source)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, f"nvcc --ptx {family}.cu failed:\n{done.stderr}"
    entries = set(re.findall(r"^\s*(?:\.visible\s+)?\.entry\s+(\w+)\s*\(", Path(ptx).read_text(), re.MULTILINE))
    missing = _requested_symbols()[family] - entries
    assert not missing, f"{family}.cu: OVERRIDES asks for {sorted(missing)}, PTX entries are {sorted(entries)}"
