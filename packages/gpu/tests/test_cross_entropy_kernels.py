"""The gpu backend's sparse softmax cross entropy (flowjob-kernels' cuda/cross_entropy.cu).

Without a device: the builders' host side against a stand-in CuPy whose ``RawModule`` runs each entry point's
documented arithmetic in numpy (the labels widened to int64, the out-of-range count read back until the one
warning, the record's own kernel for float16). With a device (``gpu`` marker): the CUDA kernels against numpy."""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from flowjob_core import BlobSpec, KernelContext
from flowjob_core.testing.modules import sibling
from flowjob_gpu import available_cupy, cross_entropy_kernels
from flowjob_kernels import entry_points

Records = sibling(__file__, "record_registry").Records


def _forward(logits, labels, prob, loss, bad, rows, classes):
    # the device reads and writes flat memory: (rows, classes) views of the same buffers
    rows, classes = int(rows), int(classes)
    logits, prob, loss = logits.reshape(rows, classes), prob.reshape(rows, classes), loss.reshape(rows)
    for r in range(rows):
        shifted = logits[r] - logits[r].max()
        prob[r] = np.exp(shifted) / np.exp(shifted).sum()
        label = labels[r]
        if 0 <= label < classes:
            loss[r] = np.log(np.exp(shifted).sum()) - shifted[label]
        else:
            loss[r] = 0
            bad[0] += 1


def _backward(prob, labels, dy, dx, rows, classes):
    rows, classes = int(rows), int(classes)
    prob, dy, dx = prob.reshape(rows, classes), dy.reshape(rows), dx.reshape(rows, classes)
    for r in range(rows):
        label = labels[r]
        if 0 <= label < classes:
            dx[r] = prob[r] * dy[r]
            dx[r, label] -= dy[r]
        else:
            dx[r] = 0


class _StandInCupy:
    """numpy behind the names the builders use; ``RawModule`` checks the symbol is an entry point of the source."""

    int64 = np.int64
    copyto = staticmethod(np.copyto)
    add = staticmethod(np.add)
    ascontiguousarray = staticmethod(np.ascontiguousarray)
    empty = staticmethod(np.empty)

    class cuda:  # noqa: N801 (CuPy's name)
        class Device:
            id = 0

    class RawModule:
        def __init__(self, code: str) -> None:
            self.entries = entry_points(code)

        def get_function(self, symbol: str):
            assert symbol in self.entries
            body = _backward if "backward" in symbol else _forward

            def launch(grid, block, args):
                assert block[0] % 32 == 0 and grid[0] >= 1
                body(*args)

            return launch


def _contexts(xp, shape, dtype, label_dtype=np.int32, ops=None):
    logits = BlobSpec(shape, np.dtype(dtype))
    labels = BlobSpec(shape[:-1], np.dtype(label_dtype))
    per_row = BlobSpec(shape[:-1], np.dtype(dtype))
    forward = KernelContext(xp, None, "sparse_softmax_cross_entropy", "xent", {}, (labels, logits), (per_row, logits),
                            ops=ops)
    backward = KernelContext(xp, None, "sparse_softmax_cross_entropy_grad", "xent_grad", {"forward": "xent"},
                             (labels, logits, per_row), (logits,), ops=ops)
    return forward, backward


def _reference(logits, labels):
    classes = logits.shape[-1]
    shifted = logits - logits.max(axis=-1, keepdims=True)
    prob = np.exp(shifted) / np.exp(shifted).sum(axis=-1, keepdims=True)
    valid = (labels >= 0) & (labels < classes)
    picked = np.take_along_axis(shifted, np.clip(labels, 0, classes - 1)[..., None], -1)[..., 0]
    loss = np.where(valid, np.log(np.exp(shifted).sum(axis=-1)) - picked, 0)
    return loss, prob, valid


