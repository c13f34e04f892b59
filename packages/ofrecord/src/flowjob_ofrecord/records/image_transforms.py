"""Op records that make decoded images one blob: resize to a fixed size (or keeping the aspect ratio, still a
handle), crop a handle to one size, and crop-mirror-normalize.

Resizing and cropping register with the reader thread, after the decoder they read, so they too run ahead
of the step; the step only copies their results. Crop-mirror-normalize runs in the step: its mirror flags
are a blob computed there (``flow.random.CoinFlip``).
"""
from __future__ import annotations

import numbers
from typing import Any, Sequence

import numpy as np

from flowjob_core import BlobSpec, Effects, KernelContext, LegacyFace, OpDef, ShapeError
from flowjob_core.ir import dtypes

from flowjob_ofrecord import images
from flowjob_ofrecord.errors import OFRecordError
from flowjob_ofrecord.files import RecordRef
from flowjob_ofrecord.record_pb2 import OFRecord
from flowjob_ofrecord.records.image_decoders import handle_infer
from flowjob_ofrecord.records.reader_nodes import copy_decoded, find_reader


def _resize_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (handle,) = inputs
    if handle.dtype != dtypes.int64 or len(handle.shape) != 1:
        raise ShapeError(f"the input must be an image decoder's blob, got {handle}")
    w, h, c = attrs["target_width"], attrs["target_height"], attrs["channels"]
    for what, v in (("target width", w), ("target height", h), ("channels", c)):
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 1:
            raise ShapeError(f"{what} must be an int >= 1, got {v!r}")
    if c not in (1, 3):
        raise ShapeError(f"channels must be 1 or 3, got {c}")
    if attrs["interpolation_type"] not in images.INTERPOLATIONS:
        raise ShapeError(f"interpolation_type must be one of {images.INTERPOLATIONS}, got "
                         f"{attrs['interpolation_type']!r}")
    dtype = dtypes.as_dtype(attrs["data_type"])
    if dtype not in (dtypes.uint8, dtypes.float32):
        raise ShapeError(f"the resized image's dtype must be uint8 or float32, got {dtype.name}")
    b = handle.shape[0]
    return [BlobSpec((b, h, w, c), dtype), BlobSpec((b, 2), dtypes.float32)]


def _resize_kernel(ctx: KernelContext) -> Any:
    reader = find_reader(ctx)
    attrs, node = ctx.attrs, ctx.node_name
    source, w, h, c = attrs["source"], attrs["target_width"], attrs["target_height"], attrs["channels"]
    spec = ctx.outputs[0]

    def resize(records: list[OFRecord], refs: list[RecordRef], decoded: dict) -> tuple[np.ndarray, np.ndarray]:
        batch = np.empty(spec.shape, dtype=spec.dtype)
        scale = np.empty((len(refs), 2), dtype=np.float32)
        pictures = decoded[source]
        for pixels, ref in zip(pictures, refs):
            if pixels.shape[2] != c:
                raise OFRecordError(f"{node}: the image of {ref.where()} has {pixels.shape[2]} channels, "
                                    f"channels={c}")

        def one(i: int) -> None:
            batch[i] = images.resize(pictures[i], w, h, attrs["interpolation_type"])
            scale[i] = (w / pictures[i].shape[1], h / pictures[i].shape[0])

        images.parallel_map(one, range(len(refs)), pixels=sum(p.shape[0] * p.shape[1] for p in pictures))
        return batch, scale

    reader.add_decoder(node, resize)
    out, out_scale, xp = ctx.out(0), ctx.out(1), ctx.xp

    def run(_ids: Any) -> Any:
        assert reader.current is not None
        batch, scale = reader.current.decoded[node]
        out[...] = xp.asarray(batch)
        out_scale[...] = xp.asarray(scale)
        return out, out_scale

    return run


def _keep_ratio_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (handle,) = handle_infer(inputs, attrs)
    for key in ("target_size", "min_size", "max_size"):
        v = attrs[key]
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < (1 if key == "target_size" else 0):
            raise ShapeError(f"{key} must be an int >= {1 if key == 'target_size' else 0}, got {v!r}")
    if attrs["interpolation_type"] not in images.INTERPOLATIONS:
        raise ShapeError(f"interpolation_type must be one of {images.INTERPOLATIONS}, got "
                         f"{attrs['interpolation_type']!r}")
    b = handle.shape[0]
    return [handle, BlobSpec((b, 2), dtypes.float32), BlobSpec((b, 2), dtypes.int32)]


