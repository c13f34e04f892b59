"""flowjob on CuPy against PyTorch CUDA eager, side by side on one GPU: ``python bench/gpu.py [--rounds 1]``.

Each (system, workload) runs in its own process (``worker.py --device gpu``); rounds interleave the
systems. Prints, per workload, the median step time of each system, the ratio flowjob / torch (below
1: flowjob is faster) and each one's peak device memory. A run that fails is reported with the end of
its error output and the table goes on. Only figures from a real device belong in bench/README.md.
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


def run(system: str, label: str, timeout: float) -> dict:
    workload, extra = WORKLOADS[label]
    env = os.environ.copy()
    if system == NO_GRAPHS:
        system, env["FLOWJOB_CUDA_GRAPHS"] = "flowjob", "0"
    cmd = [sys.executable, str(HERE / "worker.py"), system, workload, "--device", "gpu", *extra]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"error": f"over {timeout:.0f} s"}
    if out.returncode != 0:
        tail = " | ".join(out.stderr.strip().splitlines()[-3:])
        return {"error": f"exit {out.returncode}: {tail}"}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workloads", default=",".join(WORKLOADS), help="comma list of " + ", ".join(WORKLOADS))
    parser.add_argument("--systems", default="flowjob,torch", help=f"comma list of flowjob, {NO_GRAPHS}, torch")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per worker process")
    parser.add_argument("--json", type=pathlib.Path, default=None, help="also write every run here")
    args = parser.parse_args()
    systems = args.systems.split(",")
    labels = args.workloads.split(",")
    unknown = sorted(set(labels) - set(WORKLOADS))
    if unknown:
        raise SystemExit(f"--workloads: unknown {unknown}; known: {', '.join(WORKLOADS)}")
    results: dict[tuple[str, str], list[dict]] = {}
    for r in range(args.rounds):
        for label in labels:
            for system in (systems if r % 2 == 0 else systems[::-1]):
                got = run(system, label, args.timeout)
                results.setdefault((system, label), []).append(got)
                shown = got.get("error") or f"{got['median_ms']:9.2f} ms"
                print(f"round {r + 1}: {system:16s} {label:20s} {shown}", file=sys.stderr, flush=True)
    if args.json:
        args.json.write_text(json.dumps([{"system": s, "workload": w, "runs": runs}
                                         for (s, w), runs in results.items()], indent=1))

    def med(system: str, label: str, key: str) -> float | None:
        values = [x[key] for x in results[(system, label)] if key in x]
        return statistics.median(values) if values else None

    print(f"\nmedians of {args.rounds} rounds (each a median over its steps), float32, ms/step; "
          "peak device memory in MiB")
    print(f"{'workload':20s}" + "".join(f" {s + ' ms':>12s} {s + ' MiB':>12s}" for s in systems)
          + ("  flowjob/torch" if {"flowjob", "torch"} <= set(systems) else ""))
    for label in labels:
        row = f"{label:20s}"
        for system in systems:
            ms, mb = med(system, label, "median_ms"), med(system, label, "peak_device_mb")
            row += f" {ms:12.2f} {mb:12.0f}" if ms is not None else f" {'failed':>12s} {'':>12s}"
        if {"flowjob", "torch"} <= set(systems):
            a, b = med("flowjob", label, "median_ms"), med("torch", label, "median_ms")
            row += f"  {a / b:13.2f}x" if a is not None and b is not None else ""
        print(row)
    for (system, label), runs in results.items():
        for got in runs:
            if "error" in got:
                print(f"{system} {label}: {got['error']}")


if __name__ == "__main__":
    main()
