"""``python -m oneflow dump --cuda``: each job as planned, then the CUDA the gpu backend generates for each
of its elementwise chains, or why a chain keeps the xp kernel; on a machine without a GPU."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from flowjob_core import MissingPackageError
from oneflow import _dump as dump_module

SCRIPT = textwrap.dedent("""
    import oneflow as flow
    import oneflow.typing as tp


    @flow.global_function()
    def scaled(x: tp.Numpy.Placeholder((4, 5)), b: tp.Numpy.Placeholder((5,))) -> tp.Numpy:
        return flow.math.tanh(flow.nn.relu(x * 2.0 + b))


    @flow.global_function()
    def counts(n: tp.Numpy.Placeholder((3,), dtype=flow.int32)) -> tp.Numpy:
        return n * 2 + 1


    @flow.global_function()
    def single(x: tp.Numpy.Placeholder((3,))) -> tp.Numpy:
        return flow.math.exp(x)
""")


def _run_dump(tmp_path, *args: str) -> subprocess.CompletedProcess:
    (tmp_path / "jobs.py").write_text(SCRIPT)
    return subprocess.run([sys.executable, "-m", "oneflow", "dump", "jobs.py", *args], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)


def test_cuda_prints_each_chains_source_after_all_passes(tmp_path):
    proc = _run_dump(tmp_path, "--cuda")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.startswith("# scaled after all passes\njob scaled (predict)\n")
    scaled = out.split("# counts after all passes")[0]
    start = scaled.index("# cuda: elementwise_chain 'Tanh_")
    lines = scaled[start:].rstrip().splitlines()
    assert lines[1].startswith("// cupy.ElementwiseKernel flowjob_chain_")
    assert lines[2:] == ["// in:  float32 x0, float32 x1, float32 c0, float32 c2",
                         "// out: float32 out",
                         "// multiply(x0, c0) -> add(v, x1) -> maximum(v, c2) -> tanh(v)",
                         "float v = __fmul_rn(x0, c0);",
                         "v = __fadd_rn(v, x1);",
                         "v = (isnan(v) || v > c2) ? v : c2;",
                         "v = tanhf(v);",
                         "out = v;"]
    assert "# cuda: elementwise_chain 'ScalarAdd_" in out and "keeps the xp kernel: step 0 (scalar_mul, ufunc " \
                                                             "multiply): int32 operands" in out
    assert "# cuda: no elementwise_chain nodes in job 'single'" in out


def test_cuda_before_the_fusion_pass_finds_no_chains(tmp_path):
    proc = _run_dump(tmp_path, "--cuda", "--after", "autodiff", "--job", "scaled")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == "# scaled after pass 'autodiff'"
    assert proc.stdout.rstrip().endswith("# cuda: no elementwise_chain nodes in job 'scaled'")


def test_cuda_without_flowjob_gpu_says_what_to_install(monkeypatch, tmp_path):
    def missing(module, distribution, what):
        raise MissingPackageError(f"{what} needs the {distribution} distribution, which is not installed")

    monkeypatch.setattr(dump_module, "require", missing)
    with pytest.raises(dump_module.DumpError, match=r"^python -m oneflow dump --cuda needs the flowjob-gpu dist"):
        dump_module.dump(str(tmp_path / "jobs.py"), cuda=True)
