"""Step accounting of the benchmark workloads on the emulated device, through the command
(``bench/step_accounting.py``): each training step replays as one CUDA graph with no live piece and no host
synchronization (dropout's masks drawn on the device, the learning rate computed there, the bad-label and index
counts read by one asynchronous copy a step), and gives the losses of the same step run unrecorded. LeNet and MLP
are quick (flowjob-gpu's tests pin them too); ResNet-50 and BERT take a minute or two on the emulation (slow)."""
from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest

BENCH = pathlib.Path(__file__).resolve().parent.parent / "bench"

# a step: one graph, no live node, no synchronization; the one copy is the device counts' asynchronous read
ONE_GRAPH = {"recorded": True, "uncaptured": None, "graphs": 1, "live_pieces": 0, "live_nodes": [], "pieces": 1,
             "host_syncs": 0.0, "host_device_copies": 1.0}


def _accounted(workloads: list[str], tmp_path: pathlib.Path, *flags: str) -> dict[str, dict]:
    out = tmp_path / f"accounting{''.join(flags)}.json"
    done = subprocess.run([sys.executable, str(BENCH / "step_accounting.py"), "--workloads", ",".join(workloads),
                           "--batch", "4", "--steps", "1", "--losses", "3", "--json", str(out), *flags],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    return {row["workload"]: row for row in json.loads(out.read_text())}


def _check(workloads: list[str], tmp_path: pathlib.Path, *, moving: bool) -> None:
    rows = _accounted(workloads, tmp_path)
    unrecorded = _accounted(workloads, tmp_path, "--graphs-off")
    for workload in workloads:
        row = rows[workload]
        assert {key: row[key] for key in ONE_GRAPH} == ONE_GRAPH, row
        assert not unrecorded[workload]["recorded"]
        # the same calls recorded and not: the same losses (the same device streams drew the same masks)
        np.testing.assert_allclose(row["losses"], unrecorded[workload]["losses"], rtol=1e-5)
        if moving:  # the training moves on at every replay (ResNet-50 at batch 1 has learnt its one image by then)
            assert len(set(row["losses"])) == 3, row["losses"]


def test_lenet_and_mlp_training_replay_as_one_graph_giving_the_unrecorded_losses(tmp_path):
    _check(["lenet_train", "mlp_train"], tmp_path, moving=True)


@pytest.mark.slow
def test_resnet50_and_bert_training_replay_as_one_graph_giving_the_unrecorded_losses(tmp_path):
    _check(["resnet50_train", "bert_train"], tmp_path, moving=False)
