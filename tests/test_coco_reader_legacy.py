"""flow.data.coco_reader as legacy v0.4 (its test_coco_reader.py): a real COCO annotation file and PNG images
written here, read batch by batch; images decoded from the reader's bytes, boxes, labels and polygons against
the expectations legacy's test computed from the same JSON."""
from __future__ import annotations

import json
from typing import Tuple

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core import OpBuildError
from flowjob_core.testing.modules import sibling

Image = pytest.importorskip("PIL.Image", reason="Pillow (flowjob-ofrecord[image]) is not installed")
fresh_session = sibling(__file__, "op_surface_helpers").fresh_session
RNG = np.random.default_rng(2828)

# id -> (width, height); 4 has no annotation and 5 only a 1x1 box: both are left out
SIZES = {1: (40, 30), 2: (20, 20), 3: (50, 20), 4: (30, 10), 5: (16, 32), 6: (24, 12)}
ANNOTATIONS = [
    {"id": 10, "image_id": 1, "category_id": 5, "iscrowd": 0, "bbox": [2.0, 3.0, 10.0, 8.0],
     "segmentation": [[2.0, 3.0, 11.0, 3.0, 11.0, 10.0, 2.0, 10.0]]},
    {"id": 11, "image_id": 1, "category_id": 9, "iscrowd": 1, "bbox": [0.0, 0.0, 5.0, 5.0], "segmentation": {}},
    {"id": 12, "image_id": 1, "category_id": 2, "iscrowd": 0, "bbox": [35.0, 25.0, 20.0, 20.0],
     "segmentation": [[35.0, 25.0, 39.0, 25.0, 39.0, 29.0, 36.5, 28.5]]},
    {"id": 13, "image_id": 2, "category_id": 9, "iscrowd": 0, "bbox": [1.0, 1.0, 5.5, 6.5],
     "segmentation": [[1.0, 1.0, 6.0, 1.0, 6.0, 7.0, 1.5, 6.0]]},
    {"id": 14, "image_id": 3, "category_id": 2, "iscrowd": 0, "bbox": [4.0, 2.0, 12.0, 9.0],
     "segmentation": [[4.0, 2.0, 15.0, 2.0, 15.0, 10.0, 5.0, 9.0], [20.0, 5.0, 24.0, 5.0, 24.0, 8.0, 20.0, 8.0]]},
    {"id": 15, "image_id": 5, "category_id": 2, "iscrowd": 0, "bbox": [3.0, 3.0, 1.0, 1.0],
     "segmentation": [[3.0, 3.0, 4.0, 3.0, 4.0, 4.0, 3.0, 4.0]]},
    {"id": 16, "image_id": 6, "category_id": 5, "iscrowd": 0, "bbox": [0.0, 0.0, 6.0, 6.0],
     "segmentation": [[0.0, 0.0, 5.0, 0.0, 5.0, 5.0, 0.0, 5.0]]},
]


@pytest.fixture
def coco(tmp_path):
    """A COCO folder: instances.json and one PNG per image; returns (annotation file, image dir, pixels by id)."""
    images, pixels = [], {}
    (tmp_path / "images").mkdir()
    for image_id, (w, h) in SIZES.items():
        rgb = RNG.integers(0, 256, size=(h, w, 3), dtype=np.uint8)
        Image.fromarray(rgb).save(tmp_path / "images" / f"{image_id:06d}.png")
        images.append({"id": image_id, "width": w, "height": h, "file_name": f"{image_id:06d}.png"})
        pixels[image_id] = rgb
    data = {"images": images[::-1], "annotations": ANNOTATIONS,
            "categories": [{"id": 9, "name": "c"}, {"id": 2, "name": "a"}, {"id": 5, "name": "b"}]}
    (tmp_path / "instances.json").write_text(json.dumps(data))
    return str(tmp_path / "instances.json"), str(tmp_path / "images"), pixels


def _expected_boxes(image_id):
    """Legacy's test: _bbox_convert_from_xywh_to_xyxy over the non-crowd annotations."""
    w_img, h_img = SIZES[image_id]
    out = []
    for anno in ANNOTATIONS:
        if anno["image_id"] != image_id or anno["iscrowd"]:
            continue
        x, y, w, h = anno["bbox"]
        x1, y1, x2, y2 = x, y, x + max(w - 1, 0), y + max(h - 1, 0)
        x1, x2 = (min(max(v, 0), w_img - 1) for v in (x1, x2))
        y1, y2 = (min(max(v, 0), h_img - 1) for v in (y1, y2))
        if x1 < x2 and y1 < y2:
            out.append([x1, y1, x2, y2])
    return np.array(out, np.float32)


