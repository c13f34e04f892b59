"""OFRecord reader throughput, and how much of a LeNet training step the reader's read-ahead hides.

Writes its own data into a temporary folder: ``--mnist`` 28x28 MNIST-like images as the converter of
``python -m oneflow data mnist --ofrecord --raw`` writes them (PNG ``encoded``, ``class/label``, float
``images``, int64 ``labels``), and ``--jpegs`` 256x320 JPEG photos-like images (smooth gradients plus
noise, quality 90). Rows, each a legacy predict or train job run for ``--steps`` steps after
``--warmup`` steps, the best of ``--rounds``:

* ``mnist raw``: ``OFRecordRawDecoder`` of the float pixels and the labels (no image decoding);
* ``mnist png``: ``OFRecordImageDecoder(GRAY)``, ``Resize`` to 28x28, ``CropMirrorNormalize``;
* ``jpeg crop``: ``OFRecordImageDecoderRandomCrop(RGB)``, ``Resize`` to 224x224, ``CoinFlip``,
  ``CropMirrorNormalize`` with ImageNet's mean and std (the benchmarks' training pipeline);

each with the image work on 1 thread and on the decoding pool's ``N`` (``flowjob_ofrecord.images.THREADS``,
up to 8; a batch under ``SMALL_BATCH_PIXELS``, as MNIST's, stays on the reader thread either way); then a
LeNet training step (batch 100) fed in-memory arrays (``tp.Numpy.Placeholder``), by the ``mnist png``
reader and by the ``mnist raw`` reader, taking turns, with the process CPU time per step. Prints Markdown
tables.

Run: python bench/ofrecord_reader.py [--steps 30] [--rounds 3] [--rows readers lenet]
"""
from __future__ import annotations

import argparse
import io
import tempfile
import time
from pathlib import Path
from typing import Callable

import numpy as np

import oneflow as flow
import oneflow.core.record.record_pb2 as ofrecord
import oneflow.typing as tp
from flowjob_ofrecord import images as image_pool
from flowjob_ofrecord import write_part
from flowjob_ofrecord.convert import write_images

MEAN, STD = [123.68, 116.779, 103.939], [58.393, 57.12, 57.375]


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30, help="timed steps per round")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3, help="rounds per row; the best counts")
    parser.add_argument("--batch", type=int, default=100, help="records per step (MNIST rows and LeNet)")
    parser.add_argument("--jpeg-batch", type=int, default=32, help="records per step (JPEG rows)")
    parser.add_argument("--mnist", type=int, default=6000, help="MNIST-like records written")
    parser.add_argument("--jpegs", type=int, default=256, help="JPEG records written")
    parser.add_argument("--rows", nargs="+", choices=["readers", "lenet"], default=["readers", "lenet"],
                        help="which tables: reader records/s, LeNet steps by feed (default both)")
    return parser.parse_args()


