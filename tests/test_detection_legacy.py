"""flow.detection.object_* (and the top-level flow.object_* aliases) as legacy v0.4: boxes and polygons of
tensor buffers built from tensor lists, flipped and scaled per image, polygons drawn into masks; modeled on
legacy's test_object_bbox_flip.py, test_object_bbox_scale.py, test_object_segm_poly_flip.py and
test_object_segm_poly_to_mask.py (which read COCO annotations: here a few boxes and polygons of their kind)."""
from __future__ import annotations

from typing import Tuple

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core import OpBuildError
from flowjob_core.testing.modules import sibling

RNG = np.random.default_rng(280)
_helpers = sibling(__file__, "op_surface_helpers")
fresh_session, mirrored_config = _helpers.fresh_session, _helpers.mirrored_config
list_static_shape = _helpers.list_static_shape

BOXES = [np.array([[20.0, 40.0, 80.0, 160.0], [30.0, 50.0, 70.0, 100.0]], np.float32),
         np.array([[1.0, 2.0, 10.0, 12.0]], np.float32),
         np.array([[5.0, 5.0, 6.0, 9.0], [0.0, 0.0, 3.0, 3.0], [7.0, 1.0, 9.0, 2.0]], np.float32)]
SIZES = np.array([[480, 620], [40, 30], [12, 10]], np.int32)  # [w, h] per image


def _flip_boxes(boxes, size, code):
    """Legacy's expectation (test_object_bbox_flip.py, extended to the vertical code as its kernel does)."""
    w, h = size
    out = boxes.copy()
    if code & 1:
        out[:, 0], out[:, 2] = w - boxes[:, 2] - 1, w - boxes[:, 0] - 1
    if code & 16:
        out[:, 1], out[:, 3] = h - boxes[:, 3] - 1, h - boxes[:, 1] - 1
    return out


@pytest.mark.parametrize("code", [0, 1, 16, 17])
def test_object_bbox_flip(code):
    shape = list_static_shape(BOXES)

    @flow.global_function(function_config=mirrored_config())
    def flip(bbox_def: tp.ListListNumpy.Placeholder(shape=shape, dtype=flow.float),
             image_size_def: tp.ListNumpy.Placeholder(shape=SIZES.shape, dtype=flow.int32)) -> tp.ListListNumpy:
        bbox_buffer = flow.tensor_list_to_tensor_buffer(bbox_def)
        flipped = flow.object_bbox_flip(bbox_buffer, image_size_def, code)
        return flow.tensor_buffer_to_tensor_list(flipped, shape=shape[1:], dtype=flow.float)

    (items,) = flip([[np.expand_dims(b, 0) for b in BOXES]], [SIZES])
    for got, boxes, size in zip(items, BOXES, SIZES):
        np.testing.assert_array_equal(got[0], _flip_boxes(boxes, size, code))


def test_object_bbox_flip_by_a_code_per_image_in_flow_detection():
    shape = list_static_shape(BOXES)
    codes = np.array([1, 0, 17], np.int8)

    @flow.global_function(function_config=mirrored_config())
    def flip(bbox_def: tp.ListListNumpy.Placeholder(shape=shape, dtype=flow.float),
             image_size_def: tp.ListNumpy.Placeholder(shape=SIZES.shape, dtype=flow.int32),
             code_def: tp.ListNumpy.Placeholder(shape=(3,), dtype=flow.int8)) -> tp.ListListNumpy:
        flipped = flow.detection.object_bbox_flip(flow.tensor_list_to_tensor_buffer(bbox_def), image_size_def,
                                                  code_def)
        return flow.tensor_buffer_to_tensor_list(flipped, shape=shape[1:], dtype=flow.float)

    (items,) = flip([[np.expand_dims(b, 0) for b in BOXES]], [SIZES], [codes])
    for got, boxes, size, code in zip(items, BOXES, SIZES, codes):
        np.testing.assert_array_equal(got[0], _flip_boxes(boxes, size, int(code)))


