"""OFRecord image decoders, flow.image.Resize and CropMirrorNormalize in legacy jobs, on images the tests write."""
from __future__ import annotations

import io
from pathlib import Path
from typing import Tuple

import numpy as np
import pytest
from PIL import Image

import oneflow as flow
import oneflow.core.record.record_pb2 as ofrecord
import oneflow.typing as tp
from flowjob_core import OpBuildError
from flowjob_core.testing.modules import sibling
from flowjob_ofrecord import OFRecordError, write_part

fresh_session = sibling(__file__, "op_surface_helpers").fresh_session
SIZES = [(20, 30), (24, 18), (16, 16), (31, 27), (12, 40), (28, 22)]  # (height, width) of record i


def pixels(i: int) -> np.ndarray:
    h, w = SIZES[i]
    return np.random.default_rng(i).integers(0, 256, (h, w, 3), dtype=np.uint8)


def encode(array: np.ndarray, fmt: str) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(array).save(buf, format=fmt)
    return buf.getvalue()


def write_images(root: Path, fmt: str = "PNG") -> Path:
    records = [ofrecord.OFRecord(feature={
        "encoded": ofrecord.Feature(bytes_list=ofrecord.BytesList(value=[encode(pixels(i), fmt)])),
        "class/label": ofrecord.Feature(int32_list=ofrecord.Int32List(value=[i])),
    }) for i in range(len(SIZES))]
    write_part(root / "part-00000", records)
    return root


@pytest.fixture
def pngs(tmp_path: Path) -> str:
    return str(write_images(tmp_path / "png"))


def reader(folder: str, batch_size: int = 3, **kw):
    return flow.data.ofrecord_reader(folder, batch_size=batch_size, data_part_num=1, part_name_suffix_length=5, **kw)


@pytest.mark.parametrize("color_space", ["RGB", "BGR", "GRAY"])
def test_decode_and_resize_nearest_to_the_own_size_gives_the_pixels(tmp_path: Path, color_space: str) -> None:
    # all images 16x16 here, so resizing to 16x16 keeps them as decoded
    root = tmp_path / "same"
    images = [np.random.default_rng(i).integers(0, 256, (16, 16, 3), dtype=np.uint8) for i in range(3)]
    write_part(root / "part-00000", [ofrecord.OFRecord(feature={
        "encoded": ofrecord.Feature(bytes_list=ofrecord.BytesList(value=[encode(a, "PNG")]))}) for a in images])
    channels = 1 if color_space == "GRAY" else 3

    @flow.global_function()
    def read() -> tp.Numpy:
        image = flow.data.OFRecordImageDecoder(reader(str(root)), "encoded", color_space=color_space)
        out, scale, size = flow.image.Resize(image, target_size=(16, 16), channels=channels,
                                             interpolation_type="nearest_neighbor")
        assert size is None
        return out

    got = read()
    expect = np.stack(images)
    if color_space == "BGR":
        expect = expect[..., ::-1]
    if color_space == "GRAY":
        expect = np.stack([np.asarray(Image.fromarray(a).convert("L"))[:, :, None] for a in images])
    np.testing.assert_array_equal(got, expect)


def test_resize_gives_fixed_shapes_scales_and_uint8_range(pngs: str) -> None:
    @flow.global_function()
    def read() -> Tuple[tp.Numpy, tp.Numpy, tp.Numpy]:
        records = reader(pngs)
        image = flow.data.OFRecordImageDecoder(records, "encoded", color_space="RGB")
        out, scale, _ = flow.image.Resize(image, target_size=(24, 20))
        return out, scale, flow.data.OFRecordRawDecoder(records, "class/label", shape=(), dtype=flow.int32)

    for step in range(2):
        out, scale, labels = read()
        assert out.shape == (3, 20, 24, 3) and out.dtype == np.uint8
        np.testing.assert_array_equal(labels, np.arange(3) + 3 * step)
        expect = [(24 / SIZES[i][1], 20 / SIZES[i][0]) for i in labels]
        np.testing.assert_allclose(scale, np.array(expect, np.float32))
        for k, i in enumerate(labels):  # "auto": area averaging for images larger than the target, else bilinear
            h, w = SIZES[i]
            ref = np.asarray(Image.fromarray(pixels(i)).resize((24, 20), Image.BOX if 24 * 20 < w * h
                                                               else Image.BILINEAR))
            np.testing.assert_array_equal(out[k], ref)


