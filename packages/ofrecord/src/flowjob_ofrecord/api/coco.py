"""Legacy ``flow.data.coco_reader``: COCO detection batches from an annotation JSON and its image folder."""
from __future__ import annotations

import os
import random

from flowjob_core import Blob, OpBuildError, apply, current_builder

from flowjob_ofrecord.reader import shard

__all__ = ["coco_reader"]


def coco_reader(annotation_file: str, image_dir: str, batch_size: int, shuffle: bool = True,
                random_seed: int | None = None, group_by_aspect_ratio: bool = True, stride_partition: bool = True,
                remove_images_without_annotations: bool = True, name: str | None = None) -> tuple[Blob, ...]:
    """The next ``batch_size`` COCO images and their annotations at every step, as legacy's reader gave them.

    Args:
        annotation_file: a COCO ``instances_*.json``.
        image_dir: the folder of its images' ``file_name``s.
        batch_size: images per step, over all processes (each reads its share).
        shuffle: a new order every epoch (seeded with ``random_seed + epoch``).
        random_seed: default a random one (legacy's), so the order differs per run.
        group_by_aspect_ratio: a batch holds images of one ``height // width`` group only.
        stride_partition: processes take every ``world``-th image (else contiguous shares).
        remove_images_without_annotations: skip images without a box larger than 1x1 (legacy's test).
        name: the op name; default ``COCOReader_<n>``.

    Returns:
        ``(image, image_id, image_size, gt_bbox, gt_label, gt_segm, gt_segm_index)``: ``image`` a tensor buffer
        of each file's bytes (``flow.image.decode`` decodes it), ``image_id`` int64, ``image_size`` int32
        ``[height, width]`` rows, and tensor buffers of float32 (n, 4) boxes ``[x1, y1, x2, y2]``, int32 labels
        (categories numbered from 1 in id order), float32 (points, 2) polygon points and their int32
        ``[point, polygon, object]`` rows.
    """
    for arg, path, check in (("annotation_file", annotation_file, os.path.isfile), ("image_dir", image_dir,
                                                                                    os.path.isdir)):
        if not check(path):
            raise OpBuildError(f"flow.data.coco_reader: {arg} {path!r} does not exist")
    session = current_builder("flow.data.coco_reader").session
    rank, world = shard(session)
    seed = random.randrange(2 ** 31) if random_seed is None else int(random_seed)
    attrs = {"annotation_file": os.fspath(annotation_file), "image_dir": os.fspath(image_dir),
             "batch_size": batch_size, "shuffle_after_epoch": bool(shuffle), "random_seed": seed,
             "group_by_ratio": bool(group_by_aspect_ratio), "stride_partition": bool(stride_partition),
             "remove_images_without_annotations": bool(remove_images_without_annotations), "rank": rank,
             "world": world}
    return tuple(apply("coco_reader", [], attrs, name=name))
