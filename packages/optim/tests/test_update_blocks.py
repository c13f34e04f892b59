"""A large elementwise update runs block by block over the host threads (the cpu override,
flowjob_optim.cpu_update_blocks): the blocks' steps take no scratch from
the plan's pool (they are built while the step runs, on the threads running them), and the result is the whole
update's, bit for bit."""
from __future__ import annotations

import numpy as np
import pytest

from flowjob_core import BlobSpec, KernelContext
from flowjob_core.backends.numpy_backend import make_backend
from flowjob_core.backends.host_blocks import SHARED_BLOCK_ITEMS
from flowjob_optim import cpu, cpu_update_blocks, update_ops


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
    size = 5 * SHARED_BLOCK_ITEMS + 123  # six blocks, a short last one
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
    # the cpu override (in blocks), then the record's whole update
    for builder in (cpu.KERNEL_BUILDERS[update_ops.ADAM_UPDATE.name], update_ops.ADAM_UPDATE.kernel):
        kernel = builder(context(make_backend()))
        w, m, v = w0.copy(), m0.copy(), v0.copy()
        pool.running = True
        for _ in range(3):
            kernel(w, m, v, g, lr)
        pool.running = False
        results.append((w, m, v))
    for got, want in zip(*results):
        np.testing.assert_array_equal(got, want)


def test_the_cpu_overrides_cover_the_elementwise_updates_and_leave_the_norm_reading_ones_to_their_records():
    covered = set(cpu_update_blocks.KERNEL_BUILDERS)
    assert {update_ops.SGD_UPDATE.name, update_ops.MOMENTUM_UPDATE.name, update_ops.ADAM_UPDATE.name,
            update_ops.RMSPROP_UPDATE.name, update_ops.RMSPROP_CENTERED_UPDATE.name} <= covered
    assert not {update_ops.LARS_UPDATE.name, update_ops.LAMB_UPDATE.name} & covered


def test_a_blocked_update_needs_an_update_kernel():
    with pytest.raises(TypeError, match="optim_learning_rate"):
        cpu_update_blocks.BlockedUpdate(update_ops.LEARNING_RATE)


def test_the_update_ops_module_holds_no_host_tuning():
    """The records' kernels are the whole update; blocks over the host threads are the cpu override's."""
    import ast
    from pathlib import Path

    tree = ast.parse(Path(update_ops.__file__).read_text())
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not {m for m in imported if m and m.startswith("flowjob_core.backends")}
