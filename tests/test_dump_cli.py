"""``python -m oneflow dump``: the jobs of the seed programs (examples/*.py), traced or after a pass, no step run.

Each run happens in an empty folder: a step, a checkpoint save or a data download would leave
something there (or print from the training loop).
"""
import re
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
TRAIN = EXAMPLES / "synchronize_single_job.py"  # train_job (LeNet), then check_point, mnist, a loop, save
PREDICT = EXAMPLES / "synchronize_batch_job.py"  # eval_job (LeNet), then check_point.load, mnist, a loop
NO_MAIN_GUARD = EXAMPLES / "test_watch.py"  # ReluJob with a watch, called at module level
HEADINGS = ("job ", "# ", "  ", "nodes:", "returns:", "losses:", "side outputs:", "intents:", "bindings:")


def dump(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "oneflow", "dump", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=300)
    assert list(cwd.iterdir()) == [], "dump must not write anything (no step, no checkpoint, no data)"
    return proc


def node_lines(out: str) -> list[str]:
    """The lines of the (first) job's nodes."""
    lines = out.splitlines()
    start = lines.index("nodes:") + 1
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("  ")), len(lines))
    return lines[start:end]


def call_of(line: str) -> str:
    """``op(inputs) {attrs}`` of a node line, without its outputs and effect mark."""
    return line.split(" <- ", 1)[-1].split(" = ", 1)[-1].removeprefix("  ").removeprefix("effect! ")


def test_predict_script_prints_its_traced_job_without_running_main(tmp_path):
    proc = dump(tmp_path, PREDICT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == "job eval_job (predict)"
    nodes = node_lines(proc.stdout)
    assert any(" = conv2d(" in line for line in nodes) and any(" = max_pool2d(" in line for line in nodes)
    assert call_of(nodes[-1]).startswith("return(")
    assert "accuracy" not in proc.stdout + proc.stderr
    assert all(line.startswith(HEADINGS) or not line for line in proc.stdout.splitlines())


def test_train_script_after_all_passes_shows_fused_and_optimizer_nodes(tmp_path):
    proc = dump(tmp_path, TRAIN, "--after", "all")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[:2] == ["# train_job after all passes", "job train_job (train)"]
    ops = [call_of(line).split("(")[0] for line in node_lines(proc.stdout)]
    assert "conv2d_bias" in ops and "matmul_bias" in ops  # fused
    assert "optim_sgd_update" in ops and "optim_train_step_increment" in ops  # the optimizer pass
    assert "bias_add" not in ops  # every bias_add was fused away


@pytest.mark.parametrize("after", [[], ["--after", "all"]])
def test_a_train_job_lists_each_value_once_marks_effects_and_shows_no_object_reprs(tmp_path, after):
    proc = dump(tmp_path, TRAIN, *after)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert not re.search(r"<\w[\w.]*[ >]| object at 0x|0x[0-9a-f]{6,}", out)  # no <SGD ...>, <function ...>
    lines = out.splitlines()
    variables = [line.split()[1][:-1] for line in lines if line.startswith("  variable ")]
    placeholders = [line.split()[1][:-1] for line in lines if line.startswith("  placeholder ")]
    assert "conv1-weight" in variables and len(placeholders) == 2
    calls = [call_of(line) for line in node_lines(out)]
    assert not [c for c in calls if c.startswith(("variable(", "input("))]  # listed once, in the header
    for name in variables + placeholders:
        assert sum(line.startswith((f"  variable {name}:", f"  placeholder {name}:")) for line in lines) == 1
    assert [line for line in node_lines(out) if call_of(line).startswith("return(")][0].startswith("  effect! ")
    assert "  minimize {optimizer='SGD#0'}" in lines
    assert "  SGD#0: SGD(lr_scheduler=PiecewiseConstantScheduler(base_lr=0.1, boundaries=[], values=[0.1]), " \
           "weight_decay=0.0, momentum=0.0)" in lines
    updates = [line for line in node_lines(out) if line.startswith("  update! ")]
    if after:  # every trainable variable written in place by its update, the step counter by its increment
        assert sorted(line.split()[1] for line in updates) == sorted(variables)
        assert any(line.startswith("  update! conv1-weight <- optim_sgd_update(conv1-weight/out, ") for line in updates)
        assert any(line.startswith("  PiecewiseConstantScheduler#1: ") for line in lines)
        assert any("optim_learning_rate(" in c and "{schedule='PiecewiseConstantScheduler#1'}" in c for c in calls)
    else:
        assert updates == []


def test_after_one_pass_stops_there(tmp_path):
    proc = dump(tmp_path, TRAIN, "--after", "autodiff", "--job", "train_job")
    assert proc.returncode == 0, proc.stderr
    ops = [call_of(line).split("(")[0] for line in node_lines(proc.stdout)]
    assert "conv2d_grad_filter" in ops and "bias_add" in ops  # gradients, not yet fused
    assert not any(op.startswith("optim_") for op in ops)


def test_a_script_calling_its_job_at_module_level_stops_at_the_call(tmp_path):
    proc = dump(tmp_path, NO_MAIN_GUARD, "--after", "watch")
    assert proc.returncode == 0, proc.stderr
    assert "job ReluJob (predict)" in proc.stdout
    assert any(call_of(line).startswith("fetch(") for line in node_lines(proc.stdout))
    assert "side outputs:" in proc.stdout
    assert "in:" in proc.stderr  # the script's own print, before its call, goes to stderr
    assert not any(line.startswith("out:") for line in (proc.stdout + proc.stderr).splitlines())  # no step ran


def test_run_main_runs_main_up_to_the_first_call(tmp_path):
    script = tmp_path.parent / f"{tmp_path.name}_jobs_in_main.py"
    script.write_text(
        "import os\n"
        "import oneflow as flow\n"
        "import oneflow.typing as tp\n\n"
        "def main():\n"
        "    @flow.global_function()\n"
        "    def double(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:\n"
        "        return flow.math.multiply(x, x, name='square')\n\n"
        "    for step in range(3):\n"
        "        print('step', step, double(None))\n"
        "    os.mkdir('ran')\n\n"
        "if __name__ == '__main__':\n"
        "    main()\n")
    plain = dump(tmp_path, script)
    assert plain.returncode == 2 and "--run-main" in plain.stderr
    proc = dump(tmp_path, script, "--run-main")
    assert proc.returncode == 0, proc.stderr
    assert "job double (predict)" in proc.stdout
    assert any(line.startswith("  square/out_0: (2, 3):float32 = multiply(") for line in node_lines(proc.stdout))
    assert "step" not in proc.stdout + proc.stderr


@pytest.mark.parametrize("args, expected", [
    (["--after", "nope"], "the passes, in order: verify"),
    (["--job", "nope"], "defines no job 'nope'; its jobs: train_job"),
])
def test_bad_requests_are_errors_that_list_the_choices(tmp_path, args, expected):
    proc = dump(tmp_path, TRAIN, *args)
    assert proc.returncode == 2 and proc.stdout == ""
    assert expected in proc.stderr
