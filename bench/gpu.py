"""flowjob on CuPy against PyTorch CUDA eager, side by side on one GPU: ``python bench/gpu.py [--rounds 1]``.

Each (system, workload) runs in its own process (``worker.py --device gpu``); rounds interleave the
systems. Prints, per workload, the median step time of each system, the ratio flowjob / torch (below
1: flowjob is faster) and each one's peak device memory (every pool: flowjob's graph pools too). Beside each
flowjob time, how its step ran: recorded as CUDA graphs or not, graphs + live pieces a step, host
synchronizations and host-device copies a step (counted on the emulated device only: ``-`` on a device), where its
convolutions ran (``conv``: cuDNN and im2col node counts, ``-`` for none; flowjob_gpu.cudnn_convolution), and
below the table the live nodes and why convolutions ran on im2col. A ``flowjob`` run whose step was not recorded,
or a ``flowjob-nographs`` run whose step was, is a failure: the two rows are never silently the same run. A run
that fails is reported with the end of its error output and the table goes on; the exit status is 1 if any failed.
``--emulated`` runs flowjob on the emulated CuPy (``FLOWJOB_GPU_EMULATION=1``) to try the script anywhere; its
times mean nothing.
Only figures from a real device belong in bench/README.md.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys

HERE = pathlib.Path(__file__).parent
# label -> (the worker's workload, its extra arguments)
WORKLOADS = {
    "mlp_train": ("mlp_train", []),
    "mlp_infer": ("mlp_infer", []),
    "lenet_train": ("lenet_train", []),
    "lenet_infer": ("lenet_infer", []),
    "resnet50_train_b32": ("resnet50_train", ["--big-batch", "32", "--steps", "10"]),
    "resnet50_train_b64": ("resnet50_train", ["--big-batch", "64", "--steps", "10"]),
    "bert_train": ("bert_train", ["--steps", "20"]),
}


# a system name beyond the worker's own: flowjob with every kernel launched each step (no CUDA graphs)
NO_GRAPHS = "flowjob-nographs"


def run(system: str, label: str, timeout: float, batch: int | None = None, steps: int | None = None) -> dict:
    workload, extra = WORKLOADS[label]
    env = os.environ.copy()
    if system == NO_GRAPHS:
        system, env["FLOWJOB_CUDA_GRAPHS"] = "flowjob", "0"
    elif system == "flowjob":
        env.pop("FLOWJOB_CUDA_GRAPHS", None)
    cmd = [sys.executable, str(HERE / "worker.py"), system, workload, "--device", "gpu", *extra]
    if batch is not None:
        cmd += ["--batch", str(batch)] + (["--big-batch", str(batch)] if "--big-batch" in extra else [])
    if steps is not None:
        cmd += ["--steps", str(steps), "--warmup", "1"]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"error": f"over {timeout:.0f} s"}
    if out.returncode != 0:
        tail = " | ".join(out.stderr.strip().splitlines()[-3:])
        return {"error": f"exit {out.returncode}: {tail}"}
    return json.loads(out.stdout.strip().splitlines()[-1])


def recording_error(system: str, got: dict) -> str | None:
    """Why a flowjob run does not measure what its row says: ``flowjob`` must have replayed a recorded step,
    ``flowjob-nographs`` must have launched every kernel."""
    if system not in ("flowjob", NO_GRAPHS) or "error" in got:
        return None
    step = got.get("step")
    if step is None:
        return "the worker did not say how the step ran"
    if system == "flowjob" and not step["recorded"]:
        return f"the step was not recorded as CUDA graphs: {step['uncaptured']}"
    if system == NO_GRAPHS and step["recorded"]:
        return "the step was recorded although FLOWJOB_CUDA_GRAPHS=0"
    return None


def _count(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def step_column(got: list[dict]) -> str:
    """rec/nograph, graphs+live, syncs, copies of a system's last successful run."""
    runs = [x["step"] for x in got if "step" in x]
    if not runs:
        return ""
    step = runs[-1]
    shape = f"{step['graphs']}+{step['live_pieces']}" if step["recorded"] else "launch"
    return f" {shape:>7s} {_count(step['host_syncs']):>5s} {_count(step['host_device_copies']):>6s}"