def _keep_ratio_kernel(ctx: KernelContext) -> Any:
    """Resizes in the reader thread; the images stay there (a handle), their scales and sizes are blobs."""
    reader = find_reader(ctx)
    attrs, node = ctx.attrs, ctx.node_name
    source = attrs["source"]

    def resize(records: list[OFRecord], refs: list[RecordRef], decoded: dict) -> list[np.ndarray]:
        pictures = decoded[source]
        sizes = [images.aspect_size(p.shape[0], p.shape[1], attrs["target_size"], attrs["resize_longer"],
                                    attrs["min_size"], attrs["max_size"]) for p in pictures]
        out = images.parallel_map(lambda k: images.resize(pictures[k], sizes[k][1], sizes[k][0],
                                                          attrs["interpolation_type"]), range(len(refs)),
                                  pixels=sum(p.shape[0] * p.shape[1] for p in pictures))
        scale = np.array([(w / p.shape[1], h / p.shape[0]) for p, (h, w) in zip(pictures, sizes)], np.float32)
        decoded[f"{node}:meta"] = (scale, np.array([(w, h) for h, w in sizes], np.int32))
        return out

    reader.add_decoder(node, resize)
    out_ids, out_scale, out_size, xp = ctx.out(0), ctx.out(1), ctx.out(2), ctx.xp

    def run(ids: Any) -> Any:
        assert reader.current is not None
        scale, size = reader.current.decoded[f"{node}:meta"]
        out_ids[...] = ids
        out_scale[...] = xp.asarray(scale)
        out_size[...] = xp.asarray(size)
        return out_ids, out_scale, out_size

    return run


def _crop_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (handle,) = handle_infer(inputs, attrs)
    h, w, c = attrs["crop_h"], attrs["crop_w"], attrs["channels"]
    if not all(isinstance(v, numbers.Integral) and not isinstance(v, bool) and v >= 1 for v in (h, w)):
        raise ShapeError(f"images of differing sizes need crop_h and crop_w >= 1 to make one blob, got {h}, {w}")
    for key in ("crop_pos_y", "crop_pos_x"):
        if not 0.0 <= attrs[key] <= 1.0:
            raise ShapeError(f"{key} must be in [0, 1], got {attrs[key]!r}")
    return [BlobSpec((handle.shape[0], h, w, c), dtypes.uint8)]


def _crop_kernel(ctx: KernelContext) -> Any:
    """Crops each image of a handle to one size in the reader thread, at crop_pos * (size - crop)."""
    reader = find_reader(ctx)
    attrs, node, spec = ctx.attrs, ctx.node_name, ctx.outputs[0]
    source, ch, cw = attrs["source"], attrs["crop_h"], attrs["crop_w"]

    def crop(records: list[OFRecord], refs: list[RecordRef], decoded: dict) -> np.ndarray:
        batch = np.empty(spec.shape, dtype=np.uint8)
        for i, (pixels, ref) in enumerate(zip(decoded[source], refs)):
            h, w = pixels.shape[:2]
            if h < ch or w < cw:
                raise OFRecordError(f"{node}: the {h}x{w} image of {ref.where()} is smaller than the {ch}x{cw} crop")
            y0, x0 = int(attrs["crop_pos_y"] * (h - ch)), int(attrs["crop_pos_x"] * (w - cw))
            batch[i] = pixels[y0:y0 + ch, x0:x0 + cw]
        return batch

    reader.add_decoder(node, crop)
    return copy_decoded(ctx, reader)


