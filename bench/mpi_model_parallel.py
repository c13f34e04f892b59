"""Model parallelism over MPI ranks (flowjob-mpi's boxing pass): an embedding-heavy Wide&Deep-style model whose
table is split by rows, on 2 ranks against one process: each rank's variables, peak memory and step time.

    python bench/mpi_model_parallel.py [--steps N] [--vocab V]    # prints a markdown table for bench/README.md

Each configuration runs in its own processes (``mpiexec`` from the environment); the ``--role`` form is the
child. "variables" is what the session holds (the table, its momentum and the small layers); "RSS after the
steps" is the process's resident memory then (``/proc/self/statm``), with Python, numpy and MPI; "peak RSS" its
maximum (``ru_maxrss``), which also counts the initializer's draw: one process draws the whole table in float64,
each rank only its rows, a chunk of the stream at a time. Step time is the median over the timed steps.
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

BATCH, FIELDS, DIM, HIDDEN = 256, 8, 32, 64


def role(steps: int, vocab: int) -> None:
    import resource

    import numpy as np
    import oneflow as flow
    import oneflow.typing as tp
    from flowjob_core import get_default_session

    @flow.global_function(type="train")
    def train(ids: tp.Numpy.Placeholder((BATCH, FIELDS), dtype=flow.int32),
              labels: tp.Numpy.Placeholder((BATCH, 1))) -> tp.Numpy:
        init = flow.random_normal_initializer(stddev=0.05)
        table = flow.get_variable("embedding", (vocab, DIM), initializer=init, distribute=flow.distribute.split(0))
        rows = flow.reshape(flow.gather(table, ids), (BATCH, FIELDS * DIM))
        hidden = flow.layers.dense(rows, HIDDEN, activation=flow.nn.relu, kernel_initializer=init, name="hidden")
        logits = flow.layers.dense(hidden, 1, kernel_initializer=init, name="out")
        loss = flow.math.reduce_mean(flow.nn.sigmoid_cross_entropy_with_logits(labels, logits))
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0.9).minimize(loss)
        return loss

    rng = np.random.default_rng(0)
    batches = [(rng.integers(0, vocab, (BATCH, FIELDS)).astype(np.int32),
                rng.integers(0, 2, (BATCH, 1)).astype(np.float32)) for _ in range(4)]
    for k in range(3):  # warm-up: planning, first allocations
        train(*batches[k % 4])
    times = []
    for k in range(steps):
        start = time.perf_counter()
        train(*batches[k % 4])
        times.append(time.perf_counter() - start)
    store = get_default_session().variables
    held = sum(store[name].array.nbytes for name in store.names())
    with open("/proc/self/statm") as statm:  # resident pages now, after the steps (Linux)
        rss = int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    mine = {"held_mib": held / 2**20, "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "rss_mib": rss / 2**20,
            "step_ms": 1e3 * statistics.median(times)}
    ranks = [mine]
    if os.environ.get("PMI_SIZE"):
        from flowjob_mpi import world

        ranks = world().allgather(mine)
        if world().rank != 0:
            return
    print(json.dumps(ranks))


def _run(ranks: int, steps: int, vocab: int) -> list[dict]:
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    command = [sys.executable, str(Path(__file__).resolve()), "--role", "--steps", str(steps), "--vocab", str(vocab)]
    if ranks:
        from flowjob_mpi.launch import find_mpiexec

        command = [find_mpiexec(), "-n", str(ranks), *command]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--vocab", type=int, default=400_000)
    parser.add_argument("--role", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role:
        role(args.steps, args.vocab)
        return
    table_mib = args.vocab * DIM * 4 / 2**20
    print(f"embedding table {args.vocab} x {DIM} float32 ({table_mib:.0f} MiB), batch {BATCH} x {FIELDS} ids, "
          f"SGD with momentum, 1 BLAS thread per process\n")
    print("| run | rank | variables held (MiB) | RSS after the steps (MiB) | peak RSS (MiB) | step (ms) |")
    print("|---|---|---|---|---|---|")
    for ranks in (0, 2):
        for r, row in enumerate(_run(ranks, args.steps, args.vocab)):
            name = "1 process" if ranks == 0 else f"{ranks} ranks, table split by rows"
            print(f"| {name} | {r} | {row['held_mib']:.1f} | {row['rss_mib']:.0f} | {row['peak_rss_mib']:.0f} | "
                  f"{row['step_ms']:.1f} |")


if __name__ == "__main__":
    main()
