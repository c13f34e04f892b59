"""The oneflow face: explicit re-exports, lazy optional names, the seed program and ``python -m oneflow info``."""
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import oneflow as flow
from flowjob_core import MissingPackageError
from oneflow import _lazy

SEED_TEST_WATCH = '''
import numpy as np
import oneflow as flow
import oneflow.typing as tp


def watch_handler(y: tp.Numpy):
    print("out:", y)


@flow.global_function()
def ReluJob(x: tp.Numpy.Placeholder((5,))) -> None:
    y = flow.nn.relu(x)
    flow.watch(y, watch_handler)


flow.config.gpu_device_num(1)
data = np.random.uniform(-1, 1, 5).astype(np.float32)
print("in:", data)
ReluJob(data)
'''


def _floats(line: str) -> np.ndarray:
    return np.array(line.split(":", 1)[1].strip(" []").split(), dtype=np.float32)


def test_seed_test_watch_prints_in_and_relu_out(tmp_path):
    script = tmp_path / "test_watch.py"
    script.write_text(SEED_TEST_WATCH)
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.replace("\n ", " ").splitlines()
    assert lines[0].startswith("in: [") and lines[1].startswith("out: [")
    np.testing.assert_allclose(_floats(lines[1]), np.maximum(_floats(lines[0]), 0))


def test_info_lists_plugins_backends_and_ops():
    run = subprocess.run([sys.executable, "-m", "oneflow", "info"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    out = run.stdout
    for expected in ("flowjob-core", "plugins:", "core-ops", "flowjob_add_ops", "backends:", "cpu", "numpy",
                     "ops: "):
        assert expected in out


def test_names_are_explicit_re_exports():
    from flowjob_core import global_function
    assert flow.global_function is global_function
    assert flow.float is np.dtype(np.float32) and flow.int32 is np.dtype(np.int32)
    assert "watch" in dir(flow)


def test_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'nonexistent'"):
        flow.nonexistent


def test_missing_distribution_is_named(monkeypatch):
    table = {"fancy": ("flowjob_not_a_real_package", None, "flowjob-fancy")}
    with pytest.raises(MissingPackageError, match="needs the flowjob-fancy distribution.*pip install flowjob-fancy"):
        _lazy.resolve(table, "fancy", "oneflow")


def test_face_has_no_session_at_import():
    code = "import oneflow, flowjob_core.session as s; print(s._default is None)"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert run.stdout.strip() == "True"