def test_object_bbox_scale():
    """Legacy's test_object_bbox_scale.py: x by scale_w, y by scale_h (its scales came from image_target_resize)."""
    shape = list_static_shape(BOXES)
    scales = np.array([[0.5, 2.0], [1.25, 0.75], [3.0, 1.0]], np.float32)

    @flow.global_function(function_config=mirrored_config())
    def scale(bbox_def: tp.ListListNumpy.Placeholder(shape=shape, dtype=flow.float),
              scale_def: tp.ListNumpy.Placeholder(shape=scales.shape, dtype=flow.float)) -> tp.ListListNumpy:
        scaled = flow.object_bbox_scale(flow.tensor_list_to_tensor_buffer(bbox_def), scale_def)
        return flow.tensor_buffer_to_tensor_list(scaled, shape=shape[1:], dtype=flow.float)

    (items,) = scale([[np.expand_dims(b, 0) for b in BOXES]], [scales])
    for got, boxes, (sw, sh) in zip(items, BOXES, scales):
        np.testing.assert_allclose(got[0], boxes * np.array([sw, sh, sw, sh], np.float32))


POLYS = [np.array([[2.0, 3.0], [9.0, 3.0], [9.0, 8.0], [2.0, 8.0], [20.0, 20.0], [25.0, 21.0], [22.0, 26.0]],
                  np.float32),
         np.array([[1.5, 1.0], [6.0, 2.5], [3.2, 7.7]], np.float32)]
# [point, polygon, object]: image 0 holds a rectangle (object 0) and a triangle (object 1); image 1 one triangle
POLY_INDEX = [np.array([[0, 0, 0], [1, 0, 0], [2, 0, 0], [3, 0, 0], [0, 0, 1], [1, 0, 1], [2, 0, 1]], np.int32),
              np.array([[0, 0, 0], [1, 0, 0], [2, 0, 0]], np.int32)]
POLY_SIZES = np.array([[30, 28], [8, 18]], np.int32)


@pytest.mark.parametrize("code", [1, 16, 17])
def test_object_segmentation_polygon_flip(code):
    shape = list_static_shape(POLYS)

    @flow.global_function(function_config=mirrored_config())
    def flip(poly_def: tp.ListListNumpy.Placeholder(shape=shape, dtype=flow.float),
             image_size_def: tp.ListNumpy.Placeholder(shape=POLY_SIZES.shape, dtype=flow.int32)) -> tp.ListListNumpy:
        flipped = flow.object_segmentation_polygon_flip(flow.tensor_list_to_tensor_buffer(poly_def), image_size_def,
                                                        code)
        return flow.tensor_buffer_to_tensor_list(flipped, shape=shape[1:], dtype=flow.float)

    (items,) = flip([[np.expand_dims(p, 0) for p in POLYS]], [POLY_SIZES])
    for got, poly, (w, h) in zip(items, POLYS, POLY_SIZES):
        want = poly.copy()
        if code & 1:
            want[:, 0] = w - poly[:, 0]  # legacy's kernel: no - 1 for polygon points
        if code & 16:
            want[:, 1] = h - poly[:, 1]
        np.testing.assert_array_equal(got[0], want)


def _masks_job(scales):
    poly_shape, index_shape = list_static_shape(POLYS), list_static_shape(POLY_INDEX)

    @flow.global_function(function_config=mirrored_config())
    def to_mask(poly_def: tp.ListListNumpy.Placeholder(shape=poly_shape, dtype=flow.float),
                index_def: tp.ListListNumpy.Placeholder(shape=index_shape, dtype=flow.int32),
                size_def: tp.ListNumpy.Placeholder(shape=POLY_SIZES.shape, dtype=flow.int32),
                scale_def: tp.ListNumpy.Placeholder(shape=scales.shape, dtype=flow.float),
                ) -> Tuple[tp.ListListNumpy, tp.ListListNumpy]:
        poly_buffer = flow.tensor_list_to_tensor_buffer(poly_def)
        scaled = flow.object_segmentation_polygon_scale(poly_buffer, scale_def)
        masks = flow.object_segmentation_polygon_to_mask(scaled, flow.tensor_list_to_tensor_buffer(index_def),
                                                         size_def)
        return (flow.tensor_buffer_to_tensor_list(masks, shape=(2, 30, 30), dtype=flow.int8),
                flow.tensor_buffer_to_tensor_list(scaled, shape=poly_shape[1:], dtype=flow.float))

    (masks,), (points,) = to_mask([[np.expand_dims(p, 0) for p in POLYS]],
                                  [[np.expand_dims(i, 0) for i in POLY_INDEX]], [POLY_SIZES], [scales])
    return [m[0] for m in masks], [p[0] for p in points]