def test_deprecated_arguments_return_the_images_alone(pngs: str) -> None:
    @flow.global_function()
    def read() -> tp.Numpy:
        image = flow.data.OFRecordImageDecoder(reader(pngs), "encoded")
        return flow.image.Resize(image, resize_x=8, resize_y=6, color_space="BGR", interp_type="Linear")

    with pytest.warns(DeprecationWarning):
        out = read()
    assert out.shape == (3, 6, 8, 3)


def test_random_crop_repeats_with_its_seed_and_stays_inside(tmp_path: Path) -> None:
    root = str(write_images(tmp_path / "jpeg", "JPEG"))

    def run() -> np.ndarray:
        flow.clear_default_session()

        @flow.global_function()
        def read() -> Tuple[tp.Numpy, tp.Numpy]:
            records = reader(root, batch_size=6)
            image = flow.data.OFRecordImageDecoderRandomCrop(records, "encoded", color_space="RGB", seed=5,
                                                             random_area=[0.2, 0.5])
            out, scale, _ = flow.image.Resize(image, target_size=(10, 10))
            return out, scale

        return np.concatenate([np.concatenate([o.ravel(), s.ravel()]) for o, s in (read(), read())])

    first = run()
    np.testing.assert_array_equal(first, run())
    scale = first[-12:].reshape(6, 2)  # the second step's scales: 10 / crop size, so crops within 0.2-0.5 of the area
    area = np.array([h * w for h, w in SIZES], np.float64)
    crop_area = (10 / scale[:, 0]) * (10 / scale[:, 1])
    assert np.all(crop_area <= area * 0.5 + 1e-3 * area + 2 * np.sqrt(area))  # rounding of width and height


def test_crop_mirror_normalize_matches_numpy() -> None:
    x = np.random.default_rng(0).integers(0, 256, (4, 10, 12, 3), dtype=np.uint8)
    mirror = np.array([1, 0, 0, 1], np.int8)
    mean, std = [123.68, 116.779, 103.939], [58.393, 57.12, 57.375]

    @flow.global_function()
    def cmn(images: tp.Numpy.Placeholder((4, 10, 12, 3), dtype=flow.uint8),
            flips: tp.Numpy.Placeholder((4,), dtype=flow.int8)) -> Tuple[tp.Numpy, tp.Numpy]:
        nchw = flow.image.CropMirrorNormalize(images, mirror_blob=flips, color_space="RGB", crop_h=6, crop_w=8,
                                              crop_pos_y=0.5, crop_pos_x=0.25, mean=mean, std=std)
        nhwc = flow.image.crop_mirror_normalize(images, output_layout="NHWC", mean=[10.0], std=[2.0])
        return nchw, nhwc

    nchw, nhwc = cmn(x, mirror)
    window = x[:, 2:8, 1:9, :].astype(np.float32)  # corner: int(0.5 * 4), int(0.25 * 4)
    window[mirror == 1] = window[mirror == 1][:, :, ::-1]
    expect = ((window - np.float32(mean)) * (np.float32(1) / np.float32(std))).transpose(0, 3, 1, 2)
    np.testing.assert_allclose(nchw, expect, rtol=1e-6, atol=1e-5)
    np.testing.assert_allclose(nhwc, (x.astype(np.float32) - 10) / 2, rtol=1e-6)


def test_a_documentation_style_pipeline(tmp_path: Path) -> None:
    root = str(write_images(tmp_path / "jpeg", "JPEG"))

    @flow.global_function(flow.function_config())
    def test_job() -> Tuple[tp.Numpy, tp.Numpy]:
        batch_size = 3
        color_space = "RGB"
        records = flow.data.ofrecord_reader(root, batch_size=batch_size, data_part_num=1,
                                            part_name_suffix_length=5, random_shuffle=True, shuffle_after_epoch=True)
        image = flow.data.OFRecordImageDecoderRandomCrop(records, "encoded", color_space=color_space)
        label = flow.data.OFRecordRawDecoder(records, "class/label", shape=(), dtype=flow.int32)
        with pytest.warns(DeprecationWarning, match="color_space is deprecated"):
            rsz = flow.image.Resize(image, resize_x=14, resize_y=14, color_space=color_space)
        normal = flow.image.CropMirrorNormalize(rsz, color_space=color_space, mean=[123.68, 116.779, 103.939],
                                                std=[58.393, 57.12, 57.375], output_dtype=flow.float)
        return normal, label

    images, labels = test_job()
    assert images.shape == (3, 3, 14, 14) and labels.shape == (3,)
    assert images.dtype == np.float32 and -2.2 < images.min() and images.max() < 2.7
    assert set(labels) <= set(range(6))


