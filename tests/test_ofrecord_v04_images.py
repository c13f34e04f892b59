"""Legacy v0.4's remaining OFRecord image names, on images the tests write:
flow.data.ofrecord_image_classification_reader, the tensor-buffer image ops on this design's handles
(flow.image.decode, flip, random_crop, normalize, batch_align and their flow.image_* spellings), and
flow.fixed_placement / flow.device_prior_placement."""
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
ALIGNED = (32, 48, 3)  # the largest height 31 and width 40, rounded up to multiples of 16


def pixels(i: int) -> np.ndarray:
    h, w = SIZES[i]
    return np.random.default_rng(i).integers(0, 256, (h, w, 3), dtype=np.uint8)


def png(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(array).save(buf, format="PNG")
    return buf.getvalue()


@pytest.fixture
def folder(tmp_path: Path) -> str:
    write_part(tmp_path / "part-0", [ofrecord.OFRecord(feature={
        "encoded": ofrecord.Feature(bytes_list=ofrecord.BytesList(value=[png(pixels(i))])),
        "class/label": ofrecord.Feature(int32_list=ofrecord.Int32List(value=[10 + i])),
    }) for i in range(len(SIZES))])
    return str(tmp_path)


def reader(root: str, batch_size: int = 3):
    return flow.data.ofrecord_reader(root, batch_size=batch_size, data_part_num=1, part_name_suffix_length=-1)


def padded(arrays: list[np.ndarray], shape: tuple[int, ...] = ALIGNED, dtype=np.uint8) -> np.ndarray:
    out = np.zeros((len(arrays), *shape), dtype)
    for k, a in enumerate(arrays):
        out[k, :a.shape[0], :a.shape[1]] = a
    return out


# ofrecord_image_classification_reader

@pytest.mark.parametrize("threads", [None, 1, 2])
def test_classification_reader_gives_decoded_images_and_int32_labels(folder: str, threads) -> None:
    @flow.global_function(type="predict")
    def job() -> Tuple[tp.Numpy, tp.Numpy, tp.Numpy]:
        image, label = flow.data.ofrecord_image_classification_reader(
            folder, image_feature_name="encoded", label_feature_name="class/label", batch_size=3,
            color_space="RGB", decode_buffer_size_per_thread=16, num_decode_threads_per_machine=threads)
        resized, scale, new_size = flow.image.Resize(image, target_size=(16, 12), interpolation_type="nearest_neighbor")
        assert new_size is None
        return resized, label, flow.image.batch_align(image, shape=(31, 40, 3), dtype=flow.uint8, alignment=16)

    for step in range(2):
        resized, label, aligned = job()
        ids = list(range(3 * step, 3 * step + 3))
        assert label.dtype == np.int32 and label.tolist() == [10 + i for i in ids]
        np.testing.assert_array_equal(aligned, padded([pixels(i) for i in ids]))
        ref = [np.asarray(Image.fromarray(pixels(i)).resize((16, 12), Image.NEAREST)) for i in ids]
        np.testing.assert_array_equal(resized, np.stack(ref))


def test_classification_reader_defaults_to_bgr_and_shuffles_with_a_seed(folder: str) -> None:
    def labels_and_images() -> tuple[list[int], np.ndarray]:
        flow.clear_default_session()

        @flow.global_function(type="predict")
        def job() -> Tuple[tp.Numpy, tp.Numpy]:
            image, label = flow.data.ofrecord_image_classification_reader(
                folder, "encoded", "class/label", batch_size=6, random_shuffle=True, seed=3)
            return flow.image_batch_align(image, shape=(31, 40, 3), dtype=flow.uint8, alignment=1), label

        aligned, label = job()
        return label.tolist(), aligned

    labels, aligned = labels_and_images()
    assert set(labels) <= set(range(10, 16)) and labels != sorted(labels)  # the buffer reaches into the next epoch
    assert labels == labels_and_images()[0]
    np.testing.assert_array_equal(aligned, padded([pixels(i - 10)[..., ::-1] for i in labels], (31, 40, 3)))


def test_classification_reader_checks_its_arguments(folder: str) -> None:
    with pytest.raises(ValueError, match="decode_buffer_size_per_thread"):
        @flow.global_function()
        def bad_buffer() -> tp.Numpy:
            return flow.data.ofrecord_image_classification_reader(folder, "encoded", "class/label",
                                                                  decode_buffer_size_per_thread=0)[1]
        bad_buffer()
    with pytest.raises(ValueError, match="num_decode_threads_per_machine"):
        @flow.global_function()
        def bad_threads() -> tp.Numpy:
            return flow.data.ofrecord_image_classification_reader(folder, "encoded", "class/label",
                                                                  num_decode_threads_per_machine=-1)[1]
        bad_threads()


# the image ops on handles

def test_decode_of_bytes_and_batch_align_give_the_pixels_zero_padded(folder: str) -> None:
    @flow.global_function()
    def job() -> Tuple[tp.Numpy, tp.Numpy]:
        data = flow.data.OFRecordBytesDecoder(reader(folder), "encoded")
        rgb = flow.image.decode(data, color_space="RGB")
        gray = flow.image_decode(data, dtype=flow.uint8, color_space="GRAY")
        return (flow.image.batch_align(rgb, shape=(31, 40, 3), dtype=flow.float, alignment=16),
                flow.image.batch_align(gray, shape=(31, 40, 1), dtype=flow.uint8, alignment=8))

    rgb, gray = job()
    assert rgb.dtype == np.float32 and rgb.shape == (3, *ALIGNED)
    np.testing.assert_array_equal(rgb, padded([pixels(i) for i in range(3)], dtype=np.float32))
    ref = [np.asarray(Image.fromarray(pixels(i)).convert("L"))[:, :, None] for i in range(3)]
    np.testing.assert_array_equal(gray, padded(ref, (32, 40, 1)))


@pytest.mark.parametrize("code", [0, 1, 16, 17])
def test_flip_codes_match_numpy(folder: str, code: int) -> None:
    @flow.global_function()
    def job() -> tp.Numpy:
        image = flow.data.OFRecordImageDecoder(reader(folder), "encoded", color_space="RGB")
        return flow.image_batch_align(flow.image.flip(image, code), shape=(31, 40, 3), dtype=flow.uint8,
                                      alignment=16)

    flips = {0: lambda a: a, 1: lambda a: a[:, ::-1], 16: lambda a: a[::-1], 17: lambda a: a[::-1, ::-1]}
    np.testing.assert_array_equal(job(), padded([flips[code](pixels(i)) for i in range(3)]))


def test_normalize_gives_float_images_per_channel(folder: str) -> None:
    mean, std = [123.68, 116.779, 103.939], [58.393, 57.12, 57.375]

    @flow.global_function()
    def job() -> tp.Numpy:
        image = flow.data.OFRecordImageDecoder(reader(folder), "encoded", color_space="RGB")
        return flow.image.batch_align(flow.image_normalize(image, std, mean), shape=(31, 40, 3), dtype=flow.float,
                                      alignment=16)

    ref = [(pixels(i).astype(np.float32) - np.float32(mean)) * (1 / np.float64(std)).astype(np.float32)
           for i in range(3)]
    np.testing.assert_allclose(job(), padded(ref, dtype=np.float32), rtol=1e-6, atol=1e-6)


def test_random_crop_repeats_with_its_seed_and_cuts_windows_of_the_image(folder: str) -> None:
    def crops() -> tuple[np.ndarray, np.ndarray]:
        flow.clear_default_session()

        @flow.global_function()
        def job() -> Tuple[tp.Numpy, tp.Numpy]:
            image = flow.data.OFRecordImageDecoder(reader(folder, batch_size=6), "encoded", color_space="RGB")
            crop = flow.image.random_crop(image, seed=7, random_area=[0.2, 0.5])
            resized, _, size = flow.image.Resize(crop, target_size=1000, keep_aspect_ratio=True, max_size=1000)
            return flow.image.batch_align(crop, shape=(31, 40, 3), dtype=flow.uint8, alignment=1), size

        return job()

    aligned, size = crops()
    again, _ = crops()
    np.testing.assert_array_equal(aligned, again)
    for i in range(6):  # each crop is a window of its image, of a fifth to a half of the area (rounding aside)
        h, w = SIZES[i]
        window = aligned[i]
        rows, cols = int(np.any(window, axis=(1, 2)).sum()), int(np.any(window, axis=(0, 2)).sum())
        assert rows * cols <= 0.5 * h * w + h + w + 1
        image = pixels(i)
        found = any(np.array_equal(image[y:y + rows, x:x + cols], window[:rows, :cols])
                    for y in range(h - rows + 1) for x in range(w - cols + 1))
        assert found, i
    assert size.shape == (6, 2)


def test_resize_and_crop_mirror_normalize_read_a_flipped_handle(folder: str) -> None:
    @flow.global_function()
    def job() -> Tuple[tp.Numpy, tp.Numpy]:
        image = flow.data.OFRecordImageDecoder(reader(folder), "encoded", color_space="RGB")
        flipped = flow.image.flip(image, 1)
        resized, _, _ = flow.image.Resize(flipped, target_size=(10, 8), interpolation_type="nearest_neighbor")
        return resized, flow.image.CropMirrorNormalize(flipped, crop_h=12, crop_w=16, crop_pos_x=0.0,
                                                       crop_pos_y=0.0, output_layout="NHWC")

    resized, cropped = job()
    ref = [np.asarray(Image.fromarray(np.ascontiguousarray(pixels(i)[:, ::-1])).resize((10, 8), Image.NEAREST))
           for i in range(3)]
    np.testing.assert_array_equal(resized, np.stack(ref))
    np.testing.assert_array_equal(cropped, np.stack([pixels(i)[:12, ::-1][:, :16] for i in range(3)]))


def test_misuse_is_named(folder: str) -> None:
    with pytest.raises(OpBuildError, match="flip_code must be an int"):
        @flow.global_function()
        def blob_code() -> tp.Numpy:
            image = flow.data.OFRecordImageDecoder(reader(folder), "encoded")
            return flow.image.flip(image, flow.random.CoinFlip(batch_size=3))
        blob_code()
    flow.clear_default_session()
    with pytest.raises(OpBuildError, match="OFRecordBytesDecoder"):
        @flow.global_function()
        def decode_images() -> tp.Numpy:
            return flow.image.decode(flow.data.OFRecordImageDecoder(reader(folder), "encoded"))
        decode_images()
    flow.clear_default_session()
    with pytest.raises(OpBuildError, match="flow.image.Resize"):
        @flow.global_function()
        def resize_floats() -> tp.Numpy:
            image = flow.data.OFRecordImageDecoder(reader(folder), "encoded")
            return flow.image.Resize(flow.image.normalize(image, [1.0], [0.0]), target_size=(4, 4))[0]
        resize_floats()
    flow.clear_default_session()
    with pytest.raises(ValueError, match="3 channels; std and mean must hold 1 or 3 values"):
        @flow.global_function()
        def two_means() -> tp.Numpy:
            image = flow.data.OFRecordImageDecoder(reader(folder), "encoded")
            return flow.image.batch_align(flow.image.normalize(image, [1.0, 2.0], [0.0]), (31, 40, 3), flow.float, 1)
        two_means()
    flow.clear_default_session()
    with pytest.raises(ValueError, match="the images have 1 channels"):
        @flow.global_function()
        def gray_as_rgb() -> tp.Numpy:
            image = flow.data.OFRecordImageDecoder(reader(folder), "encoded", color_space="GRAY")
            return flow.image.batch_align(image, shape=(31, 40, 3), dtype=flow.uint8, alignment=1)
        gray_as_rgb()
    flow.clear_default_session()

    @flow.global_function()
    def too_small() -> tp.Numpy:
        image = flow.data.OFRecordImageDecoder(reader(folder), "encoded")
        return flow.image.batch_align(image, shape=(20, 20, 3), dtype=flow.uint8, alignment=4)

    with pytest.raises(OFRecordError, match=r"20x30x3 image of .*part-0.* does not fit"):
        too_small()


# the deprecated placement names

def test_fixed_and_device_prior_placement_are_deprecated_scope_placements(folder: str) -> None:
    config = flow.FunctionConfig()
    with pytest.warns(DeprecationWarning, match="flow.scope.placement"):
        config.default_placement_scope(flow.device_prior_placement("cpu", "0:0"))

    @flow.global_function(function_config=config)
    def job() -> tp.Numpy:
        with pytest.warns(DeprecationWarning, match="flow.scope.placement"):
            scope = flow.fixed_placement("cpu", "0:0")
        with scope:
            records = reader(folder)
            return flow.data.OFRecordRawDecoder(records, "class/label", shape=(), dtype=flow.int32)

    assert job().tolist() == [10, 11, 12]
    with pytest.warns(DeprecationWarning):
        assert flow.fixed_placement("cpu", "0:0") == flow.scope.placement("cpu", "0:0")
        with pytest.raises(ValueError, match="machine_device_ids"):
            flow.fixed_placement("cpu", "zero")
