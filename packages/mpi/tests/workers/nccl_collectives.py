"""python nccl_collectives.py OUT_DIR, under mpiexec: flowjob_mpi.nccl_boxing's collectives on emulated device arrays
(flowjob-gpu's emulated CuPy) through fake_nccl's NCCL, each checked against numpy on the whole value every rank
can compute; then an all-to-all recorded into an emulated CUDA graph and launched. Exits non-zero on a mismatch;
each rank writes collectives<rank>.json: the double's call log."""
import json
import os
import sys

import numpy as np

import fake_nccl

fake_nccl.install_emulated(device_count=8)

from flowjob_gpu.emulation.factory import emulated_cupy  # noqa: E402
from flowjob_mpi import world  # noqa: E402
from flowjob_mpi.nccl_boxing import DeviceBoxing  # noqa: E402

cp = emulated_cupy()
w = world()
R, r = w.size, w.rank
assert w.nccl is not None, "the world chose MPI: the double was not installed"
boxing = DeviceBoxing(w.nccl, cp, "the test's collectives")
rng = np.random.default_rng(5)


def blocks(whole, axis):
    return np.split(whole, R, axis=axis)


def same(got, want, what):
    np.testing.assert_allclose(got.get(), want, rtol=1e-6, err_msg=f"{what} on rank {r}")


# all-gather along the leading axis, along an inner one, and of a view that is not contiguous
whole = rng.standard_normal((2 * R, 3, 4)).astype(np.float32)
for axis in (0, 1, 2):
    shape = list(whole.shape)
    shape[axis] = R * 2
    gathered = rng.standard_normal(shape).astype(np.float32)
    piece = cp.asarray(blocks(gathered, axis)[r])
    same(boxing.all_gather(piece, cp.empty(gathered.shape, np.float32), axis), gathered, f"all_gather axis {axis}")
wide = cp.asarray(rng.standard_normal((3, 4 * R)).astype(np.float32))  # the same on every rank (one seed)
view = wide[:, ::2]  # a strided view: staged through a contiguous copy
assert not view.flags.c_contiguous
same(boxing.all_gather(view, cp.empty((3 * R, 2 * R), np.float32), 0), np.concatenate([wide.get()[:, ::2]] * R),
     "all_gather of a view")

# uneven rows: rank i holds i + 1 rows (a group of broadcasts)
counts = [i + 1 for i in range(R)]
rows = np.arange(sum(counts) * 2 * 3, dtype=np.float32).reshape(2, sum(counts), 3)
mine = np.split(rows, np.cumsum(counts)[:-1], axis=1)[r]
moved = (mine.shape[1], 2, 3)
same(boxing.all_gather_counts(cp.asarray(mine), cp.empty(rows.shape, np.float32), 1, counts,
                              cp.empty(moved, np.float32), cp.empty((sum(counts), 2, 3), np.float32)),
     rows, "all_gather_counts")

# reduce-scatter: every rank's x differs; the sum's block r along the axis
xs = [np.random.default_rng(100 + i).standard_normal((2 * R, 3, 2 * R)).astype(np.float32) for i in range(R)]
total = np.sum(xs, axis=0)
for axis in (0, 2):
    shape = list(total.shape)
    shape[axis] //= R
    same(boxing.reduce_scatter(cp.asarray(xs[r]), cp.empty(shape, np.float32), axis), blocks(total, axis)[r],
         f"reduce_scatter axis {axis}")

# all-reduce: sum and max, in place
same(boxing.all_reduce(cp.asarray(xs[r])), total, "all_reduce sum")
same(boxing.all_reduce(cp.asarray(xs[r]), "max"), np.max(xs, axis=0), "all_reduce max")

# broadcast from the last rank
root = R - 1
same(boxing.broadcast(cp.asarray(xs[r]), cp.empty(xs[r].shape, np.float32), root), xs[root], "broadcast")

# all-to-all: a value split along concat_axis becomes split along split_axis
logical = rng.standard_normal((2 * R, 3 * R, 2)).astype(np.float32)
for split_axis, concat_axis in ((1, 0), (0, 1), (2 if R == 2 else 1, 0)):
    x = cp.asarray(blocks(logical, concat_axis)[r])
    want = blocks(logical, split_axis)[r]
    same(boxing.all_to_all(x, cp.empty(want.shape, np.float32), split_axis, concat_axis), want,
         f"all_to_all {concat_axis} -> {split_axis}")

# recorded: captured on a stream, nothing moves until the graph is launched, which reads x as it is then
x = cp.asarray(blocks(logical, 0)[r])
out = cp.zeros(blocks(logical, 1)[r].shape, np.float32)
stream = cp.cuda.Stream(non_blocking=True)
with stream:
    stream.begin_capture()
    boxing.all_to_all(x, out, 1, 0)
    graph = stream.end_capture()
assert not out.get().any(), "the capture moved values before its graph was launched"
again = logical * 3
x[...] = cp.asarray(blocks(again, 0)[r])
graph.launch(stream)
same(out, blocks(again, 1)[r], "a recorded all_to_all")

with open(os.path.join(sys.argv[1], f"collectives{r}.json"), "w") as f:
    json.dump({"log": fake_nccl.LOG}, f)
print("ok", r)
