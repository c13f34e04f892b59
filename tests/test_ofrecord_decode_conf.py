"""Legacy's older OFRecord API: flow.data.decode_ofrecord with BlobConf and its codecs, and ofrecord_loader."""
from __future__ import annotations

import io
from pathlib import Path
from typing import Tuple

import numpy as np
import pytest
from PIL import Image

import oneflow as flow
import oneflow.core.record.record_pb2 as ofrecord
import oneflow.typing as oft
from flowjob_core import OpBuildError
from flowjob_core.testing.modules import sibling
from flowjob_ofrecord import write_part

fresh_session = sibling(__file__, "op_surface_helpers").fresh_session


def mnist_like(root: Path, n: int = 5) -> list[np.ndarray]:
    """The documentation's how_to_make_ofdataset records: images as floats, labels as int64, plus a PNG."""
    images = [np.random.default_rng(i).integers(0, 256, (28, 28), dtype=np.uint8) for i in range(n)]
    records = []
    for i, image in enumerate(images):
        png = io.BytesIO()
        Image.fromarray(np.stack([image] * 3, -1)).save(png, format="PNG")
        records.append(ofrecord.OFRecord(feature={
            "images": ofrecord.Feature(float_list=ofrecord.FloatList(value=(image / 255.0).ravel())),
            "labels": ofrecord.Feature(int64_list=ofrecord.Int64List(value=[i])),
            "encoded": ofrecord.Feature(bytes_list=ofrecord.BytesList(value=[png.getvalue()])),
        }))
    write_part(root / "part-0", records)
    return images


def test_the_documentation_decode_ofrecord_program(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    images = mnist_like(tmp_path / "dataset")
    monkeypatch.chdir(tmp_path)

    def get_train_config():
        config = flow.function_config()
        config.default_data_type(flow.float)
        return config

    @flow.global_function(get_train_config())
    def train_job() -> Tuple[oft.Numpy, oft.Numpy]:
        images = flow.data.BlobConf("images", shape=(28, 28, 1), dtype=flow.float, codec=flow.data.RawCodec())
        labels = flow.data.BlobConf("labels", shape=(1, 1), dtype=flow.int32, codec=flow.data.RawCodec())
        return flow.data.decode_ofrecord("./dataset/", (images, labels), data_part_num=1, batch_size=3)

    f0, f1 = train_job()
    assert f0.shape == (3, 28, 28, 1) and f1.shape == (3, 1, 1)
    np.testing.assert_array_equal(f0[..., 0], (np.stack(images[:3]) / 255.0).astype(np.float32))
    np.testing.assert_array_equal(f1.ravel(), [0, 1, 2])


@pytest.mark.parametrize("data_format", ["channels_last", "channels_first"])
def test_image_codec_resizes_and_normalizes(tmp_path: Path, data_format: str) -> None:
    images = mnist_like(tmp_path / "d")
    shape = (28, 28, 3) if data_format == "channels_last" else (3, 28, 28)

    @flow.global_function()
    def read() -> oft.Numpy:
        conf = flow.data.BlobConf(
            "encoded", shape=shape, dtype=flow.float,
            codec=flow.data.ImageCodec([flow.data.ImagePreprocessor("bgr2rgb"),
                                        flow.data.ImageResizePreprocessor(28, 28)]),
            preprocessors=[flow.data.NormByChannelPreprocessor((10.0, 20.0, 30.0), (2.0, 4.0, 5.0), data_format)])
        (out,) = flow.data.decode_ofrecord(str(tmp_path / "d"), [conf], batch_size=2)
        return out

    got = read()
    expect = (np.stack([np.stack([a] * 3, -1) for a in images[:2]]).astype(np.float32) - [10, 20, 30]) / [2, 4, 5]
    if data_format == "channels_first":
        expect = expect.transpose(0, 3, 1, 2)
    np.testing.assert_allclose(got, expect, rtol=1e-6)


def test_unprovided_codecs_and_preprocessors_are_named(tmp_path: Path) -> None:
    mnist_like(tmp_path / "d")

    @flow.global_function()
    def bytes_list() -> oft.Numpy:
        conf = flow.data.BlobConf("encoded", shape=(1,), dtype=flow.int8, codec=flow.data.BytesListCodec())
        return flow.data.decode_ofrecord(str(tmp_path / "d"), [conf])[0]

    with pytest.raises(OpBuildError, match="codec BytesListCodec gives blobs of differing sizes"):
        bytes_list()

    @flow.global_function()
    def other() -> oft.Numpy:
        codec = flow.data.ImageCodec([flow.data.NormByChannelPreprocessor([0.0])])
        conf = flow.data.BlobConf("encoded", shape=(28, 28, 3), dtype=flow.uint8, codec=codec)
        return flow.data.decode_ofrecord(str(tmp_path / "d"), [conf])[0]

    with pytest.raises(OpBuildError, match="NormByChannelPreprocessor is not an image preprocessor"):
        other()


def test_the_mirror_preprocessor_flips_about_half_the_images(tmp_path: Path) -> None:
    images = mnist_like(tmp_path / "d", n=8)

    @flow.global_function()
    def read() -> oft.Numpy:
        codec = flow.data.ImageCodec([flow.data.ImageResizePreprocessor(28, 28), flow.data.ImagePreprocessor("mirror")])
        conf = flow.data.BlobConf("encoded", shape=(28, 28, 3), dtype=flow.float, codec=codec)
        return flow.data.decode_ofrecord(str(tmp_path / "d"), [conf], batch_size=8)[0]

    flipped = 0
    for _ in range(8):
        got = read()[..., 0]
        for k, image in enumerate(images):
            same, mirrored = np.array_equal(got[k], image), np.array_equal(got[k], image[:, ::-1])
            assert same or mirrored
            flipped += mirrored and not same
    assert 16 <= flipped <= 48  # 64 fair coins


def test_ofrecord_loader_is_the_reader(tmp_path: Path) -> None:
    mnist_like(tmp_path / "d")

    @flow.global_function()
    def read() -> oft.Numpy:
        records = flow.data.ofrecord_loader(str(tmp_path / "d"), batch_size=4)
        return flow.data.OFRecordRawDecoder(records, "labels", shape=(), dtype=flow.int64)

    np.testing.assert_array_equal(read(), [0, 1, 2, 3])
    np.testing.assert_array_equal(read(), [4, 0, 1, 2])
