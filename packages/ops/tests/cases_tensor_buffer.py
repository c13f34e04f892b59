"""Op cases of records/tensor_buffer.py and records/detection.py: tensor buffers (dtype object arrays whose
elements are arrays of their own shapes) made, converted, split, and the detection ops over them.
op_cases.py appends ``CASES`` to its table. None of these ops is differentiable (``wrt=()``).

References loop over the elements with plain numpy; a tensor buffer input is built the same way.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

from flowjob_core.testing import OpCase
from flowjob_core.testing import strategies as fst

Draw = Any
Case = tuple[list[np.ndarray], dict]


def buffer_of(arrays: list[np.ndarray], shape: tuple[int, ...] | None = None) -> np.ndarray:
    out = np.empty(len(arrays) if shape is None else shape, dtype=object)
    for i, a in enumerate(arrays):
        out.reshape(-1)[i] = a
    return out


def _floats(draw: Draw, shape: tuple[int, ...], dtype: Any = np.float32) -> np.ndarray:
    return draw(fst.arrays(shape, st.floats(-3.0, 3.0, allow_subnormal=False))).astype(dtype)


def _ragged(draw: Draw, count: int, rank: int, max_side: int = 4, dtype: Any = np.float32) -> list[np.ndarray]:
    return [_floats(draw, tuple(draw(st.integers(1, max_side)) for _ in range(rank)), dtype) for _ in range(count)]


# tensor buffers ----------------------------------------------------------------------------
def _make_to_buffer(draw: Draw) -> Case:
    shape = tuple(draw(fst.small_shapes(2, 4, 3)))
    return [_floats(draw, shape, np.float64)], {"instance_dims": draw(st.integers(1, len(shape) - 1))}


def _ref_to_buffer(x: np.ndarray, instance_dims: int) -> np.ndarray:
    outer = x.shape[: x.ndim - instance_dims]
    return buffer_of([x[index] for index in np.ndindex(*outer)], outer)


def _make_to_tensor(draw: Draw) -> Case:
    outer, inner = tuple(draw(fst.small_shapes(1, 2, 3))), tuple(draw(fst.small_shapes(1, 2, 3)))
    dense = _floats(draw, outer + inner, np.float64)
    return ([buffer_of([dense[i] for i in np.ndindex(*outer)], outer)],
            {"dtype": np.dtype(np.float64), "instance_shape": inner})


def _ref_to_tensor(buffer: np.ndarray, dtype: Any, instance_shape: tuple[int, ...]) -> np.ndarray:
    return np.array([e for e in buffer.reshape(-1)], dtype=dtype).reshape(buffer.shape + tuple(instance_shape))


def _make_gen(draw: Draw) -> Case:
    shape = tuple(draw(fst.small_shapes(1, 2, 3)))
    count = int(np.prod(shape))
    shapes = tuple(tuple(draw(fst.small_shapes(1, 3, 3))) for _ in range(count))
    values = tuple(float(draw(st.integers(-4, 4))) for _ in range(count))
    dtype = np.dtype(draw(st.sampled_from([np.float32, np.float64, np.int32, np.int64])))
    return [], {"shape": shape, "shape_list": shapes, "value_list": values, "data_type": dtype, "dynamic_out": False}


def _ref_gen(shape: Any, shape_list: Any, value_list: Any, data_type: Any, dynamic_out: bool) -> np.ndarray:
    return buffer_of([np.full(s, v, data_type) for s, v in zip(shape_list, value_list)], tuple(shape))


def _make_list_of_tensors(draw: Draw) -> Case:
    elements = _ragged(draw, draw(st.integers(1, 3)), 2, dtype=np.float64)
    return [buffer_of(elements)], {"out_shape": (4, 4), "out_dtype": np.dtype(np.float64), "dynamic_out": True}


def _ref_list_of_tensors(buffer: np.ndarray, out_shape: Any, out_dtype: Any, dynamic_out: bool) -> Any:
    items = tuple(np.array(e) for e in buffer)
    return items if len(items) != 1 else items[0]


# tensor lists: one item, the list as one array (several items of differing shapes are a TensorList, which
# tests/test_tensor_buffers_legacy.py feeds through a job)
def _make_list_to_buffer(draw: Draw) -> Case:
    return [_floats(draw, tuple(draw(fst.small_shapes(2, 3, 3))), np.float64)], {}


def _ref_list_to_buffer(x: np.ndarray) -> np.ndarray:
    return buffer_of([row for row in x])


def _make_buffer_to_list(draw: Draw) -> Case:
    (element,) = _ragged(draw, 1, 2, dtype=np.float64)
    return [buffer_of([element])], {"shape": (4, 4), "dtype": np.dtype(np.float64)}


def _ref_buffer_to_list(buffer: np.ndarray, shape: Any, dtype: Any) -> np.ndarray:
    return buffer[0][None]


def _make_split(draw: Draw) -> Case:
    return [_floats(draw, tuple(draw(fst.small_shapes(2, 3, 3))), np.float64)], {}


def _ref_split(x: np.ndarray) -> Any:
    return tuple(x) if x.shape[0] != 1 else x[0]


# detection ---------------------------------------------------------------------------------
def _make_flip(width: int) -> Any:
    def make(draw: Draw) -> Case:
        count = draw(st.integers(1, 3))
        elements = [_floats(draw, (draw(st.integers(1, 3)), width)) for _ in range(count)]
        sizes = np.array([[draw(st.integers(5, 40)), draw(st.integers(5, 40))] for _ in range(count)], np.int32)
        codes = np.array([draw(st.sampled_from([0, 1, 16, 17])) for _ in range(count)], np.int8)
        return [buffer_of(elements), sizes, codes], {}

    return make


def _ref_bbox_flip(buffer: np.ndarray, sizes: np.ndarray, codes: np.ndarray) -> np.ndarray:
    out = []
    for boxes, (w, h), code in zip(buffer, sizes, codes):
        boxes = boxes.copy()
        if code & 1:
            boxes[:, [0, 2]] = (w - 1) - boxes[:, [2, 0]]
        if code & 16:
            boxes[:, [1, 3]] = (h - 1) - boxes[:, [3, 1]]
        out.append(boxes)
    return buffer_of(out)


def _ref_poly_flip(buffer: np.ndarray, sizes: np.ndarray, codes: np.ndarray) -> np.ndarray:
    out = []
    for points, (w, h), code in zip(buffer, sizes, codes):
        points = points.copy()
        if code & 1:
            points[:, 0] = w - points[:, 0]
        if code & 16:
            points[:, 1] = h - points[:, 1]
        out.append(points)
    return buffer_of(out)


def _make_scale(width: int) -> Any:
    def make(draw: Draw) -> Case:
        count = draw(st.integers(1, 3))
        elements = [_floats(draw, (draw(st.integers(1, 3)), width)) for _ in range(count)]
        scales = np.array([[draw(st.sampled_from([0.5, 1.0, 2.0, 1.25])) for _ in range(2)] for _ in range(count)],
                          np.float32)
        return [buffer_of(elements), scales], {}

    return make


def _ref_scale(buffer: np.ndarray, scales: np.ndarray) -> np.ndarray:
    return buffer_of([e * np.tile(s, e.shape[1] // 2) for e, s in zip(buffer, scales)])


def _make_mask(draw: Draw) -> Case:
    """Axis-aligned rectangles (corners on whole pixels), one object each: the mask is the rectangle, edges
    included (tests/test_detection_legacy.py compares other polygons with OpenCV's fillPoly)."""
    count = draw(st.integers(1, 2))
    polys, indices, sizes = [], [], []
    for _ in range(count):
        w, h = draw(st.integers(4, 9)), draw(st.integers(4, 9))
        objects = draw(st.integers(1, 2))
        pts, idx = [], []
        for obj in range(objects):
            x0, y0 = draw(st.integers(0, w - 2)), draw(st.integers(0, h - 2))
            x1, y1 = draw(st.integers(x0 + 1, w - 1)), draw(st.integers(y0 + 1, h - 1))
            pts += [[x0, y0], [x1, y0], [x1, y1], [x0, y1]]
            idx += [[k, 0, obj] for k in range(4)]
        polys.append(np.array(pts, np.float32))
        indices.append(np.array(idx, np.int32))
        sizes.append([w, h])
    return [buffer_of(polys), buffer_of(indices), np.array(sizes, np.int32)], {}


def _ref_mask(polys: np.ndarray, indices: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    out = []
    for pts, idx, (w, h) in zip(polys, indices, sizes):
        masks = np.zeros((idx[:, 2].max() + 1, h, w), np.int8)
        for obj in range(masks.shape[0]):
            corners = pts[idx[:, 2] == obj].astype(int)
            (x0, y0), (x1, y1) = corners.min(axis=0), corners.max(axis=0)
            masks[obj, y0: y1 + 1, x0: x1 + 1] = 1
        out.append(masks)
    return buffer_of(out)


CASES = [
    OpCase("tensor_to_tensor_buffer", _make_to_buffer, _ref_to_buffer, wrt=()),
    OpCase("tensor_buffer_to_tensor", _make_to_tensor, _ref_to_tensor, wrt=()),
    OpCase("gen_tensor_buffer", _make_gen, _ref_gen, wrt=()),
    OpCase("tensor_buffer_to_list_of_tensors", _make_list_of_tensors, _ref_list_of_tensors, wrt=()),
    OpCase("tensor_list_to_tensor_buffer", _make_list_to_buffer, _ref_list_to_buffer, wrt=()),
    OpCase("tensor_buffer_to_tensor_list", _make_buffer_to_list, _ref_buffer_to_list, wrt=()),
    OpCase("tensor_list_split", _make_split, _ref_split, wrt=()),
    OpCase("object_bbox_flip", _make_flip(4), _ref_bbox_flip, wrt=()),
    OpCase("object_segmentation_polygon_flip", _make_flip(2), _ref_poly_flip, wrt=()),
    OpCase("object_bbox_scale", _make_scale(4), _ref_scale, wrt=()),
    OpCase("object_segmentation_polygon_scale", _make_scale(2), _ref_scale, wrt=()),
    OpCase("object_segmentation_polygon_to_mask", _make_mask, _ref_mask, wrt=()),
]
