"""``python -m oneflow data mnist --ofrecord DIR --layout flat|img2ofrecord``: the two folders the legacy
documentation's OFRecord programs read (of_data_pipeline.py: ``part-00000`` holding ``encoded`` and
``class/label``; img_to_ofrecord/lenet_train.py: ``part-0`` ... ``part-4`` holding ``images`` and ``labels``,
as its img2ofrecord.py writes them), checked feature by feature and read by jobs of those programs' shape."""
from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path
from typing import Tuple

import numpy as np
import pytest
from PIL import Image

import oneflow as flow
import oneflow.typing as tp
from flowjob_core.testing.modules import sibling
from flowjob_ofrecord import iter_records

synthetic_mnist = sibling(__file__, "test_ofrecord_mnist").synthetic_mnist
fresh_session = sibling(__file__, "op_surface_helpers").fresh_session
N_TRAIN, N_TEST = 96, 32  # what synthetic_mnist writes


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, FLOWJOB_DATA_HOME=str(cwd / "no-cache"))  # only the local mnist.npz may be used
    return subprocess.run([sys.executable, "-m", "oneflow", "data", "mnist", "--out-dir", ".", *args], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def mnist(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, np.ndarray]]:
    root = tmp_path_factory.mktemp("mnist_layouts")
    return root, synthetic_mnist(root)


def records_of(folder: Path, names: list[str]) -> list:
    assert sorted(p.name for p in folder.iterdir()) == sorted(names)  # nothing else, nothing left beside
    return [r for name in names for r in iter_records(folder / name)]


def png_pixels(value: bytes) -> np.ndarray:
    image = Image.open(io.BytesIO(value))
    assert image.format == "PNG"
    return np.asarray(image)


def test_flat_writes_one_split_as_the_pipeline_program_reads_it(mnist) -> None:
    root, arrays = mnist
    proc = cli(root, "--ofrecord", "path/to/ImageNet/ofrecord", "--layout", "flat")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "path/to/ImageNet/ofrecord/part-00000"
    records = records_of(root / "path/to/ImageNet/ofrecord", ["part-00000"])
    assert len(records) == N_TRAIN
    for i, record in enumerate(records):
        assert sorted(record.feature) == ["class/label", "encoded"]
        assert record.feature["encoded"].WhichOneof("kind") == "bytes_list"
        assert record.feature["class/label"].WhichOneof("kind") == "int32_list"
        np.testing.assert_array_equal(png_pixels(record.feature["encoded"].bytes_list.value[0]), arrays["x_train"][i])
        assert list(record.feature["class/label"].int32_list.value) == [arrays["y_train"][i]]


def test_flat_test_split_in_parts(mnist) -> None:
    root, arrays = mnist
    proc = cli(root, "--ofrecord", "flat_test", "--layout", "flat", "--split", "test", "--parts", "3")
    assert proc.returncode == 0, proc.stderr
    records = records_of(root / "flat_test", ["part-00000", "part-00001", "part-00002"])
    assert [r.feature["class/label"].int32_list.value[0] for r in records] == arrays["y_test"].tolist()


def test_fewer_parts_over_an_earlier_data_set_replace_it_whole(mnist) -> None:
    root, arrays = mnist
    (root / "replaced").mkdir()
    (root / "replaced" / "notes.txt").write_text("kept: not a part of the data set\n")
    assert cli(root, "--ofrecord", "replaced", "--layout", "flat", "--split", "test", "--parts", "3").returncode == 0
    proc = cli(root, "--ofrecord", "replaced", "--layout", "flat", "--split", "test", "--parts", "2")
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in (root / "replaced").iterdir()) == ["notes.txt", "part-00000", "part-00001"]
    (root / "replaced" / "notes.txt").unlink()  # records_of reads a folder of parts only
    records = records_of(root / "replaced", ["part-00000", "part-00001"])
    assert [r.feature["class/label"].int32_list.value[0] for r in records] == arrays["y_test"].tolist()


def test_img2ofrecord_writes_five_unpadded_parts_of_images_and_labels(mnist) -> None:
    root, arrays = mnist
    proc = cli(root, "--ofrecord", "dataset", "--layout", "img2ofrecord")
    assert proc.returncode == 0, proc.stderr
    names = [f"part-{n}" for n in range(5)]
    assert proc.stdout.splitlines()[-5:] == [f"dataset/{name}" for name in names]
    records = records_of(root / "dataset", names)
    assert len(records) == N_TRAIN
    for i, record in enumerate(records):
        assert sorted(record.feature) == ["images", "labels"]
        assert record.feature["images"].WhichOneof("kind") == "bytes_list"
        assert record.feature["labels"].WhichOneof("kind") == "int32_list"
        np.testing.assert_array_equal(png_pixels(record.feature["images"].bytes_list.value[0]), arrays["x_train"][i])
        assert list(record.feature["labels"].int32_list.value) == [arrays["y_train"][i]]


def test_raw_features_clash_with_the_img2ofrecord_names(mnist) -> None:
    root, _ = mnist
    proc = cli(root, "--ofrecord", "clash", "--layout", "img2ofrecord", "--raw")
    assert proc.returncode == 2
    assert "python -m oneflow data mnist: raw records add float 'images'" in proc.stderr
    assert not (root / "clash").exists()