def test_undecodable_bytes_name_record_and_feature(tmp_path: Path) -> None:
    root = tmp_path / "bad"
    write_part(root / "part-00000", [ofrecord.OFRecord(feature={
        "encoded": ofrecord.Feature(bytes_list=ofrecord.BytesList(value=[b"not an image"])),
        "class/label": ofrecord.Feature(int32_list=ofrecord.Int32List(value=[0]))})])

    def job(feature: str):
        @flow.global_function()
        def read() -> tp.Numpy:
            image = flow.data.OFRecordImageDecoder(reader(str(root), batch_size=1), feature, name="dec")
            return flow.image.Resize(image, target_size=(4, 4))[0]
        return read

    with pytest.raises(OFRecordError, match="dec: feature 'encoded' of record 0 of .*part-00000' is not a decodable"):
        job("encoded")()
    flow.clear_default_session()
    with pytest.raises(OFRecordError, match="'class/label' of record 0 .* is a int32_list, not the bytes_list"):
        job("class/label")()
    flow.clear_default_session()
    cut = encode(pixels(0), "JPEG")[:200]  # a header, then the body stops
    write_part(root / "part-00000", [ofrecord.OFRecord(feature={
        "encoded": ofrecord.Feature(bytes_list=ofrecord.BytesList(value=[cut]))})])
    with pytest.raises(OFRecordError, match="dec: feature 'encoded' of record 0 of .*part-00000' is not a decodable"):
        job("encoded")()


def test_resize_needs_a_decoder_and_a_fixed_size(pngs: str) -> None:
    @flow.global_function()
    def not_decoded() -> tp.Numpy:
        return flow.image.Resize(reader(pngs), target_size=(4, 4))[0]

    with pytest.raises(OpBuildError, match="is not the output of flow.data.OFRecordImageDecoder"):
        not_decoded()

    @flow.global_function()
    def uncropped() -> tp.Numpy:
        image = flow.data.OFRecordImageDecoder(reader(pngs), "encoded")
        return flow.image.CropMirrorNormalize(flow.image.Resize(image, resize_shorter=8))

    with pytest.raises(OpBuildError, match="need crop_h and crop_w >= 1 to make one blob"):
        uncropped()


def expected_shorter_resize(i: int, shorter: int) -> np.ndarray:
    h, w = SIZES[i]
    scale = shorter / min(h, w)
    nh, nw = int(round(h * scale)), int(round(w * scale))
    method = Image.BOX if nh * nw < h * w else Image.BILINEAR  # "auto"
    return np.asarray(Image.fromarray(pixels(i)).resize((nw, nh), method))


def test_keep_aspect_ratio_then_a_centre_crop_as_the_benchmarks_validate(pngs: str) -> None:
    mean, std = [123.68, 116.779, 103.939], [58.393, 57.12, 57.375]

    @flow.global_function()
    def validate() -> Tuple[tp.Numpy, tp.Numpy]:
        records = reader(pngs)
        image = flow.data.OFRecordImageDecoder(records, "encoded", color_space="RGB")
        label = flow.data.OFRecordRawDecoder(records, "class/label", shape=(), dtype=flow.int32)
        rsz = flow.image.Resize(image, resize_shorter=16, color_space="RGB")
        normal = flow.image.CropMirrorNormalize(rsz, color_space="RGB", crop_h=14, crop_w=14, crop_pos_y=0.5,
                                                crop_pos_x=0.5, mean=mean, std=std, output_dtype=flow.float)
        return normal, label

    with pytest.warns(DeprecationWarning):
        for _ in range(2):
            got, labels = validate()
            assert got.shape == (3, 3, 14, 14)
            for k, i in enumerate(labels):
                resized = expected_shorter_resize(int(i), 16)
                h, w = resized.shape[:2]
                y0, x0 = int(0.5 * (h - 14)), int(0.5 * (w - 14))
                window = resized[y0:y0 + 14, x0:x0 + 14].astype(np.float32)
                expect = ((window - np.float32(mean)) * (np.float32(1) / np.float32(std))).transpose(2, 0, 1)
                np.testing.assert_allclose(got[k], expect, rtol=1e-5, atol=1e-5)


