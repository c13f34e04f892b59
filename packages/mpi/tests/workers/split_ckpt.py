"""Checkpoints of split variables, each rank writing and reading its own rows of their files:
python split_ckpt.py MODE PATH OUT_DIR.

A job declares a table split by rows (ROWS x 32 float32), a matrix split by columns and a bias held whole. MODE:
save: save to PATH, with rank 0's peak of traced memory during the save (tracemalloc) in OUT_DIR/peak<r>.json;
unshared: save with rank 1 not seeing the folder rank 0 writes (as on another machine); fail: rank 1's write of its
rows fails (a full disk) then the save is tried again; kill: rank 1 is killed while it writes its rows; load: load
PATH (peak of traced memory in peak<r>.json, each rank's pieces in rank<r>.npz); load_unshared: load with rank 1 not
seeing the files; load_unshared_fail: the same, rank 0's reading of the rows it sends failing (a disk error).
Each rank writes the CheckpointError it caught, if any, to OUT_DIR/error<r>.txt.
"""
import json
import logging
import os
import signal
import sys
import tracemalloc

import numpy as np
import oneflow as flow
import oneflow.typing as tp
from flowjob_core import get_default_session
from flowjob_core.checkpoint import row_files, split_files
from flowjob_core.errors import CheckpointError

mode, path, out_dir = sys.argv[1:4]
ROWS, DIM = 32768, 32
try:
    from flowjob_mpi import world
    rank = world().rank
except ImportError:
    rank = 0
logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")  # the save's info line says which path ran


@flow.global_function()
def lookup(ids: tp.Numpy.Placeholder((4,), dtype=flow.int32)) -> tp.Numpy:
    init = flow.random_normal_initializer(stddev=0.5)
    table = flow.get_variable("table", (ROWS, DIM), initializer=init, distribute=flow.distribute.split(0))
    columns = flow.get_variable("columns", (DIM, 8), initializer=init, distribute=flow.distribute.split(1))
    bias = flow.get_variable("bias", (8,), initializer=init)
    return flow.nn.bias_add(flow.matmul(flow.gather(table, ids), columns), bias)


lookup(np.array([0, 1, ROWS - 1, 7], dtype=np.int32))
if mode in ("unshared", "load_unshared", "load_unshared_fail") and rank == 1:  # this rank sees none of rank 0's files
    split_files._sees = lambda tmp, token: False
    split_files._readable = lambda file, nbytes: False
real_write = row_files.write_piece
if mode == "load_unshared_fail" and rank == 0:
    def failing_read(file, spec, shard):
        raise OSError(5, "Input/output error", file)

    row_files.read_piece = failing_read
if mode in ("fail", "kill") and rank == 1:
    def failing_write(file, spec, shard, piece):
        if mode == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        raise OSError(28, "No space left on device", file)

    row_files.write_piece = failing_write
check_point = flow.train.CheckPoint()


def write_error(exc):
    with open(os.path.join(out_dir, f"error{rank}.txt"), "w") as f:
        f.write(str(exc))


tracemalloc.start()
tracemalloc.reset_peak()
try:
    if mode.startswith("load"):
        check_point.load(path)
    else:
        check_point.save(path)
except CheckpointError as exc:
    write_error(exc)
    if mode == "load_unshared_fail":
        sys.exit(0)
    if mode != "fail":
        raise
_, peak = tracemalloc.get_traced_memory()
tracemalloc.stop()
whole = ROWS * DIM * 4
with open(os.path.join(out_dir, f"peak{rank}.json"), "w") as f:
    json.dump({"peak": peak, "whole": whole}, f)
if mode == "fail":  # the session is usable: the same save, its writes no longer failing, goes through
    row_files.write_piece = real_write
    check_point.save(path)
store = get_default_session().variables
np.savez(os.path.join(out_dir, f"rank{rank}.npz"), **{n: store.get(n) for n in store.names()})
