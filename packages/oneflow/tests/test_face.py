"""The oneflow face: explicit re-exports, lazy optional names and ``python -m oneflow info``.

The seed programs themselves run in tests/test_examples_training.py."""
import subprocess
import sys

import numpy as np
import pytest

import oneflow as flow
from flowjob_core import MissingPackageError
from oneflow import _lazy

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