def write_data(root: Path, n_mnist: int, n_jpeg: int) -> tuple[str, str]:
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 10, n_mnist)
    digits = rng.integers(0, 60, (n_mnist, 28, 28)).astype(np.uint8)
    for i, k in enumerate(labels):  # a bright bar whose place is the label, so LeNet has something to learn
        digits[i, 2 + (k // 5) * 13:12 + (k // 5) * 13, 1 + (k % 5) * 5:5 + (k % 5) * 5] = 230
    write_images(root / "mnist", digits, labels, parts=4, raw=True)

    from PIL import Image

    yy, xx = np.mgrid[0:256, 0:320]
    records = []
    for i in range(n_jpeg):
        base = np.stack([(xx * (i + 1) % 256), (yy * 3 + i) % 256, ((xx + yy) // 2) % 256], -1)
        noisy = np.clip(base + rng.normal(0, 12, base.shape), 0, 255).astype(np.uint8)
        buf = io.BytesIO()
        Image.fromarray(noisy).save(buf, format="JPEG", quality=90)
        records.append(ofrecord.OFRecord(feature={
            "encoded": ofrecord.Feature(bytes_list=ofrecord.BytesList(value=[buf.getvalue()])),
            "class/label": ofrecord.Feature(int32_list=ofrecord.Int32List(value=[i % 10]))}))
    write_part(root / "jpeg" / "part-00000", records)
    return str(root / "mnist"), str(root / "jpeg")


def reader(folder: str, batch: int, parts: int):
    return flow.data.ofrecord_reader(folder, batch_size=batch, data_part_num=parts, part_name_suffix_length=5,
                                     random_shuffle=True, shuffle_after_epoch=True, seed=0)


def mnist_png(folder: str, batch: int):
    records = reader(folder, batch, 4)
    image = flow.data.OFRecordImageDecoder(records, "encoded", color_space="GRAY")
    labels = flow.data.OFRecordRawDecoder(records, "class/label", shape=(), dtype=flow.int32)
    resized, _, _ = flow.image.Resize(image, target_size=(28, 28), channels=1)
    images = flow.image.CropMirrorNormalize(resized, color_space="GRAY", mean=[0.0], std=[255.0])
    return images, labels


def build(row: str, mnist: str, jpegs: str, args: argparse.Namespace) -> Callable[[], object]:
    flow.clear_default_session()
    if row == "mnist raw":
        @flow.global_function(type="predict")
        def raw() -> tp.Numpy:
            records = reader(mnist, args.batch, 4)
            flow.data.OFRecordRawDecoder(records, "labels", shape=(), dtype=flow.int32)
            return flow.data.OFRecordRawDecoder(records, "images", shape=(1, 28, 28), dtype=flow.float)
        return raw
    if row == "mnist png":
        @flow.global_function(type="predict")
        def png() -> tp.Numpy:
            return mnist_png(mnist, args.batch)[0]
        return png

    @flow.global_function(type="predict")
    def jpeg() -> tp.Numpy:
        records = reader(jpegs, args.jpeg_batch, 1)
        image = flow.data.OFRecordImageDecoderRandomCrop(records, "encoded", color_space="RGB", seed=0)
        resized, _, _ = flow.image.Resize(image, target_size=(224, 224))
        mirror = flow.random.CoinFlip(batch_size=args.jpeg_batch, seed=0)
        return flow.image.CropMirrorNormalize(resized, mirror_blob=mirror, color_space="RGB", mean=MEAN, std=STD,
                                              output_layout="NHWC")
    return jpeg


def lenet(images):
    init = flow.kaiming_initializer(distribution="random_normal", mode="fan_in", nonlinearity="relu")
    conv1 = flow.layers.conv2d(images, 32, 5, padding="SAME", activation=flow.nn.relu, name="conv1",
                               kernel_initializer=init)
    pool1 = flow.nn.max_pool2d(conv1, ksize=2, strides=2, padding="SAME", name="pool1")
    conv2 = flow.layers.conv2d(pool1, 64, 5, padding="SAME", activation=flow.nn.relu, name="conv2",
                               kernel_initializer=init)
    pool2 = flow.nn.max_pool2d(conv2, ksize=2, strides=2, padding="SAME", name="pool2")
    hidden = flow.layers.dense(flow.reshape(pool2, [pool2.shape[0], -1]), 512, activation=flow.nn.relu,
                               kernel_initializer=init, name="dense1")
    return flow.layers.dense(hidden, 10, kernel_initializer=init, name="dense2")


def mnist_raw(folder: str, batch: int):
    records = reader(folder, batch, 4)
    images = flow.data.OFRecordRawDecoder(records, "images", shape=(1, 28, 28), dtype=flow.float)
    labels = flow.data.OFRecordRawDecoder(records, "labels", shape=(), dtype=flow.int32)
    return images, labels


def train_step(fed_by: str, mnist: str, batch: int) -> Callable[[], object]:
    flow.clear_default_session()
    sgd = flow.optimizer.PiecewiseConstantScheduler([], [0.05])
    if fed_by in FEEDS:
        @flow.global_function(type="train")
        def from_reader() -> tp.Numpy:
            images, labels = FEEDS[fed_by](mnist, batch)
            loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, lenet(images))
            flow.optimizer.SGD(sgd, momentum=0).minimize(loss)
            return loss
        return from_reader

    rng = np.random.default_rng(0)
    x = rng.random((batch, 1, 28, 28), dtype=np.float32)
    y = rng.integers(0, 10, batch).astype(np.int32)

    @flow.global_function(type="train")
    def from_arrays(images: tp.Numpy.Placeholder((batch, 1, 28, 28)),
                    labels: tp.Numpy.Placeholder((batch,), dtype=flow.int32)) -> tp.Numpy:
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, lenet(images))
        flow.optimizer.SGD(sgd, momentum=0).minimize(loss)
        return loss
    return lambda: from_arrays(x, y)


FEEDS = {"the MNIST PNG reader": mnist_png, "the MNIST raw reader": mnist_raw}
LENET_FEEDS = ("in-memory arrays (`tp.Numpy.Placeholder`)", *FEEDS)


def best_seconds(step: Callable[[], object], args: argparse.Namespace, steps: int) -> float:
    """The best, over rounds, of the mean seconds per step (warm-up steps first, untimed)."""
    best = float("inf")
    for _ in range(args.rounds):
        for _ in range(args.warmup):
            step()
        start = time.perf_counter()
        for _ in range(steps):
            step()
        best = min(best, (time.perf_counter() - start) / steps)
    return best


def main() -> None:
    args = _args()
    pool = image_pool.THREADS
    with tempfile.TemporaryDirectory() as tmp:
        mnist, jpegs = write_data(Path(tmp), args.mnist, args.jpegs if "readers" in args.rows else 0)
        if "readers" in args.rows:
            readers(mnist, jpegs, pool, args)
        if "lenet" in args.rows:
            lenet_steps(mnist, args)


def readers(mnist: str, jpegs: str, pool: int, args: argparse.Namespace) -> None:
    print(f"| workload | 1 thread | {pool} threads |")
    print("|---|---|---|")
    for row in ("mnist raw", "mnist png", "jpeg crop"):
        batch = args.jpeg_batch if row == "jpeg crop" else args.batch
        rates = []
        for threads in (1, pool):
            image_pool.THREADS = threads  # read by each batch's parallel_map
            rates.append(batch / best_seconds(build(row, mnist, jpegs, args), args, args.steps))
        image_pool.THREADS = pool
        print(f"| {row} | {rates[0]:,.0f} records/s | {rates[1]:,.0f} records/s |")
    print()


def lenet_steps(mnist: str, args: argparse.Namespace) -> None:
    """The LeNet step fed each way, the feeds taking turns round after round (a loaded machine slows them
    alike); the best round of each, and the process CPU time per step in that round."""
    best = {feed: (float("inf"), 0.0) for feed in LENET_FEEDS}
    for _ in range(args.rounds):
        for feed in LENET_FEEDS:
            step = train_step(feed, mnist, args.batch)
            for _ in range(args.warmup):
                step()
            wall, cpu = time.perf_counter(), time.process_time()
            for _ in range(args.steps):
                step()
            wall, cpu = (time.perf_counter() - wall) / args.steps, (time.process_time() - cpu) / args.steps
            best[feed] = min(best[feed], (wall, cpu))
    print(f"| LeNet training step, batch {args.batch}, fed by | ms/step | CPU ms/step |")
    print("|---|---|---|")
    for feed, (wall, cpu) in best.items():
        print(f"| {feed} | {wall * 1000:.1f} | {cpu * 1000:.1f} |")


if __name__ == "__main__":
    main()
