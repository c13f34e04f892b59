"""The op record of legacy's ``coco_reader``: a source whose outputs are one COCO batch per step.

Outputs, as legacy's: ``image`` (a tensor buffer of each image file's bytes, int8), ``image_id`` (int64),
``image_size`` (int32 ``[height, width]`` rows), ``gt_bbox`` (float32 (n, 4) boxes), ``gt_label`` (int32 (n,)),
``gt_segm`` (float32 (points, 2)) and ``gt_segm_index`` (int32 (points, 3) ``[point, polygon, object]``), the
last four tensor buffers with one element per image. The annotation file is indexed when the plan is built;
the images are read in the step.
"""
from __future__ import annotations

import numbers
from typing import Any, Sequence

import numpy as np

from flowjob_core import BlobSpec, Effects, KernelContext, LegacyFace, OpDef, ShapeError
from flowjob_core.ir import dtypes

from flowjob_ofrecord.coco import CocoIndex, CocoSampler

OUTPUTS = ("image", "image_id", "image_size", "gt_bbox", "gt_label", "gt_segm", "gt_segm_index")


def local_batch(attrs: dict) -> int:
    """The images this process reads per step: its share of ``batch_size``."""
    size, world = attrs["batch_size"], attrs.get("world", 1)
    if isinstance(size, bool) or not isinstance(size, numbers.Integral) or size < 1:
        raise ShapeError(f"batch_size must be an int >= 1, got {size!r}")
    if size % world:
        raise ShapeError(f"batch_size {size} does not split over the {world} processes")
    return int(size // world)


def _infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    if inputs:
        raise ShapeError(f"coco_reader takes no input, got {len(inputs)}")
    n = local_batch(attrs)
    buffer = dtypes.tensor_buffer
    return [BlobSpec((n,), buffer), BlobSpec((n,), np.int64), BlobSpec((n, 2), np.int32), BlobSpec((n,), buffer),
            BlobSpec((n,), buffer), BlobSpec((n,), buffer), BlobSpec((n,), buffer)]


def _buffer(items: list[Any]) -> np.ndarray:
    out = np.empty(len(items), dtype=object)
    for i, item in enumerate(items):
        out[i] = item
    return out


def _kernel(ctx: KernelContext) -> Any:
    attrs, xp = ctx.attrs, ctx.xp
    index = CocoIndex(attrs["annotation_file"], attrs["image_dir"], attrs["remove_images_without_annotations"])
    sampler = CocoSampler(index, local_batch(attrs), attrs.get("world", 1), attrs.get("rank", 0),
                          attrs["stride_partition"], attrs["shuffle_after_epoch"], attrs["random_seed"],
                          attrs["group_by_ratio"])
    image_id, image_size = ctx.out(1), ctx.out(2)

    def run() -> tuple:
        batch = sampler.next_batch()
        images = [index.images[k] for k in batch]
        image_id[...] = xp.asarray(np.array([i.id for i in images], np.int64))
        image_size[...] = xp.asarray(np.array([(i.height, i.width) for i in images], np.int32).reshape(-1, 2))
        polygons = [index.polygons(k) for k in batch]

        def each(read: Any) -> np.ndarray:
            return _buffer([xp.asarray(read(k)) for k in batch])

        return (each(index.encoded), image_id, image_size, each(index.boxes), each(index.labels),
                _buffer([xp.asarray(p) for p, _ in polygons]), _buffer([xp.asarray(q) for _, q in polygons]))

    return run


COCO_READER = OpDef("coco_reader", _infer, kernel=_kernel, not_differentiable=True,
                    doc="one COCO batch per step: image bytes, ids, sizes, boxes, labels and polygons",
                    effects=Effects(host_state=True, effect=True),
                    legacy=LegacyFace(name_prefix="COCOReader", output_names=OUTPUTS))

OPS = (COCO_READER,)