def conv_column(got: list[dict]) -> str:
    """Convolution nodes on cuDNN / on im2col of a system's last successful run ("-": none, "?": not said)."""
    runs = [x["convolutions"] for x in got if "convolutions" in x and "error" not in x]
    if not runs:
        return f" {'?':>9s}"
    conv = runs[-1]
    return f" {'-' if not conv['nodes'] else str(conv['cudnn']) + 'c/' + str(conv['im2col']) + 'i':>9s}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workloads", default=",".join(WORKLOADS), help="comma list of " + ", ".join(WORKLOADS))
    parser.add_argument("--systems", default="flowjob,torch", help=f"comma list of flowjob, {NO_GRAPHS}, torch")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per worker process")
    parser.add_argument("--batch", type=int, default=None, help="every workload's batch (default: the worker's)")
    parser.add_argument("--steps", type=int, default=None, help="timed steps a run (default: the workload's)")
    parser.add_argument("--emulated", action="store_true", help="flowjob on the emulated CuPy (no device)")
    parser.add_argument("--json", type=pathlib.Path, default=None, help="also write every run here")
    args = parser.parse_args()
    if args.emulated:
        os.environ["FLOWJOB_GPU_EMULATION"] = "1"
    systems = args.systems.split(",")
    labels = args.workloads.split(",")
    unknown = sorted(set(labels) - set(WORKLOADS))
    if unknown:
        raise SystemExit(f"--workloads: unknown {unknown}; known: {', '.join(WORKLOADS)}")
    results: dict[tuple[str, str], list[dict]] = {}
    for r in range(args.rounds):
        for label in labels:
            for system in (systems if r % 2 == 0 else systems[::-1]):
                got = run(system, label, args.timeout, args.batch, args.steps)
                wrong = recording_error(system, got)
                if wrong is not None:
                    got["error"] = wrong
                results.setdefault((system, label), []).append(got)
                shown = got.get("error") or f"{got['median_ms']:9.2f} ms"
                print(f"round {r + 1}: {system:16s} {label:20s} {shown}", file=sys.stderr, flush=True)
                if args.json:  # after every run: a check stopped at its limit keeps what ran
                    args.json.write_text(json.dumps([{"system": s, "workload": w, "runs": runs}
                                                     for (s, w), runs in results.items()], indent=1))

    def med(system: str, label: str, key: str) -> float | None:
        values = [x[key] for x in results[(system, label)] if key in x and "error" not in x]
        return statistics.median(values) if values else None

    flowjobs = [s for s in systems if s in ("flowjob", NO_GRAPHS)]
    print(f"\nmedians of {args.rounds} rounds (each a median over its steps), float32, ms/step; peak device memory "
          f"over every pool in MiB; for flowjob: graphs+live pieces a step (launch: not recorded), host syncs and "
          f"host-device copies a step (- : not counted on a device) and convolution nodes on cuDNN (c) and on "
          f"im2col + cuBLAS (i)")
    print(f"{'workload':20s}" + "".join(f" {s + ' ms':>12s} {s + ' MiB':>12s}"
                                        + (f" {'graphs':>7s} {'syncs':>5s} {'copies':>6s} {'conv':>9s}"
                                           if s in flowjobs else "")
                                        for s in systems)
          + ("  flowjob/torch" if {"flowjob", "torch"} <= set(systems) else ""))
    for label in labels:
        row = f"{label:20s}"
        for system in systems:
            ms, mb = med(system, label, "median_ms"), med(system, label, "peak_device_mb")
            row += f" {ms:12.2f} {mb:12.0f}" if ms is not None else f" {'failed':>12s} {'':>12s}"
            if system in flowjobs:
                row += step_column(results[(system, label)]) or f" {'':>7s} {'':>5s} {'':>6s}"
                row += conv_column(results[(system, label)])
        if {"flowjob", "torch"} <= set(systems):
            a, b = med("flowjob", label, "median_ms"), med("torch", label, "median_ms")
            row += f"  {a / b:13.2f}x" if a is not None and b is not None else ""
        print(row)
    for (system, label), runs in results.items():
        steps = [x["step"] for x in runs if "step" in x and "error" not in x]
        if steps and steps[-1]["live_nodes"]:
            print(f"{system} {label}: live nodes: {', '.join(steps[-1]['live_nodes'])}")
        convs = [x["convolutions"] for x in runs if "convolutions" in x and "error" not in x]
        if convs and convs[-1]["im2col"]:
            print(f"{system} {label}: {convs[-1]['im2col']} convolutions on im2col: {convs[-1]['why']}")
    failed = False
    for (system, label), runs in results.items():
        for got in runs:
            if "error" in got:
                failed = True
                print(f"FAILED {system} {label}: {got['error']}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