def _expected_polygons(image_id):
    """Legacy's test: _segm_poly_list_to_tensor."""
    points, index = [], []
    annos = [a for a in ANNOTATIONS if a["image_id"] == image_id and not a["iscrowd"]]
    for obj, anno in enumerate(annos):
        for p, poly in enumerate(anno["segmentation"]):
            points += poly
            index += [[k, p, obj] for k in range(len(poly) // 2)]
    return np.array(points, np.float32).reshape(-1, 2), np.array(index, np.int32)


LABELS = {2: 1, 5: 2, 9: 3}  # categories numbered from 1 in id order


def _reader_job(annotation_file, image_dir, **kwargs):
    @flow.global_function()
    def load() -> Tuple[tp.Numpy, tp.Numpy, tp.ListListNumpy, tp.ListListNumpy, tp.ListListNumpy,
                        tp.ListListNumpy, tp.ListListNumpy]:
        image, image_id, image_size, bbox, label, segm, segm_index = flow.data.coco_reader(
            annotation_file=annotation_file, image_dir=image_dir, batch_size=2, name="COCOReader", **kwargs)
        decoded = flow.image.decode(image, dtype=flow.float)
        return (image_id, image_size,
                flow.tensor_buffer_to_tensor_list(decoded, shape=(32, 50, 3), dtype=flow.float),
                flow.tensor_buffer_to_tensor_list(bbox, shape=(8, 4), dtype=flow.float),
                flow.tensor_buffer_to_tensor_list(label, shape=(8,), dtype=flow.int32),
                flow.tensor_buffer_to_tensor_list(segm, shape=(16, 2), dtype=flow.float),
                flow.tensor_buffer_to_tensor_list(segm_index, shape=(16, 3), dtype=flow.int32))

    return load


def test_coco_reader_outputs_match_the_annotations(coco):
    annotation_file, image_dir, pixels = coco
    load = _reader_job(annotation_file, image_dir, shuffle=False)
    seen = []
    for _ in range(3):
        ids, sizes, (images,), (boxes,), (labels,), (segms,), (segm_index,) = load()
        assert ids.dtype == np.int64 and sizes.dtype == np.int32
        for k, image_id in enumerate(ids.tolist()):
            w, h = SIZES[image_id]
            assert sizes[k].tolist() == [h, w]  # legacy: [height, width]
            np.testing.assert_array_equal(images[k][0], pixels[image_id][..., ::-1].astype(np.float32))  # BGR
            np.testing.assert_array_equal(boxes[k][0], _expected_boxes(image_id))
            want_labels = [LABELS[a["category_id"]] for a in ANNOTATIONS if a["image_id"] == image_id
                           and not a["iscrowd"]]
            np.testing.assert_array_equal(labels[k][0], want_labels)
            points, index = _expected_polygons(image_id)
            np.testing.assert_array_equal(segms[k][0], points)
            np.testing.assert_array_equal(segm_index[k][0], index)
        seen.append(ids.tolist())
    # valid images in id order: 1 (group 0), 2 (group 1), 3 and 6 (group 0); a batch holds one
    # height // width group, an image of another waits for its group's next batch (legacy's GroupBatchDataset)
    assert seen == [[1, 3], [2, 2], [6, 1]]


def test_without_grouping_or_removal(coco):
    annotation_file, image_dir, _ = coco
    load = _reader_job(annotation_file, image_dir, shuffle=False, group_by_aspect_ratio=False,
                       remove_images_without_annotations=False)
    assert [load()[0].tolist() for _ in range(4)] == [[1, 2], [3, 4], [5, 6], [1, 2]]


def test_a_seed_repeats_the_shuffled_order(coco):
    annotation_file, image_dir, _ = coco
    orders = []
    for _ in range(2):
        flow.clear_default_session()
        load = _reader_job(annotation_file, image_dir, shuffle=True, random_seed=7, group_by_aspect_ratio=False)
        orders.append([load()[0].tolist() for _ in range(2)])
    assert orders[0] == orders[1]
    assert sorted(sum(orders[0], [])) == [1, 2, 3, 6]  # one epoch: each valid image once


def test_image_buffers_feed_the_detection_ops(coco):
    """Legacy's pipeline: the reader's boxes flipped with their image (image_size rows as [w, h] there)."""
    annotation_file, image_dir, _ = coco

    @flow.global_function()
    def flipped() -> Tuple[tp.Numpy, tp.ListListNumpy]:
        image, image_id, image_size, bbox, *_ = flow.data.coco_reader(annotation_file, image_dir, batch_size=2,
                                                                       shuffle=False, name="COCOReader")
        wh = flow.reverse(image_size, axis=1)  # [height, width] -> [width, height]
        out = flow.detection.object_bbox_flip(bbox, wh, 1)
        return image_id, flow.tensor_buffer_to_tensor_list(out, shape=(8, 4), dtype=flow.float)

    ids, (boxes,) = flipped()
    for k, image_id in enumerate(ids.tolist()):
        want = _expected_boxes(image_id)
        w = SIZES[image_id][0]
        want[:, [0, 2]] = (w - 1) - want[:, [2, 0]]
        np.testing.assert_array_equal(boxes[k][0], want)


def test_a_polygon_of_fewer_than_four_points_is_refused_as_legacy(coco, tmp_path):
    """Legacy's COCOMeta checked every polygon holds more than 6 numbers."""
    annotation_file, image_dir, _ = coco
    data = json.loads(open(annotation_file).read())
    data["annotations"][0]["segmentation"] = [[2.0, 3.0, 11.0, 3.0, 11.0, 10.0]]
    triangle = tmp_path / "triangle.json"
    triangle.write_text(json.dumps(data))
    load = _reader_job(str(triangle), image_dir, shuffle=False)
    with pytest.raises(Exception, match="annotation 10: a polygon needs more than 6 numbers"):
        load()


def test_a_missing_annotation_file_is_named(tmp_path):
    with pytest.raises(OpBuildError, match="annotation_file .*missing.json' does not exist"):
        @flow.global_function()
        def load() -> tp.Numpy:
            return flow.data.coco_reader(str(tmp_path / "missing.json"), str(tmp_path), 2, name="r")[1]

        load()