def test_object_segmentation_polygon_to_mask_of_a_rectangle_and_scaled_points():
    scales = np.array([[1.0, 1.0], [0.5, 2.0]], np.float32)
    masks, points = _masks_job(scales)
    np.testing.assert_allclose(points[1], POLYS[1] * np.array([0.5, 2.0], np.float32))
    assert masks[0].shape == (2, 28, 30) and masks[0].dtype == np.int8 and masks[1].shape == (1, 18, 8)
    rectangle = np.zeros((28, 30), np.int8)
    rectangle[3:9, 2:10] = 1  # corners (2, 3) and (9, 8), edges included
    np.testing.assert_array_equal(masks[0][0], rectangle)
    assert masks[0][1][:19].sum() == 0 and masks[0][1].sum() > 0  # object 1 only where its triangle lies


def _distance_to_edges(y, x, polygons):
    """The distance from pixel (x, y) to the nearest edge of ``polygons``."""
    best = np.inf
    for pts in polygons:
        for a, b in zip(pts, np.roll(pts, -1, axis=0)):
            a, b, p = a.astype(np.float64), b.astype(np.float64), np.array([x, y], np.float64)
            t = 0.0 if np.all(a == b) else np.clip(np.dot(p - a, b - a) / np.dot(b - a, b - a), 0.0, 1.0)
            best = min(best, float(np.linalg.norm(p - (a + t * (b - a)))))
    return best


def _agrees_with_opencv(got, polygons, cv2):
    """Legacy's test compared with cv2.fillPoly(mask, rounded points, 1, lineType=8). Inside and outside agree
    exactly; OpenCV's fixed-point edge walk and clipping may take or leave a pixel an edge passes within one
    pixel of, so only such pixels may differ (an error of the rasterizer shows anywhere else)."""
    rounded = [np.int32(np.round(p)) for p in polygons]
    want = np.zeros(got.shape, np.int8)
    cv2.fillPoly(want, rounded, 1, lineType=8)
    ys, xs = np.nonzero(got != want)
    far = [(y, x) for y, x in zip(ys, xs) if _distance_to_edges(y, x, rounded) > 1.0]
    assert not far, f"pixels off the edges differ from OpenCV's: {far[:10]}"


def test_object_segmentation_polygon_to_mask_matches_opencv():
    cv2 = pytest.importorskip("cv2", reason="opencv-python-headless is not installed: the comparison with "
                                            "OpenCV's fillPoly needs it")
    scales = np.array([[1.0, 1.0], [0.5, 2.0]], np.float32)
    masks, points = _masks_job(scales)
    for got, pts, index in zip(masks, points, POLY_INDEX):
        for obj in range(index[:, 2].max() + 1):
            polys = [pts[(index[:, 2] == obj) & (index[:, 1] == p)]
                     for p in range(index[index[:, 2] == obj][:, 1].max() + 1)]
            _agrees_with_opencv(got[obj], polys, cv2)


def test_random_polygons_match_opencv():
    cv2 = pytest.importorskip("cv2", reason="opencv-python-headless is not installed: the comparison with "
                                            "OpenCV's fillPoly needs it")
    from flowjob_ops.kernels.polygon_mask import polygons_to_mask

    for _ in range(100):  # inside the image, as an object's polygons are
        polys = [RNG.uniform(0, 31, size=(RNG.integers(3, 9), 2)) for _ in range(RNG.integers(1, 3))]
        _agrees_with_opencv(polygons_to_mask(polys, 32, 36), polys, cv2)


def test_images_must_agree():
    with pytest.raises(OpBuildError, match="image_size holds 2 images, bbox 3"):
        @flow.global_function(function_config=mirrored_config())
        def flip(bbox_def: tp.ListListNumpy.Placeholder(shape=(3, 2, 4), dtype=flow.float),
                 image_size_def: tp.ListNumpy.Placeholder(shape=(2, 2), dtype=flow.int32)) -> tp.ListListNumpy:
            return flow.object_bbox_flip(flow.tensor_list_to_tensor_buffer(bbox_def), image_size_def, 1)

        flip([[np.zeros((1, 2, 4), np.float32)] * 3], [np.zeros((2, 2), np.int32)])
