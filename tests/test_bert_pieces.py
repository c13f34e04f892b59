"""Pieces the v0.4 BERT benchmark (LanguageModeling/BERT) needed: flow.gather in its batch_dims form with
indices of a lower rank than batch_dims + 1, and asynchronous steps still reading OFRecord files when the
program ends (run_pretraining.py launches every step with async_get and returns)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np

import oneflow as flow
import oneflow.typing as tp
from flowjob_core.testing.modules import sibling

_helpers = sibling(__file__, "op_surface_helpers")
fresh_session, value, sgd = _helpers.fresh_session, _helpers.value, _helpers.sgd


def test_gather_batch_dims_two_on_rank_two_positions_is_a_batch_gather() -> None:
    # BERT's _GatherIndexes: params (batch, seq, hidden), positions (batch, preds), axis=2, batch_dims=2;
    # legacy built a batch_gather, which gathers along axis rank(indices) - 1 = 1
    rng = np.random.default_rng(4)
    seq = rng.normal(size=(3, 7, 4)).astype(np.float32)
    pos = rng.integers(0, 7, size=(3, 2)).astype(np.int32)

    @flow.global_function(type="train")
    def job(x: tp.Numpy.Placeholder((3, 7, 4)), p: tp.Numpy.Placeholder((3, 2), dtype=flow.int32)) -> tp.Numpy:
        w = flow.get_variable("w", shape=(3, 7, 4), initializer=flow.zeros_initializer())
        out = flow.gather(params=x + w, indices=p, axis=2, batch_dims=2)
        sgd(flow.math.reduce_sum(out))
        return out

    out = job(seq, pos)
    np.testing.assert_allclose(out, np.take_along_axis(seq, pos[:, :, None], axis=1))
    counts = np.zeros((3, 7, 4), np.float32)
    for b in range(3):
        for j in pos[b]:
            counts[b, j] += 1
    np.testing.assert_allclose(value("w"), -0.1 * counts, rtol=1e-6)  # the gradient scatters back


PROGRAM = textwrap.dedent("""
    import numpy as np
    import oneflow as flow
    import oneflow.core.record.record_pb2 as ofrecord
    from flowjob_ofrecord import write_part

    write_part("data/part-0", (ofrecord.OFRecord(feature={
        "x": ofrecord.Feature(float_list=ofrecord.FloatList(value=[float(i), 1.0]))}) for i in range(8)))

    @flow.global_function(type="train")
    def job():
        with flow.scope.placement("cpu", "0:0"):
            reader = flow.data.ofrecord_reader("data", batch_size=2, data_part_num=1, random_shuffle=True,
                                               shuffle_after_epoch=True)
            x = flow.data.OFRecordRawDecoder(reader, "x", shape=[2], dtype=flow.float)
        w = flow.get_variable("w", shape=(2,), initializer=flow.ones_initializer())
        loss = flow.math.reduce_mean(x * w)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.01]), momentum=0).minimize(loss)
        return loss

    def report(step):
        def callback(loss):
            print("step", step, float(loss.numpy().mean()), flush=True)
        return callback

    for step in range(6):
        job().async_get(report(step))
    # the program ends here, with steps still queued: they must run to the end, reading their batches
""")


def test_async_steps_pending_at_exit_still_read_their_batches(tmp_path: Path) -> None:
    (tmp_path / "program.py").write_text(PROGRAM)
    proc = subprocess.run([sys.executable, "program.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [line.split()[1] for line in proc.stdout.splitlines() if line.startswith("step")] == \
        [str(i) for i in range(6)], proc.stdout + proc.stderr[-3000:]
    assert "stopped" not in proc.stderr


LARGE_KERNELS_AT_EXIT = textwrap.dedent("""
    import numpy as np
    import oneflow as flow
    import oneflow.typing as tp

    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((256, 1024))):
        return flow.math.gelu(x)  # large enough to be split over the host threads

    x = np.linspace(-3, 3, 256 * 1024, dtype=np.float32).reshape(256, 1024)
    job(x).get()  # the host threads exist before the program ends

    def report(step):
        def callback(y):
            print("step", step, float(y.numpy().sum()), flush=True)
        return callback

    for step in range(4):
        job(x).async_get(report(step))
    # steps still queued here run in the session's exit handler, after concurrent.futures stopped taking work
""")


def test_async_steps_with_threaded_kernels_pending_at_exit_finish(tmp_path: Path) -> None:
    (tmp_path / "program.py").write_text(LARGE_KERNELS_AT_EXIT)
    proc = subprocess.run([sys.executable, "program.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "FLOWJOB_HOST_THREADS": "2"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    steps = [line.split() for line in proc.stdout.splitlines() if line.startswith("step")]
    assert [s[1] for s in steps] == ["0", "1", "2", "3"], proc.stdout + proc.stderr[-3000:]
    assert len({s[2] for s in steps}) == 1
