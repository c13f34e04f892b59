"""``python -m oneflow data folder --src FOLDER --ofrecord DIR``: an ImageNet-style folder as OFRecord parts."""
from __future__ import annotations

import io
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

fresh_session = sibling(__file__, "op_surface_helpers").fresh_session
CLASSES = ["n01440764", "n01443537", "n01484850"]


def image_folder(root: Path) -> dict[str, tuple[bytes, int]]:
    """Three class folders of small JPEGs (sizes differ); file name -> (bytes, label)."""
    files = {}
    for label, name in enumerate(CLASSES):
        (root / name).mkdir(parents=True)
        for k in range(4 + label):
            array = np.random.default_rng(10 * label + k).integers(0, 256, (20 + 3 * k, 26 + label, 3), np.uint8)
            buf = io.BytesIO()
            Image.fromarray(array).save(buf, format="JPEG")
            fname = f"{name}_{k}.JPEG"
            (root / name / fname).write_bytes(buf.getvalue())
            files[fname] = (buf.getvalue(), label)
    (root / "README.txt").write_text("not a class")  # a file beside the classes is skipped
    return files


def convert(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "oneflow", "data", "folder", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300)


def test_the_folder_becomes_parts_holding_every_image_once(tmp_path: Path) -> None:
    files = image_folder(tmp_path / "train")
    proc = convert(tmp_path, "--src", "train", "--ofrecord", "ofrecord/train", "--parts", "2")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["ofrecord/train/part-00000", "ofrecord/train/part-00001"]
    out = tmp_path / "ofrecord" / "train"
    assert sorted(p.name for p in out.iterdir()) == ["labels.txt", "part-00000", "part-00001"]
    assert (out / "labels.txt").read_text().split() == CLASSES
    seen = {}
    for part in ("part-00000", "part-00001"):
        for record in iter_records(out / part):
            name = record.feature["filename"].bytes_list.value[0].decode()
            feature = record.feature
            seen[name] = (feature["encoded"].bytes_list.value[0], feature["class/label"].int32_list.value[0])
    assert seen == files


def test_a_benchmark_style_job_reads_the_converted_folder(tmp_path: Path) -> None:
    image_folder(tmp_path / "train")
    assert convert(tmp_path, "--src", "train", "--ofrecord", "ofrecord").returncode == 0

    @flow.global_function(type="predict")
    def load() -> Tuple[tp.Numpy, tp.Numpy]:
        ofrecord = flow.data.ofrecord_reader(str(tmp_path / "ofrecord"), batch_size=4, data_part_num=1,
                                             part_name_suffix_length=5, random_shuffle=True, shuffle_after_epoch=True)
        image = flow.data.OFRecordImageDecoderRandomCrop(ofrecord, "encoded", color_space="RGB")
        label = flow.data.OFRecordRawDecoder(ofrecord, "class/label", shape=(), dtype=flow.int32)
        rsz, scale, new_size = flow.image.Resize(image, target_size=(16, 16))
        normal = flow.image.CropMirrorNormalize(rsz, color_space="RGB", output_layout="NCHW",
                                                mean=[123.68, 116.779, 103.939], std=[58.393, 57.12, 57.375],
                                                output_dtype=flow.float)
        return normal, label

    for _ in range(4):  # 15 images: the fourth batch wraps into the next epoch
        images, labels = load()
        assert images.shape == (4, 3, 16, 16) and images.dtype == np.float32
        assert set(labels.tolist()) <= {0, 1, 2}
        assert -2.2 < images.min() and images.max() < 2.7


def test_a_missing_folder_is_named(tmp_path: Path) -> None:
    proc = convert(tmp_path, "--src", "nowhere", "--ofrecord", "out")
    assert proc.returncode == 2 and "image folder 'nowhere' does not exist" in proc.stderr
    proc = convert(tmp_path, "--ofrecord", "out")
    assert proc.returncode != 0 and "needs --src FOLDER and --ofrecord DIR" in proc.stderr


@pytest.mark.parametrize("parts", ["0", "99"])
def test_part_counts_outside_the_images_are_refused(tmp_path: Path, parts: str) -> None:
    image_folder(tmp_path / "train")
    proc = convert(tmp_path, "--src", "train", "--ofrecord", "out", "--parts", parts)
    assert proc.returncode == 2 and "parts must be an int in [1, 15]" in proc.stderr


def test_the_benchmarks_training_and_validation_loaders(tmp_path: Path) -> None:
    """As OneFlow-Benchmark v0.4's ofrecord_util reads ImageNet: random crop, resize, coin-flip mirror and
    normalize for training; the shorter side resized, a centre crop and normalize for validation."""
    image_folder(tmp_path / "train")
    assert convert(tmp_path, "--src", "train", "--ofrecord", "ofrecord", "--parts", "3").returncode == 0
    mean, std = [123.68, 116.779, 103.939], [58.393, 57.12, 57.375]

    @flow.global_function(type="predict")
    def train_loader() -> Tuple[tp.Numpy, tp.Numpy]:
        ofrecord = flow.data.ofrecord_reader(str(tmp_path / "ofrecord"), batch_size=6, data_part_num=3,
                                             part_name_suffix_length=5, random_shuffle=True, shuffle_after_epoch=True)
        image = flow.data.OFRecordImageDecoderRandomCrop(ofrecord, "encoded", color_space="RGB")
        label = flow.data.OFRecordRawDecoder(ofrecord, "class/label", shape=(), dtype=flow.int32)
        rsz = flow.image.Resize(image, resize_x=12, resize_y=12, color_space="RGB")
        rng = flow.random.CoinFlip(batch_size=6)
        normal = flow.image.CropMirrorNormalize(rsz, mirror_blob=rng, color_space="RGB", output_layout="NHWC",
                                                crop_h=10, crop_w=10, crop_pos_y=0.5, crop_pos_x=0.5,
                                                mean=mean, std=std, output_dtype=flow.float)
        return label, normal

    @flow.global_function(type="predict")
    def val_loader() -> Tuple[tp.Numpy, tp.Numpy]:
        ofrecord = flow.data.ofrecord_reader(str(tmp_path / "ofrecord"), batch_size=5, data_part_num=3,
                                             part_name_suffix_length=5)
        image = flow.data.OFRecordImageDecoder(ofrecord, "encoded", color_space="RGB")
        label = flow.data.OFRecordRawDecoder(ofrecord, "class/label", shape=(), dtype=flow.int32)
        rsz = flow.image.Resize(image, resize_shorter=14, color_space="RGB")
        normal = flow.image.CropMirrorNormalize(rsz, color_space="RGB", crop_h=12, crop_w=12, crop_pos_y=0.5,
                                                crop_pos_x=0.5, mean=mean, std=std, output_dtype=flow.float)
        return label, normal

    with pytest.warns(DeprecationWarning):
        labels, images = train_loader()
        assert images.shape == (6, 10, 10, 3) and labels.shape == (6,)
        seen = []
        for _ in range(3):  # 15 records in 3 parts: one epoch, each record once
            labels, images = val_loader()
            assert images.shape == (5, 3, 12, 12)
            seen += labels.tolist()
    assert sorted(seen) == [0] * 4 + [1] * 5 + [2] * 6
