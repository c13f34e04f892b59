"""flow.saved_model and flow.serving re-export flowjob-serving; without it they name the distribution."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import flowjob_serving

import oneflow as flow


def test_the_face_re_exports_flowjob_serving():
    assert flow.saved_model.ModelBuilder is flowjob_serving.ModelBuilder
    assert flow.serving.InferenceSession is flowjob_serving.InferenceSession
    assert sorted(flow.saved_model.__all__) == ["GraphBuilder", "ModelBuilder", "SignatureBuilder"]
    assert sorted(flow.serving.__all__) == ["InferenceSession", "ModelVersionPolicy", "SessionOption"]


def test_without_flowjob_serving_the_face_names_it():
    program = textwrap.dedent("""
        import sys
        sys.modules["flowjob_serving"] = None  # as if the distribution were not installed
        import oneflow as flow
        from flowjob_core import MissingPackageError
        for name in ("saved_model", "serving"):
            try:
                getattr(flow, name)
            except MissingPackageError as exc:
                print(name, exc)
            else:
                print(name, "imported")
    """)
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 2, done.stdout
    for line, name in zip(lines, ("saved_model", "serving")):
        assert line.startswith(f"{name} flow.{name} needs the flowjob-serving distribution"), line
        assert "pip install flowjob-serving" in line, line
