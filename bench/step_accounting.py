"""Step accounting on the emulated device: how the gpu backend runs each benchmark workload's training step.

    python bench/step_accounting.py [--workloads lenet_train,mlp_train,resnet50_train,bert_train] [--batch 8]

Per workload: whether its step is recorded as CUDA graphs, the graphs and live pieces a step replays and runs,
the host synchronizations and host-device copies a step makes (counted by the emulated CuPy) and the nodes that
run live. The aim is one graph, no live piece and no synchronization a training step. Runs on any CPU
(``FLOWJOB_GPU_EMULATION=1``: CuPy's names, numpy behind them); the figures are the step's structure, not times.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).parent))

WORKLOADS = ["lenet_train", "mlp_train", "resnet50_train", "bert_train"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default=",".join(WORKLOADS), help="comma list of " + ", ".join(WORKLOADS))
    parser.add_argument("--batch", type=int, default=8, help="LeNet's and MLP's batch; ResNet-50's is 1 then")
    parser.add_argument("--steps", type=int, default=2, help="calls counted after the warm-up and the recording")
    parser.add_argument("--json", type=pathlib.Path, default=None, help="also write the figures here")
    parser.add_argument("--losses", type=int, default=0,
                        help="then this many calls more, their mean losses in the JSON (a recorded step's against "
                             "an unrecorded one's: FLOWJOB_CUDA_GRAPHS=0 --graphs-off)")
    parser.add_argument("--graphs-off", action="store_true", help="run with FLOWJOB_CUDA_GRAPHS=0 (nothing recorded)")
    args = parser.parse_args()
    os.environ.update(FLOWJOB_GPU_EMULATION="1", FLOWJOB_DEVICE="gpu")
    os.environ.pop("FLOWJOB_CUDA_GRAPHS", None)
    if args.graphs_off:
        os.environ["FLOWJOB_CUDA_GRAPHS"] = "0"
    labels = args.workloads.split(",")
    unknown = sorted(set(labels) - set(WORKLOADS))
    if unknown:
        raise SystemExit(f"--workloads: unknown {unknown}; known: {', '.join(WORKLOADS)}")
    import models_flowjob
    from flowjob_core.runtime.session import get_default_session
    from flowjob_gpu.step_accounting import account

    rows = []
    print(f"{'workload':16s} {'recorded':>8s} {'graphs':>6s} {'live':>4s} {'syncs':>5s} {'copies':>6s}  live nodes")
    for label in labels:
        first_call, step = models_flowjob.build(label, args.batch, big_batch=1 if label == "resnet50_train" else None)
        first_call()  # traces, plans and warms up: account's first call is then the recording
        (function,) = get_default_session().functions.values()
        facts = account(function, step, steps=args.steps, warm=1)
        losses = [float(np.mean(step())) for _ in range(args.losses)]
        rows.append({"workload": label, **facts.as_dict(), "losses": losses})
        print(f"{label:16s} {'yes' if facts.recorded else 'no':>8s} {facts.graphs:6d} {facts.live_pieces:4d} "
              f"{facts.host_syncs:5g} {facts.host_device_copies:6g}  {', '.join(facts.live_nodes) or '-'}",
              flush=True)
        if not facts.recorded:
            print(f"{'':16s} not recorded: {facts.uncaptured}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
