"""The GPU device check's own logic (bench/device_check.py, bench/gpu.py), no device needed: steps under one
deadline, each step's limit trimmed to what is left, results written as each step ends; a benchmark row whose
step was not recorded as its system says is a failure. (tox's gpu-emulation env runs the whole check emulated.)"""
from __future__ import annotations

import importlib.util
import json
import pathlib
import sys
import time

BENCH = pathlib.Path(__file__).resolve().parent.parent / "bench"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_steps_run_in_order_under_one_deadline_and_results_are_written_as_each_ends(tmp_path, monkeypatch):
    check = _load("device_check")
    monkeypatch.setattr(check, "LEAST", 4.0)
    py = sys.executable
    plan = [check.Step("first", 30, [py, "-c", "print('fine')"]),
            check.Step("broken", 30, [py, "-c", "raise SystemExit('FAIL the smoke: no cuDNN')"]),
            check.Step("slow", 60, [py, "-c", "import time; time.sleep(30)"]),
            check.Step("late", 30, [py, "-c", "print('never')"])]
    written = []
    outcomes = check.run_steps(plan, time.monotonic() + 8.0, tmp_path,
                               lambda done: written.append([o.status for o in done]))
    assert [o.status for o in outcomes] == ["passed", "failed", "timed out", "not run"]
    assert outcomes[0].last_line == "fine" and (tmp_path / "first.log").exists()
    assert outcomes[1].failures == ["FAIL the smoke: no cuDNN"]
    assert outcomes[2].limit < 8.0  # trimmed to the deadline, not its own 60 s
    assert written == [["passed"], ["passed", "failed"], ["passed", "failed", "timed out"],
                       ["passed", "failed", "timed out", "not run"]]
    check.write_results(tmp_path, "device", 8.0, "no .whl/", outcomes)
    results = json.loads((tmp_path / "results.json").read_text())
    assert [s["status"] for s in results["steps"]] == ["passed", "failed", "timed out", "not run"]
    block = check.results_block(tmp_path, outcomes)
    assert "broken: FAIL the smoke: no cuDNN" in block and block.index("first") < block.index("late")


def test_a_benchmark_row_must_have_been_recorded_as_its_system_says():
    gpu = _load("gpu")
    recorded = {"median_ms": 1.0, "step": {"recorded": True, "uncaptured": None}}
    launched = {"median_ms": 1.0, "step": {"recorded": False, "uncaptured": "recording is off"}}
    assert gpu.recording_error("flowjob", recorded) is None
    assert gpu.recording_error(gpu.NO_GRAPHS, launched) is None
    assert "not recorded" in gpu.recording_error("flowjob", launched)
    assert "recorded although" in gpu.recording_error(gpu.NO_GRAPHS, recorded)
    assert "did not say" in gpu.recording_error("flowjob", {"median_ms": 1.0})
    assert gpu.recording_error("torch", {"median_ms": 1.0}) is None
    assert gpu.recording_error("flowjob", {"error": "exit 1"}) is None  # already a failure


def test_a_pytest_step_stopped_at_its_limit_still_names_the_failures_it_saw(tmp_path):
    check = _load("device_check")
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "test_some.py").write_text("import time\n\ndef test_a_broken_thing():\n    assert 1 == 2\n\n"
                                        "def test_z_slow():\n    time.sleep(60)\n")
    out = tmp_path / "out"
    out.mkdir()
    step = check.Step("suite", 60, [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p",
                                    "failure_log", "--rootdir", str(suite), str(suite / "test_some.py")],
                      {"PYTHONPATH": str(BENCH), "FAILURE_LOG": str(out / "suite-failures.log")})
    outcome = check.run_step(step, 10.0, out)  # the slow test is stopped by the limit
    assert outcome.status == "timed out"
    assert any("test_a_broken_thing" in f for f in outcome.failures), outcome.failures


def test_the_cudnn_frontend_wheel_is_prepared_and_installed_over_the_images(tmp_path, monkeypatch):
    check = _load("device_check")
    assert any(w.startswith("nvidia-cudnn-frontend") for w in check.EXTRA_WHEELS)
    wheels = tmp_path / ".whl"
    wheels.mkdir()
    for name in ("flowjob_gpu-0.1.0-py3-none-any.whl", "nvidia_cudnn_frontend-1.32.0-cp312-cp312-x.whl",
                 "six-1.17.0-py2.py3-none-any.whl", "tqdm-4.0-py3-none-any.whl"):
        (wheels / name).write_text("")
    monkeypatch.setattr(check, "WHEELS", wheels)
    monkeypatch.setattr(check, "_installed", lambda name: name != "tqdm")  # the image has all but tqdm
    ran = []
    monkeypatch.setattr(check.subprocess, "run", lambda cmd, **kw: ran.append(cmd) or
                        type("Done", (), {"returncode": 0, "stdout": "", "stderr": ""})())
    monkeypatch.setenv("PYTHONPATH", "")
    check.install(tmp_path / "install.log")
    installed = sorted(pathlib.Path(arg).name.split("-")[0] for arg in ran[0] if arg.endswith(".whl"))
    assert installed == ["flowjob_gpu", "nvidia_cudnn_frontend", "tqdm"]  # the image's six is kept


def test_the_benchmark_table_says_where_convolutions_ran():
    gpu = _load("gpu")
    on_cudnn = {"median_ms": 1.0, "convolutions": {"nodes": 5, "cudnn": 5, "im2col": 0, "why": None}}
    mixed = {"median_ms": 1.0, "convolutions": {"nodes": 5, "cudnn": 3, "im2col": 2, "why": "refused"}}
    none = {"median_ms": 1.0, "convolutions": {"nodes": 0, "cudnn": 0, "im2col": 0, "why": None}}
    assert gpu.conv_column([mixed, on_cudnn]).split() == ["5c/0i"]
    assert gpu.conv_column([on_cudnn, mixed]).split() == ["3c/2i"]
    assert gpu.conv_column([none]).split() == ["-"]
    assert gpu.conv_column([{"median_ms": 1.0}]).split() == ["?"]
