"""The CUDA sources on any machine: found as package data, laid out and named by the rules of the README,
and (with nvcc) compiling to PTX whose entry points are exactly the ones each source declares. No GPU is
needed."""
from __future__ import annotations

import importlib.resources
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from flowjob_kernels import entry_points, families, source, source_dir

NVCC = shutil.which("nvcc")
ENTRY_NAME = re.compile(r"^[a-z][a-z0-9_]*_(f16|f32|f64|i8|i32|i64|u8)$")


def test_the_sources_are_package_data_of_flowjob_kernels():
    packaged = importlib.resources.files("flowjob_kernels") / "cuda"
    assert source_dir() / "cuda" == packaged
    assert families() and {f"{family}.cu" for family in families()} == {
        entry.name for entry in packaged.iterdir() if entry.name.endswith(".cu")}


@pytest.mark.parametrize("family", families())
def test_every_global_is_an_extern_c_entry_point_named_op_dtype(family):
    text = source(family)
    names = entry_points(text)
    assert names, f"{family}.cu declares no extern \"C\" __global__ entry point"
    assert len(names) == len(set(names)) == text.count("__global__"), (
        f"{family}.cu: every __global__ must be extern \"C\", each once; entry points {names}")
    misnamed = [name for name in names if not ENTRY_NAME.match(name)]
    assert not misnamed, f"{family}.cu: {misnamed} are not named <op>_<dtype> (f16, f32, f64, i8, i32, i64, u8)"


def test_entry_points_read_the_extern_c_globals_only():
    text = ('extern "C" __global__ void a_f32(float* x, long long n) {}\n'
            '__device__ float helper(float x) { return x; }\n'
            'extern  "C"  __global__  void b_f64 (double* x, long long n) {}\n')
    assert entry_points(text) == ["a_f32", "b_f64"]


def test_a_root_replaces_the_packaged_sources(tmp_path):
    (tmp_path / "cuda").mkdir()
    (tmp_path / "cuda" / "mine.cu").write_text('extern "C" __global__ void mine_f32() {}\n')
    assert families(tmp_path) == ["mine"]
    assert "mine_f32" in source("mine", tmp_path)
    assert families(tmp_path / "empty") == []


def test_a_missing_family_names_itself_and_the_path(tmp_path):
    looked_at = re.escape(str(tmp_path / "cuda" / "elementwise.cu"))
    with pytest.raises(FileNotFoundError, match=rf"'elementwise'.*{looked_at} does not exist"):
        source("elementwise", tmp_path)
    with pytest.raises(FileNotFoundError, match=r"'no_such_family'.*no_such_family\.cu does not exist"):
        source("no_such_family")


@pytest.mark.skipif(NVCC is None, reason="nvcc is not on PATH: the CUDA sources are not compiled to PTX")
@pytest.mark.parametrize("family", families())
def test_each_source_compiles_to_ptx_with_its_entry_points(family, tmp_path):
    cu = tmp_path / f"{family}.cu"
    cu.write_text(source(family))
    ptx = tmp_path / f"{family}.ptx"
    done = subprocess.run([NVCC, "--ptx", "-o", str(ptx), str(cu)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"nvcc --ptx {family}.cu failed:\n{done.stderr}"
    entries = set(re.findall(r"^\s*(?:\.visible\s+)?\.entry\s+(\w+)\s*\(", Path(ptx).read_text(), re.MULTILINE))
    declared = set(entry_points(source(family)))
    assert entries == declared, f"{family}.cu declares {sorted(declared)}, its PTX entries are {sorted(entries)}"
