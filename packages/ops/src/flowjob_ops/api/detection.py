"""Legacy ``flow.detection.object_*`` (also top-level ``flow.object_*``): boxes and segmentation polygons of
tensor buffers flipped and scaled with their images, polygons drawn into masks
(``flowjob_ops/records/detection.py``)."""
from __future__ import annotations

import numbers

from flowjob_core import Blob, apply
from flowjob_core.ir import dtypes

from flowjob_ops.api._common import blob_arg, build_error, op_name

NAMESPACES = {
    "flow": ["object_bbox_flip", "object_bbox_scale", "object_segmentation_polygon_flip",
             "object_segmentation_polygon_scale", "object_segmentation_polygon_to_mask"],
    "flow.detection": ["object_bbox_flip", "object_bbox_scale", "object_segmentation_polygon_flip",
                       "object_segmentation_polygon_scale", "object_segmentation_polygon_to_mask"],
}
"""The face namespaces legacy exported these names in; the oneflow face reads this literal."""
__all__ = sorted({name for names in NAMESPACES.values() for name in names})


def _flip_code(what: str, flip_code: int | Blob, like: Blob, name: str) -> Blob:
    """An int flip code as legacy made it: an int8 constant, one per image, named ``<op>_FlipCode``."""
    if isinstance(flip_code, Blob):
        return flip_code
    if isinstance(flip_code, bool) or not isinstance(flip_code, numbers.Integral):
        raise build_error(what, f"flip_code must be an int or a blob, got {type(flip_code).__name__}")
    attrs = {"value": int(flip_code), "dtype": dtypes.int8, "shape": (like.shape[0],)}
    return apply("constant", [], attrs, name=f"{name}_FlipCode")


def _flip(op: str, prefix: str, what: str, first: Blob, image_size: Blob, flip_code: int | Blob,
          name: str | None) -> Blob:
    name = op_name(name, prefix)
    code = _flip_code(what, flip_code, first, name)
    return apply(op, [first, blob_arg(what, "image_size", image_size), code], name=name)


def object_bbox_flip(bbox: Blob, image_size: Blob, flip_code: int | Blob, name: str | None = None) -> Blob:
    """Each image's boxes ``[x1, y1, x2, y2]`` (a tensor buffer, one (n, 4) element per image) flipped with the
    image: ``flip_code`` 0 none, 1 horizontal (``x -> w - x - 1``), 16 vertical, 17 both; ``image_size`` holds
    each image's ``[w, h]`` (int32). An int code applies to every image; a blob gives one per image (int8)."""
    what = "flow.detection.object_bbox_flip"
    return _flip("object_bbox_flip", "ObjectBboxFlip", what, blob_arg(what, "bbox", bbox), image_size, flip_code,
                 name)


def object_bbox_scale(bbox: Blob, scale: Blob, name: str | None = None) -> Blob:
    """Each image's boxes times its ``scale`` row ``[scale_w, scale_h]`` (x by the first, y by the second)."""
    what = "flow.detection.object_bbox_scale"
    return apply("object_bbox_scale", [blob_arg(what, "bbox", bbox), blob_arg(what, "scale", scale)], name=name)


def object_segmentation_polygon_flip(poly: Blob, image_size: Blob, flip_code: int | Blob,
                                     name: str | None = None) -> Blob:
    """Each image's polygon points ``[x, y]`` (one (n, 2) element per image) flipped with the image, as legacy:
    ``x -> w - x`` (code 1), ``y -> h - y`` (code 16)."""
    what = "flow.detection.object_segmentation_polygon_flip"
    return _flip("object_segmentation_polygon_flip", "ObjectSegmPolyFilp", what, blob_arg(what, "poly", poly),
                 image_size, flip_code, name)


def object_segmentation_polygon_scale(poly: Blob, scale: Blob, name: str | None = None) -> Blob:
    """Each image's polygon points times its ``scale`` row ``[scale_w, scale_h]``."""
    what = "flow.detection.object_segmentation_polygon_scale"
    return apply("object_segmentation_polygon_scale", [blob_arg(what, "poly", poly), blob_arg(what, "scale", scale)],
                 name=name)


def object_segmentation_polygon_to_mask(poly: Blob, poly_index: Blob, image_size: Blob,
                                        name: str | None = None) -> Blob:
    """Each image's objects as int8 masks ``(objects, h, w)``: ``poly_index`` (one (n, 3) element per image)
    numbers each point ``[point, polygon, object]`` in order; an object's polygons are filled together
    (even-odd), with their edges, as OpenCV's ``fillPoly`` drew them for legacy."""
    what = "flow.detection.object_segmentation_polygon_to_mask"
    inputs = [blob_arg(what, "poly", poly), blob_arg(what, "poly_index", poly_index),
              blob_arg(what, "image_size", image_size)]
    return apply("object_segmentation_polygon_to_mask", inputs, name=name)
