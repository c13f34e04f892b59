"""Model parallelism over MPI ranks (flowjob-mpi's boxing pass): an embedding-heavy Wide&Deep-style model whose
table is split by rows, on 2 ranks against one process: each rank's variables, peak memory and step time, and the
memory each rank takes to save a checkpoint.

    python bench/mpi_model_parallel.py [--steps N] [--vocab V]    # prints markdown tables for bench/README.md

Each configuration runs in its own processes (``mpiexec`` from the environment); the ``--role`` form is the
child. "variables" is what the session holds (the table, its momentum and the small layers); "RSS after the
steps" is the process's resident memory then (``/proc/self/statm``), with Python, numpy and MPI; "peak RSS" its
maximum (``ru_maxrss``), which also counts the initializer's draw: one process draws the whole table in float64,
each rank only its rows, a chunk of the stream at a time. Step time is the median over the timed steps.

After the steps each configuration saves a checkpoint twice: as it does by default (each rank writes its rows of
the split variables into their files) and with ``FLOWJOB_CHECKPOINT_SPLIT_SAVE=gather`` (each split variable
gathered onto rank 0, which writes it: the path of ranks that do not share the folder, and what every save did
before). For each, "save peak RSS" is the process's resident peak during the save alone (``VmHWM`` after
``/proc/self/clear_refs`` reset it, Linux), "save allocated" the peak of what the save allocated (``tracemalloc``:
numpy and Python objects, not MPI's own buffers).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BATCH, FIELDS, DIM, HIDDEN = 256, 8, 32, 64


def _resident_peak_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _measured_save(flow, folder: str, mode: str, barrier) -> dict:
    """One checkpoint saved to ``folder`` with the split variables written as ``mode`` says: this rank's peaks."""
    import tracemalloc

    os.environ["FLOWJOB_CHECKPOINT_SPLIT_SAVE"] = mode  # read by the save (flowjob_core.switches), every rank alike
    barrier()
    with open("/proc/self/clear_refs", "w") as refs:  # the resident peak from now on
        refs.write("5")
    tracemalloc.start()
    start = time.perf_counter()
    flow.train.CheckPoint().save(folder)
    took = time.perf_counter() - start
    allocated = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {f"{mode}_rss_mib": _resident_peak_mib(), f"{mode}_allocated_mib": allocated / 2**20,
            f"{mode}_save_s": took}


def role(steps: int, vocab: int, save_dir: str) -> None:
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
    split = sum(store[name].spec.nbytes for name in store.names() if store[name].shard is not None)
    mine["split_mib"] = split / 2**20
    everyone = None
    if os.environ.get("PMI_SIZE"):
        from flowjob_mpi import world

        everyone = world()
    for mode in ("rows", "gather"):
        mine.update(_measured_save(flow, os.path.join(save_dir, mode), mode,
                                   (lambda: everyone.allgather(None)) if everyone else (lambda: None)))
    ranks = [mine] if everyone is None else everyone.allgather(mine)
    if everyone is not None and everyone.rank != 0:
        return
    print(json.dumps(ranks))


def _run(ranks: int, steps: int, vocab: int) -> list[dict]:
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    folder = tempfile.mkdtemp(prefix="mpi_model_parallel-")  # the checkpoints, removed after
    command = [sys.executable, str(Path(__file__).resolve()), "--role", "--steps", str(steps), "--vocab", str(vocab),
               "--save-dir", folder]
    if ranks:
        from flowjob_mpi.launch import find_mpiexec

        command = [find_mpiexec(), "-n", str(ranks), *command]
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900, check=False)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--vocab", type=int, default=400_000)
    parser.add_argument("--role", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--save-dir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role:
        role(args.steps, args.vocab, args.save_dir)
        return
    table_mib = args.vocab * DIM * 4 / 2**20
    print(f"embedding table {args.vocab} x {DIM} float32 ({table_mib:.0f} MiB), batch {BATCH} x {FIELDS} ids, "
          f"SGD with momentum, 1 BLAS thread per process\n")
    runs = {ranks: _run(ranks, args.steps, args.vocab) for ranks in (0, 2)}
    print("| run | rank | variables held (MiB) | RSS after the steps (MiB) | peak RSS (MiB) | step (ms) |")
    print("|---|---|---|---|---|---|")
    for ranks, rows in runs.items():
        for r, row in enumerate(rows):
            print(f"| {_name(ranks)} | {r} | {row['held_mib']:.1f} | {row['rss_mib']:.0f} | "
                  f"{row['peak_rss_mib']:.0f} | {row['step_ms']:.1f} |")
    split = runs[2][0]["split_mib"]
    print(f"\nsaving a checkpoint (split variables: {split:.0f} MiB, the table and its momentum): each rank's "
          f"peak during the save alone\n")
    print("| run | rank | rows in place: save peak RSS (MiB) | allocated (MiB) | save (s) "
          "| gathered onto rank 0: save peak RSS (MiB) | allocated (MiB) | save (s) |")
    print("|---|---|---|---|---|---|---|---|")
    for ranks, rows in runs.items():
        for r, row in enumerate(rows):
            print(f"| {_name(ranks)} | {r} | {row['rows_rss_mib']:.0f} | {row['rows_allocated_mib']:.0f} | "
                  f"{row['rows_save_s']:.2f} | {row['gather_rss_mib']:.0f} | {row['gather_allocated_mib']:.0f} | "
                  f"{row['gather_save_s']:.2f} |")


def _name(ranks: int) -> str:
    return "1 process" if ranks == 0 else f"{ranks} ranks, table split by rows"


if __name__ == "__main__":
    main()
