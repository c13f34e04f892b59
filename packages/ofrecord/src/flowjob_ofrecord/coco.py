"""COCO detection data as legacy's ``coco_reader`` read it: the annotation JSON indexed, and the batches drawn.

``CocoIndex`` follows legacy's COCOMeta: crowd annotations are left out; with
``remove_images_without_annotations`` an image is kept only if some box is larger than 1x1 (and, for keypoint
annotations, at least 10 keypoints are visible); images are sorted by id; categories get contiguous labels from
1 in id order; boxes ``[x, y, w, h]`` become ``[x1, y1, x2, y2]`` with ``x2 = x + max(w - 1, 0)``, clipped to the
image, and empty ones are dropped; polygons become (points, 2) coordinates with a ``[point, polygon, object]``
row per point.

``CocoSampler`` follows legacy's DistributedTrainingDataset and GroupBatchDataset: a shard's walk over the
image order (contiguous or strided shards), a new permutation every epoch when shuffling (seeded with
``seed + epoch``), and batches of one aspect-ratio group (``height // width``), images of other groups waiting
in their group's next batch.
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
import numpy as np

from flowjob_ofrecord.errors import OFRecordError

MIN_KEYPOINTS = 10  # legacy's kMinKeypointsPerImage


@dataclass(frozen=True)
class CocoImage:
    id: int
    height: int
    width: int
    path: str
    annotations: tuple[dict, ...]


class CocoIndex:
    """The images of one annotation file, in legacy's order, and their targets."""

    def __init__(self, annotation_file: str, image_dir: str, remove_images_without_annotations: bool) -> None:
        try:
            with open(annotation_file, "rb") as f:
                data = json.load(f)
        except (OSError, ValueError) as exc:
            raise OFRecordError(f"coco_reader: cannot read the annotation file {annotation_file!r}: {exc}") from None
        self.where = annotation_file
        by_image: dict[int, list[dict]] = {}
        images = {}
        for image in data.get("images", ()):
            images[int(image["id"])] = image
            by_image.setdefault(int(image["id"]), [])
        for anno in data.get("annotations", ()):
            if int(anno.get("iscrowd", 0)) == 1:  # crowd regions are left out, as legacy
                continue
            segmentation = anno.get("segmentation")
            if isinstance(segmentation, list) and any(len(poly) <= 6 for poly in segmentation):
                raise OFRecordError(f"coco_reader: {annotation_file!r}, annotation {anno.get('id')}: a polygon needs "
                                    f"more than 6 numbers (at least 4 points: legacy's check)")
            if int(anno["image_id"]) not in by_image:
                raise OFRecordError(f"coco_reader: {annotation_file!r}, annotation {anno.get('id')} names image "
                                    f"{anno['image_id']}, which the file does not list")
            by_image[int(anno["image_id"])].append(anno)
        kept = sorted(i for i in images if not remove_images_without_annotations or _valid(by_image[i]))
        self.images = [CocoImage(i, int(images[i]["height"]), int(images[i]["width"]),
                                 os.path.join(image_dir, images[i]["file_name"]), tuple(by_image[i])) for i in kept]
        categories = sorted(int(c["id"]) for c in data.get("categories", ()))
        self.label_of = {c: k + 1 for k, c in enumerate(categories)}

    def __len__(self) -> int:
        return len(self.images)

    def encoded(self, k: int) -> np.ndarray:
        """The image file's bytes (int8, as legacy's reader gave them)."""
        try:
            with open(self.images[k].path, "rb") as f:
                return np.frombuffer(f.read(), dtype=np.int8).copy()
        except OSError as exc:
            raise OFRecordError(f"coco_reader: image {self.images[k].id} of {self.where!r}: {exc}") from None

    def boxes(self, k: int) -> np.ndarray:
        image = self.images[k]
        out = []
        for anno in image.annotations:
            left, top, width, height = (float(v) for v in anno["bbox"])
            right, bottom = left + max(width - 1.0, 0.0), top + max(height - 1.0, 0.0)
            left, right = (min(max(v, 0.0), image.width - 1.0) for v in (left, right))
            top, bottom = (min(max(v, 0.0), image.height - 1.0) for v in (top, bottom))
            if right > left and bottom > top:
                out.append((left, top, right, bottom))
        return np.array(out, dtype=np.float32).reshape(len(out), 4)

    def labels(self, k: int) -> np.ndarray:
        try:
            return np.array([self.label_of[int(a["category_id"])] for a in self.images[k].annotations], np.int32)
        except KeyError as exc:
            raise OFRecordError(f"coco_reader: {self.where!r}, image {self.images[k].id}: category {exc} is not in "
                                f"the file's categories") from None

    def polygons(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        points, index = [], []
        annotations = self.images[k].annotations
        segm_objects = [a["segmentation"] for a in annotations if isinstance(a.get("segmentation"), list)]
        for obj, polys in enumerate(segm_objects):
            for poly_k, poly in enumerate(polys):
                if len(poly) % 2:
                    raise OFRecordError(f"coco_reader: {self.where!r}, image {self.images[k].id}: a polygon holds an "
                                        f"odd count of numbers ({len(poly)})")
                points += poly
                index += [(pt, poly_k, obj) for pt in range(len(poly) // 2)]
        return (np.array(points, np.float32).reshape(-1, 2), np.array(index, np.int32).reshape(-1, 3))


def _valid(annotations: list[dict]) -> bool:
    """Legacy's ImageHasValidAnnotations."""
    if not annotations:
        return False
    if all(float(a["bbox"][2]) <= 1 or float(a["bbox"][3]) <= 1 for a in annotations):
        return False
    if "keypoints" not in annotations[0]:
        return True
    visible = sum(1 for a in annotations for v in a.get("keypoints", ())[2::3] if v > 0)
    return visible >= MIN_KEYPOINTS


class CocoSampler:
    """Which images a shard's batches hold, batch after batch."""

    def __init__(self, index: CocoIndex, batch_size: int, shards: int, shard: int, stride_partition: bool,
                 shuffle: bool, seed: int, group_by_ratio: bool) -> None:
        if len(index) == 0:
            raise OFRecordError(f"coco_reader: {index.where!r} holds no image to read")
        self.index, self.batch_size, self.shards = index, batch_size, shards
        self.stride, self.shuffle, self.seed, self.group = stride_partition, shuffle, seed, group_by_ratio
        self.shard_size = math.ceil(len(index) / shards)
        self.pos = shard if stride_partition else shard * self.shard_size
        self.pos_in_shard, self.epoch = 0, 0
        self.order = np.arange(len(index))
        self._new_epoch()
        self.waiting: dict[int, list[list[int]]] = {}  # group -> its started batches, oldest first
        self.started: dict[int, int] = {}  # id(batch) -> the order it was started in
        self.count = 0

    def _new_epoch(self) -> None:
        if self.shuffle:
            self.order = np.random.default_rng(self.seed + self.epoch).permutation(len(self.index))
        self.epoch += 1

    def _next(self) -> int:
        k = int(self.order[self.pos])
        if self.stride:
            self.pos += self.shards
        else:
            self.pos += 1
            self.pos_in_shard += 1
            if self.pos_in_shard == self.shard_size:
                self.pos += (self.shards - 1) * self.shard_size
                self.pos_in_shard = 0
        if self.pos >= len(self.order):
            self._new_epoch()
            self.pos %= len(self.order)
        return k

    def _group(self, k: int) -> int:
        image = self.index.images[k]
        return image.height // image.width if self.group else 0

    def next_batch(self) -> list[int]:
        """The image positions of the next batch (GroupBatchDataset: the earliest started group first)."""
        group, batch = None, []
        started = [(self.started[id(bs[0])], g) for g, bs in self.waiting.items() if bs]
        if started:
            group = min(started)[1]
            batch = self.waiting[group].pop(0)
            del self.started[id(batch)]
        while len(batch) < self.batch_size:
            k = self._next()
            g = self._group(k)
            if group is None:
                group = g
            if g == group:
                batch.append(k)
                continue
            pending = self.waiting.setdefault(g, [])
            if not pending or len(pending[-1]) == self.batch_size:
                pending.append([k])
                self.started[id(pending[-1])] = self.count
                self.count += 1
            else:
                pending[-1].append(k)
        return batch