def _cmn_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    x = inputs[0]
    if x.dtype != dtypes.uint8 or len(x.shape) != 4:
        raise ShapeError(f"the input must be uint8 images (batch, height, width, channels), got {x}")
    b, h, w, c = x.shape
    if len(inputs) == 2 and (inputs[1].shape != (b,)):
        raise ShapeError(f"mirror_blob must have shape ({b},), got {inputs[1].shape}")
    crop_h, crop_w = attrs["crop_h"] or h, attrs["crop_w"] or w
    if not (0 < crop_h <= h and 0 < crop_w <= w):
        raise ShapeError(f"the crop {attrs['crop_h']}x{attrs['crop_w']} does not fit the {h}x{w} images")
    for key in ("crop_pos_y", "crop_pos_x"):
        if not 0.0 <= attrs[key] <= 1.0:
            raise ShapeError(f"{key} must be in [0, 1], got {attrs[key]!r}")
    for key in ("mean", "std"):
        if len(attrs[key]) not in (1, c):
            raise ShapeError(f"{key} must hold 1 or {c} values, got {list(attrs[key])}")
    if attrs["output_layout"] not in ("NCHW", "NHWC"):
        raise ShapeError(f"output_layout must be 'NCHW' or 'NHWC', got {attrs['output_layout']!r}")
    dtype = dtypes.as_dtype(attrs["output_dtype"])
    if not dtypes.is_floating(dtype):
        raise ShapeError(f"output_dtype must be a floating dtype, got {dtype.name}")
    shape = (b, c, crop_h, crop_w) if attrs["output_layout"] == "NCHW" else (b, crop_h, crop_w, c)
    return [BlobSpec(shape, dtype)]


def _cmn_kernel(ctx: KernelContext) -> Any:
    xp, attrs, out = ctx.xp, ctx.attrs, ctx.out(0)
    b, h, w, c = ctx.inputs[0].shape
    crop_h, crop_w = attrs["crop_h"] or h, attrs["crop_w"] or w
    # the window's corner, as legacy placed it: pos * (size - crop), truncated
    y0, x0 = int(attrs["crop_pos_y"] * (h - crop_h)), int(attrs["crop_pos_x"] * (w - crop_w))
    dtype = out.dtype
    mean = xp.asarray(np.broadcast_to(np.asarray(attrs["mean"], np.float64), (c,)).astype(dtype))
    inv_std = xp.asarray((1.0 / np.broadcast_to(np.asarray(attrs["std"], np.float64), (c,))).astype(dtype))
    nchw = attrs["output_layout"] == "NCHW"
    work = ctx.scratch((b, crop_h, crop_w, c), dtype)

    def run(x: Any, mirror: Any = None) -> Any:
        window = x[:, y0:y0 + crop_h, x0:x0 + crop_w, :]
        if mirror is not None:
            flip = xp.asarray(mirror).astype(bool)
            window = xp.where(flip[:, None, None, None], window[:, :, ::-1, :], window)
        xp.subtract(window, mean, out=work, casting="unsafe")
        xp.multiply(work, inv_std, out=work)
        out[...] = work.transpose(0, 3, 1, 2) if nchw else work
        return out

    return run


IMAGE_RESIZE_TO_FIXED = OpDef(
    "image_resize_to_fixed", _resize_infer, kernel=_resize_kernel, not_differentiable=True,
    doc="Decoded images resized to (batch, h, w, C), and each image's (w, h) scale, float32",
    effects=Effects(host_state=True), legacy=LegacyFace(name_prefix="ImageResize", output_names=("out", "scale")))
IMAGE_RESIZE_KEEP_ASPECT_RATIO = OpDef(
    "image_resize_keep_aspect_ratio", _keep_ratio_infer, kernel=_keep_ratio_kernel, not_differentiable=True,
    doc="Decoded images resized keeping their aspect ratio (a handle), their (w, h) scales and (w, h) sizes",
    effects=Effects(host_state=True),
    legacy=LegacyFace(name_prefix="ImageResize", output_names=("out", "scale", "size")))
IMAGE_CROP_FROM_TENSORBUFFER = OpDef(
    "image_crop_from_tensorbuffer", _crop_infer, kernel=_crop_kernel, not_differentiable=True,
    doc="Images of differing sizes (a handle) cropped to one (batch, crop_h, crop_w, C) uint8 blob",
    effects=Effects(host_state=True), legacy=LegacyFace(name_prefix="CropMirrorNormalize_Crop"))

CROP_MIRROR_NORMALIZE = OpDef(
    "crop_mirror_normalize_from_uint8", _cmn_infer, kernel=_cmn_kernel, not_differentiable=True,
    doc="Crops a window, flips the images whose mirror flag is set, subtracts mean and divides by std",
    effects=Effects(host_state=True), legacy=LegacyFace(name_prefix="CropMirrorNormalize"))

OPS = (IMAGE_RESIZE_TO_FIXED, IMAGE_RESIZE_KEEP_ASPECT_RATIO, IMAGE_CROP_FROM_TENSORBUFFER, CROP_MIRROR_NORMALIZE)
