"""Legacy's object-detection preprocessing over tensor buffers (``flow.detection.object_*``): bounding boxes
and segmentation polygons flipped and scaled with their image, polygons drawn into masks.

Every op takes one element per image: a (n, 4) element of boxes ``[x1, y1, x2, y2]`` or a (n, 2) element of
polygon points ``[x, y]``, with the image's ``image_size`` row ``[w, h]`` (int32), ``flip_code`` (int8:
1 horizontal, 16 vertical, 17 both) or ``scale`` row ``[scale_w, scale_h]`` (float). The numbers follow
legacy's kernels: a box flips to ``w - x2 - 1, w - x1 - 1``, a polygon point to ``w - x``.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from flowjob_core import BlobSpec, Compute, Effects, KernelContext, LegacyFace, OpDef, ShapeError

from flowjob_ops.kernels.polygon_mask import polygons_to_mask
from flowjob_ops.records.tensor_buffer import BUFFER, elements, new_buffer

HORIZONTAL, VERTICAL = 0x01, 0x10


def _per_image(inputs: Sequence[BlobSpec], names: Sequence[str], rows: dict[str, tuple[int, ...]]) -> int:
    """The number of images of the buffers in ``names`` (tensor buffers of one axis) and the per-image
    inputs of ``rows`` (name -> allowed shapes after the image axis, dtype kinds checked by the caller)."""
    count = None
    for spec, name in zip(inputs, names):
        if name in rows:
            if not spec.shape or spec.shape[1:] != rows[name]:
                raise ShapeError(f"{name} must have shape (images, {', '.join(map(str, rows[name]))}), got "
                                 f"{spec.shape}".replace(", )", ")"))
        else:
            if spec.dtype != BUFFER or len(spec.shape) != 1:
                raise ShapeError(f"{name} must be a one-axis tensor buffer, got {spec}")
        images = spec.shape[0] if spec.shape else None
        if count is None:
            count = images
        elif images != count:
            raise ShapeError(f"{name} holds {images} images, {names[0]} {count}")
    return int(count or 0)


def _kind(spec: BlobSpec, name: str, kinds: str, what: str) -> None:
    if spec.dtype.kind not in kinds:
        raise ShapeError(f"{name} must be {what}, got {spec.dtype}")


def _flip_infer(inputs: Sequence[BlobSpec], attrs: dict, first: str) -> list[BlobSpec]:
    if len(inputs) != 3:
        raise ShapeError(f"takes {first}, image_size and flip_code, got {len(inputs)} inputs")
    count = _per_image(inputs, (first, "image_size", "flip_code"), {"image_size": (2,), "flip_code": ()})
    _kind(inputs[1], "image_size", "iu", "integers")
    _kind(inputs[2], "flip_code", "iu", "integers")
    return [BlobSpec((count,), BUFFER)]


def _scale_infer(inputs: Sequence[BlobSpec], attrs: dict, first: str) -> list[BlobSpec]:
    if len(inputs) != 2:
        raise ShapeError(f"takes {first} and scale, got {len(inputs)} inputs")
    count = _per_image(inputs, (first, "scale"), {"scale": (2,)})
    _kind(inputs[1], "scale", "f", "floating")
    return [BlobSpec((count,), BUFFER)]


def _check_element(element: Any, width: int, node: str, index: int, what: str) -> None:
    if element is None or element.ndim != 2 or element.shape[1] != width or element.dtype.kind != "f":
        shape = None if element is None else (tuple(element.shape), element.dtype.name)
        raise ValueError(f"{node}: element {index} must be a floating (n, {width}) array of {what}, got {shape}")


def _flip_kernel(width: int, offset: int, what: str) -> Any:
    """Boxes (width 4, offset 1) or points (width 2, offset 0): x -> w - x - offset (x1 and x2 swap for boxes)."""

    def kernel(ctx: KernelContext) -> Any:
        xp, to_host, node = ctx.xp, ctx.backend.to_host, ctx.node_name

        def run(buffer: Any, image_size: Any, flip_code: Any) -> Any:
            sizes, codes = np.asarray(to_host(image_size)), np.asarray(to_host(flip_code)).reshape(-1)
            items = elements(buffer)
            out = new_buffer((len(items),))
            for i, element in enumerate(items):
                _check_element(element, width, node, i, what)
                w, h = (element.dtype.type(v) for v in sizes[i])
                flipped = xp.array(element, copy=True)
                code = int(codes[i])
                for bit, length, cols in ((HORIZONTAL, w, (0, 2)), (VERTICAL, h, (1, 3))):
                    if code & bit:
                        if width == 4:  # the box's two corners trade places
                            flipped[:, cols[0]] = length - element[:, cols[1]] - 1
                            flipped[:, cols[1]] = length - element[:, cols[0]] - 1
                        else:
                            flipped[:, cols[0]] = length - element[:, cols[0]] - offset
                out[i] = flipped
            return out

        return run

    return kernel


def _scale_kernel(width: int, what: str) -> Any:
    def kernel(ctx: KernelContext) -> Any:
        xp, to_host, node = ctx.xp, ctx.backend.to_host, ctx.node_name

        def run(buffer: Any, scale: Any) -> Any:
            factors = np.asarray(to_host(scale))
            items = elements(buffer)
            out = new_buffer((len(items),))
            for i, element in enumerate(items):
                _check_element(element, width, node, i, what)
                row = np.tile(factors[i].astype(element.dtype), width // 2)  # [sw, sh] per (x, y) pair
                out[i] = element * xp.asarray(row)
            return out

        return run

    return kernel


def _flip_op(name: str, first: str, width: int, offset: int, what: str, prefix: str, doc: str) -> OpDef:
    return OpDef(name, lambda i, a: _flip_infer(i, a, first), kernel=_flip_kernel(width, offset, what),
                 not_differentiable=True, doc=doc, compute=Compute(amp="black"),
                 legacy=LegacyFace(name_prefix=prefix, input_names=(first, "image_size", "flip_code")))


def _scale_op(name: str, first: str, width: int, what: str, prefix: str) -> OpDef:
    return OpDef(name, lambda i, a: _scale_infer(i, a, first), kernel=_scale_kernel(width, what),
                 not_differentiable=True, doc=f"each image's {what} times its scale row [scale_w, scale_h]",
                 compute=Compute(amp="black"), legacy=LegacyFace(name_prefix=prefix, input_names=(first, "scale")))


OBJECT_BBOX_FLIP = _flip_op("object_bbox_flip", "bbox", 4, 1, "boxes", "ObjectBboxFlip",
                            "each image's boxes [x1, y1, x2, y2] flipped with it (flip_code 1: x -> w - x - 1, 16: "
                            "y -> h - y - 1)")
OBJECT_BBOX_SCALE = _scale_op("object_bbox_scale", "bbox", 4, "boxes", "ObjectBboxScale")
OBJECT_SEGMENTATION_POLYGON_FLIP = _flip_op("object_segmentation_polygon_flip", "poly", 2, 0, "points",
                                            "ObjectSegmPolyFilp", "each image's polygon points [x, y] flipped with it "
                                            "(flip_code 1: x -> w - x, 16: y -> h - y)")
# legacy named unnamed polygon scales with the flip's prefix too
OBJECT_SEGMENTATION_POLYGON_SCALE = _scale_op("object_segmentation_polygon_scale", "poly", 2, "points",
                                              "ObjectSegmPolyFilp")


# object_segmentation_polygon_to_mask ------------------------------------------------------
def _mask_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    if len(inputs) != 3:
        raise ShapeError(f"takes poly, poly_index and image_size, got {len(inputs)} inputs")
    count = _per_image(inputs, ("poly", "poly_index", "image_size"), {"image_size": (2,)})
    _kind(inputs[2], "image_size", "iu", "integers")
    return [BlobSpec((count,), BUFFER)]


def _object_polygons(points: np.ndarray, index: np.ndarray, node: str, image: int) -> list[list[np.ndarray]]:
    """The points grouped by object and polygon as ``index`` rows ``[point, polygon, object]`` say, each
    numbered from 0 in order (legacy checked the same)."""
    objects: list[list[list]] = []
    for k, (pt, poly, obj) in enumerate(index.tolist()):
        if obj == len(objects):
            objects.append([])
        polys = objects[-1] if objects and obj == len(objects) - 1 else None
        if polys is None:
            raise ValueError(f"{node}: image {image}, poly_index row {k} names object {obj} out of order")
        if poly == len(polys):
            polys.append([])
        if poly != len(polys) - 1 or pt != len(polys[-1]):
            raise ValueError(f"{node}: image {image}, poly_index row {k} [{pt}, {poly}, {obj}] is out of order")
        polys[-1].append(points[k])
    return [[np.asarray(p) for p in polys] for polys in objects]


def _mask_kernel(ctx: KernelContext) -> Any:
    xp, to_host, node = ctx.xp, ctx.backend.to_host, ctx.node_name

    def run(poly: Any, poly_index: Any, image_size: Any) -> Any:
        sizes = np.asarray(to_host(image_size))
        polys, indices = elements(poly), elements(poly_index)
        out = new_buffer((len(polys),))
        for i, (points, index) in enumerate(zip(polys, indices)):
            _check_element(points, 2, node, i, "polygon points")
            index = np.asarray(to_host(index))
            if index.ndim != 2 or index.shape != (points.shape[0], 3) or index.dtype.kind not in "iu":
                raise ValueError(f"{node}: poly_index element {i} must be integers of shape ({points.shape[0]}, 3), "
                                 f"got {index.shape} {index.dtype}")
            w, h = (int(v) for v in sizes[i])
            objects = _object_polygons(np.asarray(to_host(points)), index, node, i)
            masks = np.zeros((len(objects), h, w), np.int8)
            for k, object_polygons in enumerate(objects):
                masks[k] = polygons_to_mask(object_polygons, h, w)
            out[i] = xp.asarray(masks)
        return out

    return run


OBJECT_SEGMENTATION_POLYGON_TO_MASK = OpDef(
    "object_segmentation_polygon_to_mask", _mask_infer, kernel=_mask_kernel, not_differentiable=True,
    doc="each image's objects drawn from their polygons into int8 (objects, h, w) masks", compute=Compute(amp="black"),
    effects=Effects(host_state=True),
    legacy=LegacyFace(name_prefix="ObjectSegmPolyToMask", input_names=("poly", "poly_index", "image_size")))

OPS = (OBJECT_BBOX_FLIP, OBJECT_BBOX_SCALE, OBJECT_SEGMENTATION_POLYGON_FLIP, OBJECT_SEGMENTATION_POLYGON_SCALE,
       OBJECT_SEGMENTATION_POLYGON_TO_MASK)
