"""Async results overlap the caller's data preparation with compute.

One MLP training step (784-512-10, batch 100, SGD) per iteration; before each step the
caller prepares its batch. ``-> tp.Numpy`` (sync) waits for each step before preparing the
next batch; ``-> tp.Callback[tp.Numpy]`` (async) returns at once, so the next batch is
prepared while the executor thread computes. Preparation is calibrated to ``--prep-ratio``
of a step (default one half), so the ideal async/sync ratio is 1.5.

``--prep numpy`` (default) prepares with large float32 matmuls (the GIL is released); BLAS is
limited to ``--blas-threads`` (default 1) so that compute and preparation each get a core
(with one physical core they cannot overlap, whatever the runtime does). ``--prep sleep``
simulates I/O-bound preparation with ``time.sleep``.

Run: python bench/bench_async.py [--steps 200] [--prep numpy|sleep] [--prep-ratio 0.5]
"""
from __future__ import annotations

import argparse
import os
import sys
import time


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--prep", choices=("numpy", "sleep"), default="numpy")
    parser.add_argument("--prep-ratio", type=float, default=0.5, help="preparation time / step time")
    parser.add_argument("--blas-threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3, help="alternating sync/async rounds; the best counts")
    return parser.parse_args()


ARGS = _args()
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, str(ARGS.blas_threads))  # before numpy loads BLAS

import numpy as np  # noqa: E402

import oneflow as flow  # noqa: E402
import oneflow.typing as tp  # noqa: E402


def mlp_loss(images, labels):
    init = flow.truncated_normal(0.1)
    reshape = flow.reshape(images, [images.shape[0], -1])
    hidden = flow.layers.dense(reshape, 512, activation=flow.nn.relu, kernel_initializer=init, name="hidden")
    logits = flow.layers.dense(hidden, 10, kernel_initializer=init, name="output")
    loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
    flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)
    return loss


def make_jobs(batch: int):
    images = tp.Numpy.Placeholder((batch, 1, 28, 28))
    labels = tp.Numpy.Placeholder((batch,), dtype=flow.int32)

    @flow.global_function(type="train")
    def sync_step(x: images, y: labels) -> tp.Numpy:
        return mlp_loss(x, y)

    @flow.global_function(type="train")
    def async_step(x: images, y: labels) -> tp.Callback[tp.Numpy]:
        return mlp_loss(x, y)

    return sync_step, async_step


class Preparer:
    """Makes a batch, spending about ``seconds`` on GIL-free numpy work (a few large matmuls) or asleep.

    Large matmuls hold the GIL rarely, so the executor thread can run the step meanwhile.
    """

    def __init__(self, batch: int, kind: str, seconds: float) -> None:
        rng = np.random.default_rng(0)
        self.images = rng.random((batch, 1, 28, 28), dtype=np.float32)
        self.labels = rng.integers(0, 10, batch).astype(np.int32)
        self.kind, self.seconds = kind, seconds
        self.work = rng.random((384, 384), dtype=np.float32) / 384
        self.reps = 0
        if kind == "numpy":  # calibrate: how many matmuls make ``seconds``
            one = min(self._matmuls(1) for _ in range(7))
            self.reps = max(1, round(seconds / one))

    def _matmuls(self, reps: int) -> float:
        t0 = time.perf_counter()
        acc = self.work
        for _ in range(reps):
            acc = np.matmul(self.work, acc)
        return time.perf_counter() - t0

    def __call__(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        if self.kind == "sleep":
            time.sleep(self.seconds)
        else:
            self._matmuls(self.reps)
        return np.roll(self.images, i, axis=0), np.roll(self.labels, i)


def overlap_ceiling(prepare: Preparer, trials: int = 3) -> float:
    """What this machine allows: the speedup of two threads of preparation work over one running both."""
    import threading

    best = 0.0
    for _ in range(trials):
        t0 = time.perf_counter()
        prepare(0)
        prepare(0)
        serial = time.perf_counter() - t0
        threads = [threading.Thread(target=prepare, args=(0,)) for _ in range(2)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        best = max(best, serial / (time.perf_counter() - t0))
    return best


def timed(loop, steps: int) -> float:
    t0 = time.perf_counter()
    loop(steps)
    return steps / (time.perf_counter() - t0)


def main() -> None:
    steps, batch = ARGS.steps, ARGS.batch
    sync_step, async_step = make_jobs(batch)
    flow.train.CheckPoint().init()
    images = np.random.default_rng(1).random((batch, 1, 28, 28), dtype=np.float32)
    labels = np.zeros(batch, np.int32)
    for _ in range(10):  # trace, plan, warm caches
        sync_step(images, labels)
        async_step(images, labels)(lambda loss: None)
    flow.sync_default_session()
    t0 = time.perf_counter()
    for _ in range(50):
        sync_step(images, labels)
    step_s = (time.perf_counter() - t0) / 50
    prepare = Preparer(batch, ARGS.prep, ARGS.prep_ratio * step_s)
    t0 = time.perf_counter()
    for i in range(20):
        prepare(i)
    prep_s = (time.perf_counter() - t0) / 20
    losses: list[float] = []

    def sync_loop(n: int) -> None:
        for i in range(n):
            losses.append(float(sync_step(*prepare(i)).mean()))

    def async_loop(n: int) -> None:
        for i in range(n):
            async_step(*prepare(i))(lambda loss: losses.append(float(loss.mean())))
        flow.sync_default_session()  # every step and callback done: the same work as the sync loop

    sync_rate = async_rate = 0.0
    for _ in range(ARGS.rounds):
        sync_rate = max(sync_rate, timed(sync_loop, steps))
        async_rate = max(async_rate, timed(async_loop, steps))
    print(f"MLP 784-512-10 train step, batch {batch}, {steps} steps x {ARGS.rounds} rounds (best), "
          f"{os.cpu_count()} CPUs, BLAS threads {os.environ['OPENBLAS_NUM_THREADS']}")
    print(f"step alone {step_s * 1e3:.2f} ms; preparation ({ARGS.prep}) {prep_s * 1e3:.2f} ms "
          f"= {prep_s / step_s:.2f} of a step")
    print(f"{'mode':<28}{'steps/s':>10}")
    print(f"{'sync   (-> tp.Numpy)':<28}{sync_rate:>10.1f}")
    print(f"{'async  (-> tp.Callback)':<28}{async_rate:>10.1f}")
    print(f"{'ratio async/sync':<28}{async_rate / sync_rate:>10.2f}")
    if ARGS.prep == "numpy":  # the machine's own limit: two numpy threads side by side
        print(f"{'machine limit (2 threads)':<28}{overlap_ceiling(prepare):>10.2f}")
    if not all(np.isfinite(losses)):
        sys.exit("non-finite loss")


if __name__ == "__main__":
    main()