@pytest.mark.parametrize("label_dtype", [np.int32, np.int64, np.uint32])
def test_the_host_side_widens_labels_counts_bad_ones_on_the_device_and_warns_once(label_dtype):
    cp = _StandInCupy()
    forward_ctx, backward_ctx = _contexts(cp, (2, 3, 7), np.float32, label_dtype)
    forward = cross_entropy_kernels.sparse_softmax_cross_entropy_kernel(forward_ctx)
    backward = cross_entropy_kernels.sparse_softmax_cross_entropy_grad_kernel(backward_ctx)
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(2, 3, 7)).astype(np.float32)
    good = rng.integers(0, 7, (2, 3)).astype(label_dtype)
    bad = good.copy()
    bad[0, 1] = 7  # out of range (an unsigned 2**32 - 1 would be too)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loss, prob = forward(good, logits)
    want_loss, want_prob, _ = _reference(logits, good.astype(np.int64))
    np.testing.assert_allclose(loss, want_loss, rtol=1e-5)
    np.testing.assert_allclose(prob, want_prob, rtol=1e-5)
    with pytest.warns(RuntimeWarning, match=r"op 'xent' \(sparse_softmax_cross_entropy\): 1 of 6 labels lie outside "
                                            r"the class range \[0, 7\), counted on the device"):
        loss, _ = forward(bad, logits)
    assert loss[0, 1] == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once per node
        forward(bad, logits)
    dy = rng.normal(size=(2, 3)).astype(np.float32)
    dx = backward(bad, prob, dy)
    want = prob * dy[..., None]
    want[0, 1] = 0
    for (i, j), label in np.ndenumerate(bad):
        if label < 7:
            want[i, j, label] -= dy[i, j]
    np.testing.assert_allclose(dx, want, rtol=1e-5, atol=1e-7)


def test_a_dtype_without_an_entry_point_runs_the_records_own_kernel():
    ran = []

    def record_kernel(ctx):
        ran.append(ctx.op)
        return "the record's kernel"

    forward_ctx, backward_ctx = _contexts(_StandInCupy(), (4, 5), np.float16, ops=Records(record_kernel))
    assert cross_entropy_kernels.sparse_softmax_cross_entropy_kernel(forward_ctx) == "the record's kernel"
    assert cross_entropy_kernels.sparse_softmax_cross_entropy_grad_kernel(backward_ctx) == "the record's kernel"
    assert ran == ["sparse_softmax_cross_entropy", "sparse_softmax_cross_entropy_grad"]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(3, 10), (2, 5, 30522), (1, 1000)])
def test_the_cuda_kernels_match_numpy(dtype, shape):
    cp = available_cupy()
    forward_ctx, backward_ctx = _contexts(cp, shape, dtype)
    forward = cross_entropy_kernels.sparse_softmax_cross_entropy_kernel(forward_ctx)
    backward = cross_entropy_kernels.sparse_softmax_cross_entropy_grad_kernel(backward_ctx)
    rng = np.random.default_rng(1)
    logits = (rng.normal(size=shape) * 4).astype(dtype)
    labels = rng.integers(0, shape[-1], shape[:-1]).astype(np.int32)
    labels.reshape(-1)[0] = -1  # out of range: zero loss and gradient, one warning
    with pytest.warns(RuntimeWarning, match="1 of"):
        loss, prob = forward(cp.asarray(labels), cp.asarray(logits))
    want_loss, want_prob, valid = _reference(logits.astype(np.float64), labels.astype(np.int64))
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(cp.asnumpy(prob), want_prob, rtol=tol, atol=tol / 100)
    np.testing.assert_allclose(cp.asnumpy(loss), want_loss, rtol=tol, atol=tol)
    dy = rng.normal(size=shape[:-1]).astype(dtype)
    dx = cp.asnumpy(backward(cp.asarray(labels), prob, cp.asarray(dy)))
    want = np.asarray(cp.asnumpy(prob), np.float64) * dy[..., None]
    flat_want, flat_labels = want.reshape(-1, shape[-1]), labels.reshape(-1)
    flat_want[~valid.reshape(-1)] = 0
    for r, label in enumerate(flat_labels):
        if 0 <= label < shape[-1]:
            flat_want[r, label] -= dy.reshape(-1)[r]
    np.testing.assert_allclose(dx, want, rtol=tol, atol=tol / 100)
    assert math.prod(shape[:-1]) == loss.size
