"""The cpu overrides that run block by block over host threads (flowjob_core.backends.host_blocks, the modules of
flowjob_ops.overrides.cpu) give exactly the values of the records' whole-array kernels."""
from __future__ import annotations

import functools

import numpy as np
import pytest

from flowjob_core import BlobSpec, KernelContext
from flowjob_core.backends.numpy_backend import make_backend
from flowjob_ops.overrides.cpu import activations_in_blocks
from flowjob_ops.records import activations
from flowjob_core.backends.host_blocks import BLOCK_ITEMS, FlatBlocks


def _context(backend, shape, op, inputs):
    spec = BlobSpec(shape, np.dtype(np.float32))
    return KernelContext(xp=np, backend=backend, op=op, node_name=op, attrs={}, inputs=(spec,) * inputs,
                         outputs=(spec,))


@pytest.mark.parametrize("size", [0, 5, BLOCK_ITEMS, 4 * BLOCK_ITEMS + 7])
def test_ranges_cover_the_array_once(monkeypatch, size):
    monkeypatch.setenv("FLOWJOB_HOST_THREADS", "2")
    blocks = FlatBlocks(_context(make_backend(), (max(size, 1),), "x", 1), size)
    seen = np.zeros(size, int)

    def body(start, stop):
        seen[start:stop] += 1

    blocks.each(body)
    assert (seen == 1).all()


def test_gelu_and_its_gradient_blocked_and_threaded_equal_one_block(monkeypatch):
    monkeypatch.setenv("FLOWJOB_HOST_THREADS", "2")
    shape = (3, 1000, 101)  # 303,000 values: ten blocks over two threads, a short last block
    rng = np.random.default_rng(7)
    x = (rng.normal(size=shape) * 3).astype(np.float32)
    dy = rng.normal(size=shape).astype(np.float32)
    results = {}
    for name, module, forward_builder, grad_builder in (
            ("threads", activations_in_blocks, "gelu_kernel", "gelu_grad_kernel"),
            ("record", activations, "_gelu_kernel", "_gelu_grad_kernel")):
        forward = getattr(module, forward_builder)(_context(make_backend(), shape, "gelu", 1))
        grad = getattr(module, grad_builder)(_context(make_backend(), shape, "gelu_grad", 2))
        results[name] = (forward(x).copy(), grad(x, dy).copy())
    for got, want in zip(results["threads"], results["record"]):
        np.testing.assert_array_equal(got, want)


def test_sparse_softmax_cross_entropy_in_row_blocks_over_threads_equals_the_whole_array(monkeypatch):
    from flowjob_ops.overrides.cpu import cross_entropy_in_blocks

    monkeypatch.setenv("FLOWJOB_HOST_THREADS", "2")
    rows, classes = 37, 30011  # 8 rows a block: five blocks, a short last one, over two threads
    rng = np.random.default_rng(3)
    logits = (rng.normal(size=(rows, classes)) * 4).astype(np.float32)
    labels = rng.integers(0, classes, rows).astype(np.int32)
    per_row, table = BlobSpec((rows,), np.dtype(np.float32)), BlobSpec((rows, classes), np.dtype(np.float32))
    ctx = KernelContext(xp=np, backend=make_backend(), op="sparse_softmax_cross_entropy", node_name="ce", attrs={},
                        inputs=(BlobSpec((rows,), np.dtype(np.int32)), table), outputs=(per_row, table))
    loss, prob = cross_entropy_in_blocks.sparse_softmax_cross_entropy_kernel(ctx)(labels, logits)
    # the same passes over the whole array at once
    shifted = logits - logits.max(axis=1, keepdims=True)
    picked = shifted[np.arange(rows), labels]
    want_prob = np.exp(shifted)
    total = want_prob.sum(axis=1, keepdims=True)
    want_prob /= total
    np.testing.assert_array_equal(prob, want_prob)
    np.testing.assert_array_equal(loss, np.log(total.reshape(rows)) - picked)


@pytest.mark.parametrize("threads", ["1", "2"])
def test_an_elementwise_chain_and_relu_grad_in_row_blocks_equal_the_whole_array(monkeypatch, threads):
    from flowjob_ops.overrides.cpu import chain_in_blocks

    monkeypatch.setenv("FLOWJOB_HOST_THREADS", threads)
    shape = (9, 16, 40, 40)  # 230,400 values: runs of leading rows, a short last one
    rng = np.random.default_rng(11)
    # a strided input (a transposed buffer), a per-channel operand that broadcasts, a full one
    x = rng.normal(size=(16, 9, 40, 40)).astype(np.float32).transpose(1, 0, 2, 3)
    scale = rng.normal(size=(16, 1, 1)).astype(np.float32)
    residual = rng.normal(size=shape).astype(np.float32)
    f32 = np.dtype(np.float32)
    steps = (("multiply", {}, (0, 1)), ("add", {}, (-1, 2)), ("relu", {}, (-1,)))
    ctx = KernelContext(xp=np, backend=make_backend(), op="elementwise_chain", node_name="chain",
                        attrs={"steps": steps},
                        inputs=(BlobSpec(shape, f32), BlobSpec((16, 1, 1), f32), BlobSpec(shape, f32)),
                        outputs=(BlobSpec(shape, f32),))
    kernel = chain_in_blocks.elementwise_chain_kernel(ctx)
    assert not isinstance(kernel, functools.partial)  # built to run in blocks
    got = kernel(x, scale, residual)
    np.testing.assert_array_equal(got, np.maximum(x * scale + residual, 0))
    dy = rng.normal(size=shape).astype(np.float32)
    relu_grad = activations_in_blocks.relu_grad_kernel(_context(make_backend(), shape, "relu_grad", 2))
    np.testing.assert_array_equal(relu_grad(got, dy), dy * (got > 0))