def test_keep_aspect_ratio_returns_scales_and_sizes(pngs: str) -> None:
    @flow.global_function()
    def read() -> Tuple[tp.Numpy, tp.Numpy, tp.Numpy]:
        records = reader(pngs, batch_size=6)
        image = flow.data.OFRecordImageDecoder(records, "encoded")
        handle, scale, size = flow.image.Resize(image, target_size=20, keep_aspect_ratio=True, resize_side="longer",
                                                min_size=15)
        return scale, size, flow.image.CropMirrorNormalize(handle, crop_h=10, crop_w=10)

    scale, size, _ = read()

    @flow.global_function()
    def target() -> Tuple[tp.Numpy, tp.Numpy]:
        image = flow.data.OFRecordImageDecoder(reader(pngs, batch_size=6), "encoded")
        resized, new_size, new_scale = flow.image.target_resize(image, target_size=20, min_size=15,
                                                                resize_side="longer")
        return new_size, new_scale

    np.testing.assert_array_equal(target()[0], size)  # legacy's order: images, sizes, scales
    for i, (h, w) in enumerate(SIZES):
        s = max(20 / max(h, w), 15 / min(h, w))  # the longer side to 20 unless the shorter falls below 15
        nh, nw = round(h * s), round(w * s)
        assert tuple(size[i]) == (nw, nh)
        np.testing.assert_allclose(scale[i], [nw / w, nh / h], rtol=1e-6)


def test_a_crop_larger_than_an_image_names_it(pngs: str) -> None:
    @flow.global_function()
    def read() -> tp.Numpy:
        image = flow.data.OFRecordImageDecoder(reader(pngs), "encoded")
        return flow.image.CropMirrorNormalize(image, crop_h=25, crop_w=10, name="cmn")

    with pytest.raises(OFRecordError, match=r"cmn_crop: the 20x30 image of record 0 of .* is smaller than the 25x10"):
        read()


def test_bytes_decoder_and_image_decoder_random_crop_resize(tmp_path: Path) -> None:
    root = tmp_path / "same"
    images = [np.random.default_rng(i).integers(0, 256, (16, 24, 3), dtype=np.uint8) for i in range(4)]
    write_part(root / "part-00000", [ofrecord.OFRecord(feature={
        "encoded": ofrecord.Feature(bytes_list=ofrecord.BytesList(value=[encode(a, "PNG")]))}) for a in images])

    @flow.global_function()
    def whole() -> tp.Numpy:
        encoded = flow.data.OFRecordBytesDecoder(reader(str(root), batch_size=4), "encoded")
        # an area of 1 at the images' own aspect ratio: the crop is the whole image
        return flow.data.ImageDecoderRandomCropResize(encoded, target_width=12, target_height=8,
                                                      random_area=[1.0, 1.0], random_aspect_ratio=[1.5, 1.5])

    expect = np.stack([np.asarray(Image.fromarray(a).resize((12, 8), Image.BOX)) for a in images])
    np.testing.assert_array_equal(whole(), expect)

    def cropped() -> np.ndarray:
        flow.clear_default_session()

        @flow.global_function()
        def read() -> tp.Numpy:
            encoded = flow.data.ofrecord_bytes_decoder(reader(str(root), batch_size=4), "encoded")
            return flow.data.image_decoder_random_crop_resize(encoded, 10, 10, seed=3, num_workers=3)

        return np.stack([read(), read()])

    first = cropped()
    assert first.shape == (2, 4, 10, 10, 3) and first.dtype == np.uint8
    np.testing.assert_array_equal(first, cropped())


def test_the_crop_resize_decoder_needs_a_bytes_decoder(pngs: str) -> None:
    @flow.global_function()
    def read() -> tp.Numpy:
        return flow.data.ImageDecoderRandomCropResize(reader(pngs), target_width=4, target_height=4)

    with pytest.raises(OpBuildError, match="is not the output of flow.data.OFRecordBytesDecoder"):
        read()
