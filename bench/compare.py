"""flowjob against PyTorch CPU eager, side by side: ``python bench/compare.py [--rounds 3]``.

Each (system, workload) runs in its own process; rounds interleave the systems so that a
drift of the machine's speed affects both alike. Prints medians over rounds and the ratio
flowjob / torch (below 1: flowjob is faster). Without torch installed it prints flowjob only.

``--variant LABEL:VAR=VALUE[,VAR=VALUE]`` adds flowjob run with extra environment variables as
one more system in the same interleaved rounds, e.g. ``tuned:FLOWJOB_MALLOC_TUNING=1``, or an
older build installed in another virtual environment: ``before:PYTHON=/tmp/old-venv/bin/python``
(``PYTHON`` names the interpreter that runs the worker; the other assignments go to its environment).

``--threads 1,2[,4,8]`` prints the thread-scaling table instead: every (system, workload, thread count)
in the same interleaved rounds, each run told its count by the environment (``FLOWJOB_HOST_THREADS`` for
flowjob, ``OMP_NUM_THREADS`` / ``MKL_NUM_THREADS`` / ``OPENBLAS_NUM_THREADS`` for both), with the median of
the rounds, their spread (lowest to highest), the speed-up over the first count and the flowjob / torch
ratio per count. The table of ``bench/README.md``: ``python bench/compare.py --threads 1,2 --rounds 5
--workloads mlp_train,mlp_infer,lenet_train,lenet_infer,resnet50_train,bert_train``.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import pathlib
import statistics
import subprocess
import sys

HERE = pathlib.Path(__file__).parent
DEFAULT = ["mlp_train", "mlp_infer", "lenet_train", "lenet_infer"]


def run(system: str, workload: str, steps: int | None, env: dict[str, str] | None = None) -> dict:
    env = dict(env or {})
    python = env.pop("PYTHON", sys.executable)
    cmd = [python, str(HERE / "worker.py"), system, workload]
    if steps:
        cmd += ["--steps", str(steps)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=1800,
                         env=os.environ | env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def parse_variant(text: str) -> tuple[str, dict[str, str]]:
    """``LABEL:VAR=VALUE,VAR=VALUE`` -> (label, environment additions)."""
    label, sep, assignments = text.partition(":")
    env = dict(a.split("=", 1) for a in assignments.split(",") if "=" in a)
    if not sep or not label or not env:
        raise SystemExit(f"--variant {text!r}: expected LABEL:VAR=VALUE[,VAR=VALUE...]")
    return label, env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workloads", default=",".join(DEFAULT),
                        help="comma list of mlp_train, mlp_infer, lenet_train, lenet_infer, lenet_epoch, "
                             "resnet50_train (batch 16), bert_train (batch 8)")
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--variant", action="append", default=[], metavar="LABEL:VAR=VALUE",
                        help="also run flowjob with these environment additions, as system LABEL")
    parser.add_argument("--threads", default=None, metavar="1,2",
                        help="the thread-scaling table over these thread counts (each system told the count)")
    args = parser.parse_args()
    if args.threads:
        scaling(args.workloads.split(","), [int(t) for t in args.threads.split(",")], args.rounds, args.steps)
        return
    variants = dict(parse_variant(v) for v in args.variant)
    systems = ["flowjob", *variants] + (["torch"] if importlib.util.find_spec("torch") else [])
    has_torch = systems[-1] == "torch"
    workloads = args.workloads.split(",")
    results: dict[tuple[str, str], list[dict]] = {}
    for r in range(args.rounds):
        for workload in workloads:
            for system in (systems if r % 2 == 0 else systems[::-1]):
                kind = "flowjob" if system in variants else system
                results.setdefault((system, workload), []).append(
                    run(kind, workload, args.steps, variants.get(system)))
                print(f"round {r + 1}: {system:8s} {workload:12s} "
                      f"{results[(system, workload)][-1]['median_ms']:9.2f} ms", file=sys.stderr)

    def med(system: str, workload: str, key: str) -> float:
        return statistics.median(x[key] for x in results[(system, workload)])

    key = lambda w: "total_s" if w == "lenet_epoch" else "median_ms"  # noqa: E731
    unit = lambda w: "s/epoch" if w == "lenet_epoch" else "ms/step"  # noqa: E731
    print(f"\nmedians of {args.rounds} rounds (each a median over its steps), float32; batch 100 "
          "(resnet50_train 16, bert_train 8)")
    flowjobs = [s for s in systems if s != "torch"]
    header = f"{'workload':14s}" + "".join(f" {s:>18s}" for s in flowjobs) + (f" {'torch':>12s}" if has_torch else "")
    print(header)
    for w in workloads:
        t = med("torch", w, key(w)) if has_torch else None
        line = f"{w:14s}"
        for s in flowjobs:
            f = med(s, w, key(w))
            line += f" {f:9.2f}" + (f" ({f / t:5.2f}x)" if t else " " * 9)
        if t is not None:
            line += f" {t:9.2f} {unit(w)}"
        print(line)
    if has_torch:
        print("(ratio: flowjob / torch; below 1 flowjob is faster)")
    print(f"{'first call':14s} " + "  ".join(
        f"{s}: {med(s, workloads[-1], 'first_call_s'):.3f} s" for s in systems) + f"  ({workloads[-1]})")
    print(f"{'peak memory':14s} " + "  ".join(
        f"{s}: {max(med(s, w, 'peak_rss_mb') for w in workloads):.0f} MB" for s in systems))


def thread_env(threads: int) -> dict[str, str]:
    """The one thread count, as each system and its BLAS read it."""
    return {"FLOWJOB_HOST_THREADS": str(threads), "OMP_NUM_THREADS": str(threads),
            "MKL_NUM_THREADS": str(threads), "OPENBLAS_NUM_THREADS": str(threads)}


def scaling(workloads: list[str], counts: list[int], rounds: int, steps: int | None) -> None:
    """Every (system, workload, thread count) once per round, the order alternating between rounds."""
    systems = ["flowjob"] + (["torch"] if importlib.util.find_spec("torch") else [])
    runs = [(w, t, s) for w in workloads for t in counts for s in systems]
    times: dict[tuple[str, str, int], list[float]] = {}
    for r in range(rounds):
        for workload, threads, system in (runs if r % 2 == 0 else runs[::-1]):
            ms = run(system, workload, steps, thread_env(threads))["median_ms"]
            times.setdefault((system, workload, threads), []).append(ms)
            print(f"round {r + 1}: {system:8s} {workload:14s} {threads:2d} threads {ms:9.2f} ms", file=sys.stderr)
    print(f"\nthread scaling: ms/step, median of {rounds} rounds [lowest-highest round], float32; batch 100 "
          "(resnet50_train 16, bert_train 8)")
    print(f"{'workload':14s} {'system':8s}" + "".join(f" {f'{t} thread' + ('s' if t > 1 else ''):>22s}"
                                                       for t in counts) + f"  speed-up {counts[0]}->{counts[-1]}")
    for w in workloads:
        for system in systems:
            cells = [times[(system, w, t)] for t in counts]
            line = f"{w:14s} {system:8s}" + "".join(
                f" {statistics.median(c):8.2f} [{min(c):6.2f}-{max(c):6.2f}]" for c in cells)
            line += f"  {statistics.median(cells[0]) / statistics.median(cells[-1]):5.2f}x"
            print(line)
        if "torch" in systems:
            print(f"{'':14s} {'ratio':8s}" + "".join(
                f" {statistics.median(times[('flowjob', w, t)]) / statistics.median(times[('torch', w, t)]):8.2f}x"
                + " " * 13 for t in counts) + "  (flowjob / torch)")
    if "torch" not in systems:
        print("(torch is not installed here: flowjob only)")


if __name__ == "__main__":
    main()
