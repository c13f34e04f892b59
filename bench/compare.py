"""flowjob against PyTorch CPU eager, side by side: ``python bench/compare.py [--rounds 3]``.

Each (system, workload) runs in its own process; rounds interleave the systems so that a
drift of the machine's speed affects both alike. Prints medians over rounds and the ratio
flowjob / torch (below 1: flowjob is faster). Without torch installed it prints flowjob only.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import pathlib
import statistics
import subprocess
import sys

HERE = pathlib.Path(__file__).parent
DEFAULT = ["mlp_train", "mlp_infer", "lenet_train", "lenet_infer"]


def run(system: str, workload: str, steps: int | None) -> dict:
    cmd = [sys.executable, str(HERE / "worker.py"), system, workload]
    if steps:
        cmd += ["--steps", str(steps)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=1800)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workloads", default=",".join(DEFAULT),
                        help="comma list of mlp_train, mlp_infer, lenet_train, lenet_infer, lenet_epoch")
    parser.add_argument("--steps", type=int, default=None)
    args = parser.parse_args()
    systems = ["flowjob"] + (["torch"] if importlib.util.find_spec("torch") else [])
    workloads = args.workloads.split(",")
    results: dict[tuple[str, str], list[dict]] = {}
    for r in range(args.rounds):
        for workload in workloads:
            for system in (systems if r % 2 == 0 else systems[::-1]):
                results.setdefault((system, workload), []).append(run(system, workload, args.steps))
                print(f"round {r + 1}: {system:8s} {workload:12s} "
                      f"{results[(system, workload)][-1]['median_ms']:9.2f} ms", file=sys.stderr)

    def med(system: str, workload: str, key: str) -> float:
        return statistics.median(x[key] for x in results[(system, workload)])

    key = lambda w: "total_s" if w == "lenet_epoch" else "median_ms"  # noqa: E731
    unit = lambda w: "s/epoch" if w == "lenet_epoch" else "ms/step"  # noqa: E731
    print(f"\nmedians of {args.rounds} rounds (each a median over its steps), batch 100, float32")
    header = f"{'workload':14s} {'flowjob':>12s}" + (f" {'torch':>12s} {'ratio':>7s}" if len(systems) > 1 else "")
    print(header)
    for w in workloads:
        f = med("flowjob", w, key(w))
        line = f"{w:14s} {f:9.2f} {unit(w):>2s}"
        if len(systems) > 1:
            t = med("torch", w, key(w))
            line += f" {t:9.2f}  {f / t:6.2f}x"
        print(line)
    print(f"{'first call':14s} " + "  ".join(
        f"{s}: {med(s, workloads[-1], 'first_call_s'):.3f} s" for s in systems) + f"  ({workloads[-1]})")
    print(f"{'peak memory':14s} " + "  ".join(
        f"{s}: {max(med(s, w, 'peak_rss_mb') for w in workloads):.0f} MB" for s in systems))


if __name__ == "__main__":
    main()
