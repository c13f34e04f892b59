"""A large elementwise update runs block by block over the host threads: the blocks' steps take no scratch from
the plan's pool (they are built while the step runs, on the threads running them), and the result is the whole
update's, bit for bit."""
from __future__ import annotations

import numpy as np
import pytest

from flowjob_core import BlobSpec, KernelContext
from flowjob_core.backends.numpy_backend import make_backend
from flowjob_optim import update_ops


class _PoolThatRefusesLateRequests:
    """Stands for a plan's scratch pool: requests are lent before the step, none while it runs."""

    def __init__(self) -> None:
        self.running = False

    def take(self, shape, dtype):
        if self.running:
            raise AssertionError("a kernel asked the plan's scratch pool for a buffer while the step ran")
        return np.empty(tuple(shape), dtype=dtype)


@pytest.mark.parametrize("threads", ["1", "2"])
def test_adamw_in_blocks_matches_the_whole_update_and_borrows_no_pool_scratch_while_running(monkeypatch, threads):
    monkeypatch.setenv("FLOWJOB_HOST_THREADS", threads)
    size = 5 * update_ops.SHARED_BLOCK_ITEMS + 123  # six blocks, a short last one
    f32 = np.dtype(np.float32)
    spec = BlobSpec((size,), f32)
    rate = BlobSpec((1,), f32)
    attrs = {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8, "weight_decay": 0.01}
    pool = _PoolThatRefusesLateRequests()

    def context(backend):
        return KernelContext(xp=np, backend=backend, op="optim_adam_update", node_name="table_optimizer", attrs=attrs,
                             inputs=(spec, spec, spec, spec, rate), outputs=(), job_type="train", _scratch=pool)

    rng = np.random.default_rng(2)
    w0, g = rng.normal(size=size).astype(np.float32), rng.normal(size=size).astype(np.float32)
    m0, v0 = rng.normal(size=size).astype(np.float32), rng.random(size).astype(np.float32)
    lr = np.array([1e-3], np.float32)
    results = []
    for builder in (update_ops._in_blocks, lambda *args: None):  # in blocks; the whole update
        monkeypatch.setattr(update_ops, "_in_blocks", builder)
        kernel = update_ops.ADAM_UPDATE.kernel(context(make_backend()))
        w, m, v = w0.copy(), m0.copy(), v0.copy()
        pool.running = True
        for _ in range(3):
            kernel(w, m, v, g, lr)
        pool.running = False
        results.append((w, m, v))
    for got, want in zip(*results):
        np.testing.assert_array_equal(got, want)
