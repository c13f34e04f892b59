"""Data parallelism over MPI ranks (flowjob-mpi): what the gradient all-reduce costs against model size,
and MLP / LeNet training steps on 2 ranks x 1 BLAS thread against 1 process x 2 BLAS threads.

    python bench/mpi_scaling.py [--steps N] [--rounds R]     # prints the markdown table of bench/README.md
    python bench/mpi_scaling.py --feed-check [--rounds R]    # what the step check's feed fingerprints cost

Each measurement runs in its own processes (``mpiexec`` from the environment, as ``python -m oneflow
launch``); the ``--role`` forms are those children. Times are medians over steps after warm-up, the
median over rounds; rounds interleave the configurations so drift in the machine's speed hits all.
Scaling efficiency is (1 process x 2 threads) / (2 ranks x 1 thread): above 1, the ranks are faster
on the same two cores.

``--feed-check``: the training steps on 2 ranks x 1 thread with the step check's fingerprints of the fed
arrays (``FLOWJOB_MPI_FEED_CHECK=1``, the default) and without (``=0``), rounds interleaved, beside the
time of the fingerprints alone (``flowjob_mpi.agreement.fingerprint`` on arrays of the fed shapes: the
work the check adds to a step; its all-gather was there before and carries 30 bytes more an argument).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
BATCH = 100
WORKLOADS = {"mlp_train": 200, "lenet_train": 30}  # steps timed per run
# float32 gradient sizes (elements): the MLP's 407,050 and LeNet's 1,663,370 parameters among powers of ten
SIZES = [10_000, 100_000, 407_050, 1_000_000, 1_663_370, 10_000_000]
BUCKET_BYTES = 4 << 20  # flowjob_mpi.allreduce.BUCKET_BYTES


def _mpiexec() -> str:
    from flowjob_mpi.launch import find_mpiexec

    return find_mpiexec()


def _child(ranks: int, threads: int, *args: str) -> dict:
    """Run this script's ``--role`` form on ``ranks`` ranks (0: one plain process) with ``threads`` BLAS threads;
    rank 0 prints one JSON line."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads),
               MKL_NUM_THREADS=str(threads), PYTHONUNBUFFERED="1")
    command = [sys.executable, str(Path(__file__).resolve()), *args]
    if ranks:
        command = [_mpiexec(), "-n", str(ranks), *command]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def role_allreduce(reps: int) -> None:
    """Median time of one all-reduce of each gradient size, in flowjob's 4 MiB buckets of
    ``MPI_Iallreduce`` started together and waited for together (what one step's wait nodes see)."""
    import numpy as np
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    results = {}
    for size in SIZES:
        per_bucket = BUCKET_BYTES // 4
        buckets = [np.ones(min(per_bucket, size - start), dtype=np.float32) for start in range(0, size, per_bucket)]
        times = []
        for _ in range(reps + 3):
            comm.Barrier()
            t = time.perf_counter()
            requests = [comm.Iallreduce(MPI.IN_PLACE, b, op=MPI.SUM) for b in buckets]
            MPI.Request.Waitall(requests)
            times.append(time.perf_counter() - t)
        results[str(size)] = 1e3 * statistics.median(times[3:])
    if comm.Get_rank() == 0:
        print(json.dumps(results))


def role_step(workload: str, steps: int) -> None:
    """Median training step of a workload (the global batch of BATCH on every rank: each computes its rows)."""
    sys.path.insert(0, str(HERE))
    import models_flowjob

    import oneflow as flow

    first_call, step = models_flowjob.build(workload, BATCH)
    first_call()
    for _ in range(3):
        step()
    times = []
    for _ in range(steps):
        t = time.perf_counter()
        step()  # a train step ends in the all-reduce's wait and the loss's all-gather: the ranks stay in step
        times.append(time.perf_counter() - t)
    flow.sync_default_session()
    if flow.distributed.get_rank() == 0:
        print(json.dumps({"median_ms": 1e3 * statistics.median(times)}))


