"""python nccl_collectives.py OUT_DIR, under mpiexec: flowjob_mpi.nccl_boxing's collectives on emulated device arrays
(flowjob-gpu's emulated CuPy) through fake_nccl's NCCL, each checked against numpy on the whole value every rank
can compute; then an all-to-all recorded into an emulated CUDA graph and launched. Exits non-zero on a mismatch;
each rank writes collectives<rank>.json: the double's call log."""
import json
import os
import sys
from types import SimpleNamespace

import numpy as np

import fake_nccl

fake_nccl.install_emulated(device_count=8)

from flowjob_core import BlobSpec  # noqa: E402
from flowjob_gpu.emulation.factory import emulated_cupy  # noqa: E402
from flowjob_mpi import nccl_boxing, world  # noqa: E402
from flowjob_mpi.errors import MpiError  # noqa: E402
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

# the kernels the ops build (flowjob_mpi.ops dispatches to them; mpi_all_to_all's op is to call all_to_all_kernel)
def kernel(builder, attrs, inputs, outputs):
    buffers = [cp.empty(spec.shape, spec.dtype) for spec in outputs]
    ctx = SimpleNamespace(attrs=attrs, inputs=inputs, outputs=outputs, xp=cp, out=lambda i: buffers[i],
                          node_name=f"test-{builder.__name__}")
    return builder(ctx, w.nccl)


x = cp.asarray(blocks(logical, 1)[r])
want = blocks(logical, 0)[r]
run = kernel(nccl_boxing.all_to_all_kernel, {"split_axis": 0, "concat_axis": 1, "ranks": R},
             [BlobSpec(x.shape, np.dtype(np.float32))], [BlobSpec(want.shape, np.dtype(np.float32))])
assert run.host_state is False  # recorded with the step's graph
same(run(x), want, "all_to_all_kernel")
run = kernel(nccl_boxing.gather_kernel, {"axis": 1, "counts": counts}, [BlobSpec(mine.shape, np.dtype(np.float32))],
             [BlobSpec(rows.shape, np.dtype(np.float32))])
same(run(cp.asarray(mine)), rows, "gather_kernel of uneven rows")
run = kernel(nccl_boxing.reduce_scatter_kernel, {"axis": 2, "ranks": R},
             [BlobSpec(total.shape, np.dtype(np.float32))], [BlobSpec(blocks(total, 2)[r].shape, np.dtype(np.float32))])
same(run(cp.asarray(xs[r])), blocks(total, 2)[r], "reduce_scatter_kernel")
small = [np.full((2, 3), r + 1.0, np.float32), np.arange(4, dtype=np.float32) * (r + 1)]
specs = [BlobSpec(a.shape, np.dtype(np.float32)) for a in small]
run = kernel(nccl_boxing.allreduce_kernel, {"weight": 0.5}, specs, specs)
sums = run(*map(cp.asarray, small))  # one bucket for both
same(sums[0], np.full((2, 3), sum(range(1, R + 1)) * 0.5, np.float32), "allreduce_kernel's first input")
same(sums[1], np.arange(4, dtype=np.float32) * sum(range(1, R + 1)) * 0.5, "allreduce_kernel's second input")
try:
    kernel(nccl_boxing.reduce_scatter_kernel, {"axis": 0, "ranks": R}, [BlobSpec((2 * R,), np.dtype(np.int32))],
           [BlobSpec((2,), np.dtype(np.int32))])
except MpiError as exc:  # NCCL sums floating types here: refused when the plan is built, naming the node
    assert "the NCCL reduce-scatter of node 'test-reduce_scatter_kernel'" in str(exc) and "int32" in str(exc), exc
else:
    raise AssertionError("an int32 reduce-scatter was not refused")

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
