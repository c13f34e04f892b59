"""examples/bert_pretraining.py writes its synthetic OFRecord files, trains a small BERT on them with its
losses falling, saves a checkpoint and starts again from it (with a dynamic loss scale), each run a
process of its own with reduced flags."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.examples

SCRIPT = Path(__file__).resolve().parents[1] / "examples" / "bert_pretraining.py"
LOSS = re.compile(r"^step (\d+): total_loss ([\d.]+), mlm_loss ([\d.]+), nsp_loss ([\d.]+)$", re.M)


def _run(args: list[str], cwd: Path) -> str:
    proc = subprocess.run([sys.executable, str(SCRIPT), *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, f"{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    return proc.stdout


def _losses(stdout: str) -> dict[int, tuple[float, float, float]]:
    return {int(m[0]): (float(m[1]), float(m[2]), float(m[3])) for m in LOSS.findall(stdout)}


def test_bert_pretraining_learns_the_synthetic_records_and_restarts_from_its_checkpoint(tmp_path: Path) -> None:
    out = _run(["--make_synthetic_data", "data", "--num_examples", "64", "--data_part_num", "2"], tmp_path)
    assert "wrote 64 synthetic records in 2 part(s)" in out
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == ["part-0", "part-1"]

    out = _run(["--data_dir", "data", "--data_part_num", "2", "--iter_num", "20", "--loss_print_every_n_iter", "1",
                "--model_save_dir", "model"], tmp_path)
    losses = _losses(out)
    assert sorted(losses) == list(range(20)), out
    first = sum(losses[s][0] for s in range(3)) / 3
    last = sum(losses[s][0] for s in range(17, 20)) / 3
    # masked-LM starts near ln(64) = 4.16 and the next-sentence loss near ln(2); the consecutive-id runs are
    # learnt fast, so the total falls well below its start within 20 steps
    assert 4.5 < first < 5.2 and last < first - 0.4, losses
    assert (tmp_path / "model").is_dir() and "saved the model to model" in out

    out = _run(["--data_dir", "data", "--data_part_num", "2", "--iter_num", "3", "--loss_print_every_n_iter", "1",
                "--model_load_dir", "model", "--loss_scale", "dynamic"], tmp_path)
    assert "restored the model from model" in out
    restored = _losses(out)
    assert sorted(restored) == [0, 1, 2]
    # the restored model starts where the first run ended, not from scratch
    assert sum(v[0] for v in restored.values()) / 3 < first - 0.3, (restored, first)