def test_a_part_count_beyond_the_split_is_refused(mnist) -> None:
    root, _ = mnist
    proc = cli(root, "--ofrecord", "toomany", "--layout", "flat", "--split", "test", "--parts", str(N_TEST + 1))
    assert proc.returncode == 2 and f"parts must be an int in [1, {N_TEST}]" in proc.stderr


def test_the_pipeline_programs_job_reads_the_flat_folder(mnist) -> None:
    """of_data_pipeline.py's job: RGB random crops of the grayscale PNGs, resized, coin-flip mirrored and
    normalized with the ImageNet mean and std."""
    root, arrays = mnist
    assert cli(root, "--ofrecord", "pipeline", "--layout", "flat").returncode == 0
    batch_size = 32
    mean, std = [123.68, 116.779, 103.939], [58.393, 57.12, 57.375]

    @flow.global_function(type="predict")
    def test_job() -> Tuple[tp.Numpy, tp.Numpy]:
        with flow.scope.placement("cpu", "0:0"):
            ofrecord = flow.data.ofrecord_reader(str(root / "pipeline"), batch_size=batch_size, data_part_num=1,
                                                 part_name_suffix_length=5, random_shuffle=True,
                                                 shuffle_after_epoch=True)
            image = flow.data.OFRecordImageDecoderRandomCrop(ofrecord, "encoded", color_space="RGB")
            label = flow.data.OFRecordRawDecoder(ofrecord, "class/label", shape=(), dtype=flow.int32)
            rsz = flow.image.Resize(image, resize_x=56, resize_y=56, color_space="RGB")
            rng = flow.random.CoinFlip(batch_size=batch_size)
            normal = flow.image.CropMirrorNormalize(rsz, mirror_blob=rng, color_space="RGB", mean=mean, std=std,
                                                    output_dtype=flow.float)
            return normal, label

    labels = []
    with pytest.warns(DeprecationWarning, match="color_space is deprecated"):
        for _ in range(N_TRAIN // batch_size):  # about one epoch (the shuffle buffer mixes epochs)
            images, label = test_job()
            assert images.shape == (batch_size, 3, 56, 56) and images.dtype == np.float32
            assert label.shape == (batch_size,) and label.dtype == np.int32
            # gray pixels as RGB: the three channels differ only by the per-channel mean and std
            pixels = images * np.float32(std).reshape(1, 3, 1, 1) + np.float32(mean).reshape(1, 3, 1, 1)
            np.testing.assert_allclose(pixels[:, 1], pixels[:, 0], atol=1e-3)
            np.testing.assert_allclose(pixels[:, 2], pixels[:, 0], atol=1e-3)
            assert -1e-3 <= pixels.min() and pixels.max() <= 255 + 1e-3
            labels += label.tolist()
    assert set(labels) <= set(arrays["y_train"].tolist()) and len(set(labels)) >= 8


def test_the_lenet_programs_decoding_trains_from_the_img2ofrecord_folder(mnist) -> None:
    """img_to_ofrecord/lenet_train.py's data: five unpadded parts, GRAY near-whole random crops of ``images``,
    (batch, 1) int32 ``labels``, Resize to 28x28 with channels=1 and normalize by 255, feeding a train job."""
    root, _ = mnist
    assert cli(root, "--ofrecord", "lenet_dataset", "--layout", "img2ofrecord").returncode == 0
    batch_size = 24

    def ofrecord_decode():
        ofrecord = flow.data.ofrecord_reader(str(root / "lenet_dataset"), batch_size=batch_size, data_part_num=5,
                                             part_name_suffix_length=-1, random_shuffle=True,
                                             shuffle_after_epoch=True)
        image = flow.data.OFRecordImageDecoderRandomCrop(ofrecord, "images", color_space="GRAY",
                                                         random_area=(0.95, 1.0), random_aspect_ratio=(0.99, 1.0))
        labels = flow.data.OFRecordRawDecoder(ofrecord, "labels", shape=(1,), dtype=flow.int32)
        rsz, scale, new_size = flow.image.Resize(image, target_size=(28, 28), channels=1)
        normal = flow.image.CropMirrorNormalize(rsz, color_space="GRAY", mean=[0.0], std=[255.0],
                                                output_dtype=flow.float)
        return normal, labels

    @flow.global_function(type="train")
    def train_job() -> Tuple[tp.Numpy, tp.Numpy, tp.Numpy]:
        images, labels = ofrecord_decode()
        flat = flow.reshape(images, [batch_size, -1])
        logits = flow.layers.dense(flat, 10, kernel_initializer=flow.zeros_initializer(), name="dense")
        loss = flow.math.reduce_mean(flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))
        flow.optimizer.Adam(flow.optimizer.PiecewiseConstantScheduler([], [0.01])).minimize(loss)
        return loss, images, labels

    losses = []
    for _ in range(40):
        loss, images, labels = train_job()
        assert images.shape == (batch_size, 1, 28, 28) and 0.0 <= images.min() and images.max() <= 1.0
        assert labels.shape == (batch_size, 1) and labels.dtype == np.int32
        losses.append(float(loss))
    assert losses[0] == pytest.approx(np.log(10), rel=1e-5)  # zero weights: uniform logits
    assert np.mean(losses[-5:]) < 0.5 * losses[0], losses
