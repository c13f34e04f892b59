"""flow.image ops over tensor buffers of images as legacy v0.4's tests fed them (tensor lists of (1, H, W, C)
images through flow.tensor_list_to_tensor_buffer): test_image_flip.py, test_image_batch_align.py,
test_image_normalize.py and test_object_bbox_scale.py's image_target_resize, compared as those tests did (with
numpy in place of cv2's flip)."""
from __future__ import annotations

from typing import Tuple

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core.testing.modules import sibling

pytest.importorskip("PIL.Image", reason="Pillow (flowjob-ofrecord[image]) is not installed")
_helpers = sibling(__file__, "op_surface_helpers")
fresh_session, mirrored_config = _helpers.fresh_session, _helpers.mirrored_config
list_static_shape = _helpers.list_static_shape
RNG = np.random.default_rng(2829)


IMAGES = [RNG.uniform(0, 255, size=s).astype(np.float32) for s in [(30, 40, 3), (20, 50, 3), (12, 9, 3)]]


@pytest.mark.parametrize("code", [1, 16, 17])
def test_image_flip(code):
    shape = list_static_shape(IMAGES)

    @flow.global_function(function_config=mirrored_config())
    def image_flip_job(images_def: tp.ListListNumpy.Placeholder(shape=shape, dtype=flow.float)) -> tp.ListListNumpy:
        images_buffer = flow.tensor_list_to_tensor_buffer(images_def)
        flip_images = flow.image_flip(images_buffer, code)
        return flow.tensor_buffer_to_tensor_list(flip_images, shape=shape[1:], dtype=flow.float)

    (flipped,) = image_flip_job([[np.expand_dims(i, 0) for i in IMAGES]])
    axes = tuple(a for a, bit in ((1, 0x01), (0, 0x10)) if code & bit)
    for got, image in zip(flipped, IMAGES):
        np.testing.assert_array_equal(got[0], np.flip(image, axis=axes))


def test_image_normalize_and_batch_align():
    shape = list_static_shape(IMAGES)
    std, mean = [10.0, 20.0, 30.0], [100.0, 110.0, 120.0]

    @flow.global_function(function_config=mirrored_config())
    def align_job(images_def: tp.ListListNumpy.Placeholder(shape=shape, dtype=flow.float)) -> tp.ListNumpy:
        images_buffer = flow.tensor_list_to_tensor_buffer(images_def)
        normalized = flow.image.normalize(images_buffer, std=std, mean=mean)
        return flow.image_batch_align(normalized, shape=(30, 50, 3), dtype=flow.float, alignment=16)

    (batch,) = align_job([[np.expand_dims(i, 0) for i in IMAGES]])
    assert batch.shape == (3, 32, 64, 3)
    for k, image in enumerate(IMAGES):
        h, w, _ = image.shape
        want = ((image - np.float32(mean)) * (1.0 / np.float64(std)).astype(np.float32))
        np.testing.assert_allclose(batch[k, :h, :w], want, rtol=1e-6)
        assert not batch[k, h:].any() and not batch[k, :, w:].any()


def _legacy_target_size(w, h, target_size, max_size):
    """Legacy's _get_target_resize_scale (test_object_bbox_scale.py)."""
    short, long_ = float(min(w, h)), float(max(w, h))
    res_short, res_long = target_size, int(round(long_ / short * target_size))
    if res_long > max_size:
        res_long, res_short = max_size, int(round(max_size * short / long_))
    return (res_short, res_long) if w < h else (res_long, res_short)


def test_image_target_resize_then_object_bbox_scale():
    """test_object_bbox_scale.py: the boxes scaled by each image's resize, read from the sizes it reports."""
    boxes = [RNG.uniform(0, 10, size=(n, 4)).astype(np.float32) for n in (2, 1, 3)]
    image_shape, bbox_shape = list_static_shape(IMAGES), list_static_shape(boxes)

    @flow.global_function(function_config=mirrored_config())
    def target_resize_bbox_scale_job(
            image_def: tp.ListListNumpy.Placeholder(shape=image_shape, dtype=flow.float),
            bbox_def: tp.ListListNumpy.Placeholder(shape=bbox_shape, dtype=flow.float),
    ) -> Tuple[tp.ListListNumpy, tp.ListNumpy, tp.ListListNumpy]:
        images_buffer = flow.tensor_list_to_tensor_buffer(image_def)
        resized_images_buffer, new_size, scale = flow.image_target_resize(images_buffer, target_size=15,
                                                                          max_size=30)
        bbox_buffer = flow.tensor_list_to_tensor_buffer(bbox_def)
        scaled_bbox = flow.object_bbox_scale(bbox_buffer, scale)
        return (flow.tensor_buffer_to_tensor_list(scaled_bbox, shape=bbox_shape[1:], dtype=flow.float), new_size,
                flow.tensor_buffer_to_tensor_list(resized_images_buffer, shape=(30, 30, 3), dtype=flow.float))

    (scaled,), (sizes,), (resized,) = target_resize_bbox_scale_job([[np.expand_dims(i, 0) for i in IMAGES]],
                                                                   [[np.expand_dims(b, 0) for b in boxes]])
    for image, bbox, got, (w, h), picture in zip(IMAGES, boxes, scaled, sizes, resized):
        oh, ow = image.shape[:2]
        assert (w, h) == _legacy_target_size(ow, oh, 15, 30)
        assert picture.shape == (1, h, w, 3)
        np.testing.assert_allclose(got[0], bbox * np.array([w / ow, h / oh, w / ow, h / oh], np.float32),
                                   rtol=1e-6)
