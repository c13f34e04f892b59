"""flowjob-serving installs with only what it declares (the face and what the face needs, nothing of optim,
watch or data), passes ``pip check``, and saves and serves a model there; ``info`` lists it."""
from __future__ import annotations

import textwrap
from pathlib import Path

from flowjob_core.testing.modules import sibling

FreshVenv = sibling(__file__, "fresh_venv").FreshVenv

ROOT = Path(__file__).resolve().parents[1]
DECLARED = [ROOT / "packages" / name for name in ("core", "ops", "typing", "oneflow", "serving")]

PROGRAM = textwrap.dedent("""
    import numpy as np
    import oneflow as flow
    import oneflow.typing as tp

    @flow.global_function(type="predict")
    def double(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
        w = flow.get_variable("w", (3,), initializer=flow.constant_initializer(2.0))
        return x * w

    builder = flow.saved_model.ModelBuilder("models").ModelName("double").Version(1)
    builder.AddFunction(double).Finish()
    builder.Save()
    sess = flow.serving.InferenceSession()
    sess.load_saved_model("models")
    sess.launch()
    (name,) = sess.list_inputs()
    print("served", sess.run("double", **{name: np.ones((2, 3), np.float32)})[0].tolist())
    sess.close()
""")


def test_flowjob_serving_installs_and_serves_with_what_it_declares(tmp_path: Path) -> None:
    env = FreshVenv(tmp_path / "venv")
    env.pip_install(*DECLARED)  # pip check: every requirement of flowjob-serving is among these
    assert env.flowjob_distributions(tmp_path) == {
        "flowjob": "0.1.0", "flowjob-core": "0.1.0", "flowjob-ops": "0.1.0", "flowjob-typing": "0.1.0",
        "flowjob-serving": "0.1.0"}
    (tmp_path / "program.py").write_text(PROGRAM)
    done = env.run("program.py", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "served [[2.0, 2.0, 2.0], [2.0, 2.0, 2.0]]" in done.stdout
