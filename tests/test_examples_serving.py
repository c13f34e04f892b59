"""examples/saved_model_serving.py (a legacy v0.4 serving program, unchanged) runs as a script; the model it
saves then serves from a fresh process and gives what the script's predict job gives on the saved variables."""
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

pytestmark = pytest.mark.examples


def test_saved_model_serving(tmp_path: Path) -> None:
    folder = tmp_path / "models"
    proc = subprocess.run([sys.executable, str(EXAMPLES / "saved_model_serving.py"), str(folder)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-5000:]
    out = proc.stdout
    assert "accuracy: 100.0%" in out or "accuracy: 9" in out, out  # three well-separated clusters
    assert "saved: ['saved_model.pb', 'saved_model.prototxt', 'saved_model.sha256', 'variables']" in out
    assert "job: predict inputs: ('features',) outputs: ('probs',)" in out
    assert "input info: {'shape': (32, 4), 'dtype': dtype('float32')}" in out
    assert "served outputs match: True" in out and "batch 8 outputs match: True" in out

    # a fresh process: the saved folder is all it has
    program = textwrap.dedent(f"""
        import sys
        import numpy as np
        sys.path.insert(0, {str(EXAMPLES)!r})
        import oneflow as flow
        from saved_model_serving import make_data, predict
        features, _ = make_data(32, seed=1)
        sess = flow.serving.InferenceSession()
        sess.load_saved_model({str(folder)!r})
        sess.launch()
        (probs,) = sess.run("predict", features=features)
        sess.close()
        # the example's own predict job (the default session) on the saved variables, as legacy's tests compare
        flow.load_variables(flow.checkpoint.get({str(folder / "1" / "variables")!r}))
        np.savez({str(tmp_path / 'served.npz')!r}, served=probs, expected=predict(features))
    """)
    served = subprocess.run([sys.executable, "-c", program], cwd=tmp_path, capture_output=True, text=True,
                            timeout=600)
    assert served.returncode == 0, served.stderr[-5000:]
    result = np.load(tmp_path / "served.npz")
    assert result["served"].shape == (32, 3)
    np.testing.assert_allclose(result["served"], result["expected"], rtol=1e-6, atol=1e-7)
