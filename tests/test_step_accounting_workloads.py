"""Step accounting of the benchmark workloads on the emulated device, through the command
(``bench/step_accounting.py``): each training step is recorded as CUDA graphs, with today's graphs, live pieces
and host traffic pinned (the aim, one graph and no live piece a step, lowers them). LeNet and MLP are quick
(flowjob-gpu's tests pin them too); ResNet-50 and BERT take a minute on the emulation (slow)."""
from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

BENCH = pathlib.Path(__file__).resolve().parent.parent / "bench"

# workload -> (graphs, live nodes' ops in step order, host syncs, host-device copies) a step, today
TODAY = {
    "lenet_train": (4, ["dropout", "sparse_softmax_cross_entropy", "optim_learning_rate"], 2, 3),
    "mlp_train": (3, ["sparse_softmax_cross_entropy", "optim_learning_rate"], 2, 2),
    # the gathers check their indices on the host; two cross entropies (masked LM, next sentence)
    "bert_train": (6, ["gather", "gather", "sparse_softmax_cross_entropy", "sparse_softmax_cross_entropy",
                       "optim_learning_rate"], 5, 5),
    "resnet50_train": (3, ["sparse_softmax_cross_entropy", "optim_learning_rate"], 2, 2),
}


def _accounted(workloads: list[str], tmp_path: pathlib.Path) -> dict[str, dict]:
    out = tmp_path / "accounting.json"
    done = subprocess.run([sys.executable, str(BENCH / "step_accounting.py"), "--workloads", ",".join(workloads),
                           "--batch", "4", "--steps", "1", "--json", str(out)], capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    return {row["workload"]: row for row in json.loads(out.read_text())}


def _check(row: dict, workload: str) -> None:
    graphs, live_ops, syncs, copies = TODAY[workload]
    assert row["recorded"] and row["uncaptured"] is None, row
    assert row["graphs"] == graphs and row["live_pieces"] == len(live_ops), row
    assert [node.rsplit("(", 1)[1].rstrip(")") for node in row["live_nodes"]] == live_ops
    assert (row["host_syncs"], row["host_device_copies"]) == (syncs, copies)
    assert row["pieces"] == graphs + len(live_ops)


def test_the_command_accounts_lenet_and_mlp_training(tmp_path):
    rows = _accounted(["lenet_train", "mlp_train"], tmp_path)
    for workload in ("lenet_train", "mlp_train"):
        _check(rows[workload], workload)


@pytest.mark.slow
def test_the_command_accounts_resnet50_and_bert_training(tmp_path):
    rows = _accounted(["resnet50_train", "bert_train"], tmp_path)
    for workload in ("resnet50_train", "bert_train"):
        _check(rows[workload], workload)