def _fingerprints_us(reps: int = 200) -> float:
    """Median time of fingerprinting one step's fed arrays (both workloads feed the same shapes)."""
    import numpy as np
    from flowjob_mpi.agreement import fingerprint

    rng = np.random.default_rng(0)
    images = rng.random((BATCH, 1, 28, 28), dtype=np.float32)
    labels = rng.integers(0, 10, BATCH).astype(np.int32)
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fingerprint(images)
        fingerprint(labels)
        times.append(time.perf_counter() - t)
    return 1e6 * statistics.median(times)


def feed_check(rounds: int, steps: int | None) -> None:
    step_ms: dict[tuple[str, str], list[float]] = {}
    extra = ["--steps", str(steps)] if steps else []
    for _ in range(rounds):
        for workload in WORKLOADS:
            for value in ("1", "0"):
                os.environ["FLOWJOB_MPI_FEED_CHECK"] = value
                got = _child(2, 1, "--role", "step", "--workload", workload, *extra)
                step_ms.setdefault((workload, value), []).append(got["median_ms"])
    os.environ.pop("FLOWJOB_MPI_FEED_CHECK")
    alone = _fingerprints_us()
    print(f"{os.cpu_count()} CPUs; {rounds} round(s); batch {BATCH}: images ({BATCH}, 1, 28, 28) float32 and labels "
          f"({BATCH},) int32 fed on every rank\n")
    print("| training step, 2 ranks x 1 thread | feed check on | off | difference | fingerprints alone |\n"
          "|---|---|---|---|---|")
    for workload in WORKLOADS:
        on, off = (statistics.median(step_ms[(workload, v)]) for v in ("1", "0"))
        print(f"| {workload} | {on:.2f} ms | {off:.2f} ms | {1e3 * (on - off):+.0f} µs | {alone:.0f} µs |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=None, help="steps timed per run (default per workload)")
    parser.add_argument("--reps", type=int, default=30, help="all-reduces timed per size")
    parser.add_argument("--feed-check", action="store_true",
                        help="time the steps with and without the step check's feed fingerprints instead")
    parser.add_argument("--role", choices=["allreduce", "step"], default=None, help=argparse.SUPPRESS)
    parser.add_argument("--workload", choices=sorted(WORKLOADS), default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "allreduce":
        return role_allreduce(args.reps)
    if args.role == "step":
        return role_step(args.workload, args.steps or WORKLOADS[args.workload])
    if args.feed_check:
        return feed_check(args.rounds, args.steps)

    reduce_ms: dict[str, list[float]] = {str(s): [] for s in SIZES}
    configs = {"1 process x 2 threads": (0, 2), "2 ranks x 1 thread": (2, 1), "1 process x 1 thread": (0, 1)}
    step_ms: dict[tuple[str, str], list[float]] = {}
    for _ in range(args.rounds):
        for size, ms in _child(2, 1, "--role", "allreduce", "--reps", str(args.reps)).items():
            reduce_ms[size].append(ms)
        for workload in WORKLOADS:
            extra = ["--steps", str(args.steps)] if args.steps else []
            for name, (ranks, threads) in configs.items():
                got = _child(ranks, threads, "--role", "step", "--workload", workload, *extra)
                step_ms.setdefault((workload, name), []).append(got["median_ms"])

    print(f"{os.cpu_count()} CPUs; {args.rounds} round(s); batch {BATCH} (each of 2 ranks computes 50 rows)\n")
    print("| gradient size (float32) | all-reduce on 2 ranks | per MiB |\n|---|---|---|")
    for size in SIZES:
        ms = statistics.median(reduce_ms[str(size)])
        print(f"| {size:,} ({4 * size / 2**20:.2f} MiB) | {ms:.3f} ms | {ms / (4 * size / 2**20):.3f} ms |")
    print("\n| training step | 1 process x 2 threads | 2 ranks x 1 thread | scaling efficiency | "
          "1 process x 1 thread |\n|---|---|---|---|---|")
    for workload in WORKLOADS:
        two_threads, two_ranks, one = (statistics.median(step_ms[(workload, n)]) for n in configs)
        print(f"| {workload} | {two_threads:.2f} ms | {two_ranks:.2f} ms | {two_threads / two_ranks:.2f} | "
              f"{one:.2f} ms |")


if __name__ == "__main__":
    main()
