"""python fixed_shape.py: a consistent-view job whose batch reaches an op with a traced target shape
(broadcast_like to the global batch). Each rank computes only its rows, which that op cannot follow:
every rank must get MpiError naming the op, print it, and stay usable for a job without it."""
import sys

import numpy as np
import oneflow as flow
import oneflow.typing as tp
from flowjob_mpi.errors import MpiError


@flow.global_function()
def widen(x: tp.Numpy.Placeholder((8, 1))) -> tp.Numpy:
    return flow.broadcast_like(x, flow.zeros((8, 3)), broadcast_axes=(1,), name="widened")


@flow.global_function()
def doubled(x: tp.Numpy.Placeholder((8, 1))) -> tp.Numpy:
    return x * 2.0


rank = flow.distributed.get_rank()
x = np.arange(8, dtype=np.float32).reshape(8, 1)
try:
    widen(x)
except MpiError as exc:
    print(f"rank {rank} refused: {exc}", file=sys.stderr)  # ranks > 0 have stdout silenced
else:
    raise SystemExit(f"rank {rank}: the fixed-shape job ran on a rank's rows")
np.testing.assert_array_equal(doubled(x), x * 2)
print(f"rank {rank} still usable", file=sys.stderr)
