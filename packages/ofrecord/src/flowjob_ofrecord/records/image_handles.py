"""Op records of legacy's ``flow.image`` ops over tensor buffers, on this design's image handles.

A handle (the batch's record ids) stands for images the reader thread holds; these ops register with that
thread after the op they read, so they too run ahead of the step: decode an ``OFRecordBytesDecoder``'s bytes,
flip by a fixed code, crop at random, normalize (the images become float32), and ``image_batch_align``,
which pastes the images into one zero-padded blob.
"""
from __future__ import annotations

import numbers
from typing import Any, Callable, Sequence

import numpy as np

from flowjob_core import BlobSpec, Effects, KernelContext, LegacyFace, OpDef, ShapeError
from flowjob_core.ir import dtypes

from flowjob_ofrecord import images
from flowjob_ofrecord.errors import OFRecordError
from flowjob_ofrecord.files import RecordRef
from flowjob_ofrecord.record_pb2 import OFRecord
from flowjob_ofrecord.records.image_decoders import handle_infer
from flowjob_ofrecord.records.reader_nodes import copy_decoded, find_reader

Transform = Callable[[list, list[RecordRef], str], list]


def _handle_kernel(transform: Callable[[KernelContext], Transform]) -> Callable[[KernelContext], Any]:
    """A kernel whose work is done in the reader thread on its source's images; the step passes the ids on."""

    def kernel(ctx: KernelContext) -> Any:
        reader, node, source = find_reader(ctx), ctx.node_name, ctx.attrs["source"]
        one_batch = transform(ctx)

        def run_in_thread(_records: list[OFRecord], refs: list[RecordRef], decoded: dict) -> list:
            return one_batch(decoded[source], refs, node)

        reader.add_decoder(node, run_in_thread)
        out = ctx.out(0)

        def run(ids: Any) -> Any:
            out[...] = ids
            return out

        return run

    return kernel


def _decode(ctx: KernelContext) -> Transform:
    color_space, key = images.check_color_space(ctx.attrs["color_space"]), ctx.attrs["feature"]

    def one_batch(encoded: list, refs: list[RecordRef], node: str) -> list:
        opened = [images.open_image(data, ref, key, node) for data, ref in zip(encoded, refs)]
        return images.parallel_map(lambda k: images.decode(opened[k], None, color_space, refs[k], key, node),
                                   range(len(refs)))

    return one_batch


def _flip(ctx: KernelContext) -> Transform:
    code = int(ctx.attrs["flip_code"])

    def one_batch(pictures: list, _refs: list[RecordRef], _node: str) -> list:
        out = []
        for pixels in pictures:
            if code & 0x01:  # horizontal: mirror the columns
                pixels = pixels[:, ::-1]
            if code & 0x10:  # vertical: mirror the rows
                pixels = pixels[::-1]
            out.append(np.ascontiguousarray(pixels))
        return out

    return one_batch


def _random_crop(ctx: KernelContext) -> Transform:
    attrs = ctx.attrs
    # one generator used in record order by the one reader thread: the crops repeat with the seed
    rng = np.random.default_rng(attrs.get("seed"))
    area, ratio = tuple(attrs["random_area"]), tuple(attrs["random_aspect_ratio"])

    def one_batch(pictures: list, _refs: list[RecordRef], _node: str) -> list:
        out = []
        for pixels in pictures:
            left, top, right, bottom = images.random_crop_box(pixels.shape[1], pixels.shape[0], rng,
                                                              attrs["num_attempts"], area, ratio)
            out.append(np.ascontiguousarray(pixels[top:bottom, left:right]))
        return out

    return one_batch


def _normalize(ctx: KernelContext) -> Transform:
    mean = np.asarray(ctx.attrs["mean"], np.float32)
    inv_std = (1.0 / np.asarray(ctx.attrs["std"], np.float64)).astype(np.float32)

    def one_batch(pictures: list, refs: list[RecordRef], node: str) -> list:
        out = []
        for pixels, ref in zip(pictures, refs):
            if len(mean) not in (1, pixels.shape[2]) or len(inv_std) not in (1, pixels.shape[2]):
                raise OFRecordError(f"{node}: the image of {ref.where()} has {pixels.shape[2]} channels; mean and "
                                    f"std hold {len(mean)} and {len(inv_std)} values")
            out.append((pixels.astype(np.float32) - mean) * inv_std)
        return out

    return one_batch


def _int_list(attrs: dict, key: str, count: int, low: int) -> tuple[int, ...]:
    value = tuple(attrs[key])
    if len(value) != count or any(isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < low
                                  for v in value):
        raise ShapeError(f"{key} must hold {count} ints >= {low}, got {attrs[key]!r}")
    return value


def _decode_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    images.check_color_space(attrs["color_space"])
    if dtypes.as_dtype(attrs["data_type"]) != dtypes.uint8:
        raise ShapeError(f"decoded images are uint8, got data_type {attrs['data_type']!r}")
    return handle_infer(inputs, attrs)


def _flip_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    code = attrs["flip_code"]
    if isinstance(code, bool) or not isinstance(code, numbers.Integral) or code not in (0, 0x01, 0x10, 0x11):
        raise ShapeError(f"flip_code must be 0, 1 (horizontal), 16 (vertical) or 17 (both), got {code!r}")
    return handle_infer(inputs, attrs)


def _random_crop_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    n = attrs["num_attempts"]
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
        raise ShapeError(f"num_attempts must be an int >= 1, got {n!r}")
    return handle_infer(inputs, attrs)


def _normalize_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    for key in ("mean", "std"):
        if len(attrs[key]) == 0:
            raise ShapeError(f"{key} must hold 1 value or one per channel, got none")
    if any(float(s) == 0.0 for s in attrs["std"]):
        raise ShapeError(f"std must not hold 0, got {list(attrs['std'])}")
    return handle_infer(inputs, attrs)


def _align(size: int, alignment: int) -> int:
    return (size + alignment - 1) // alignment * alignment


def _batch_align_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (handle,) = handle_infer(inputs, attrs)
    h, w, c = _int_list(attrs, "shape", 3, 1)
    alignment = attrs["alignment"]
    if isinstance(alignment, bool) or not isinstance(alignment, numbers.Integral) or alignment < 1:
        raise ShapeError(f"alignment must be an int >= 1, got {alignment!r}")
    dtype = dtypes.as_dtype(attrs["data_type"])
    if dtype not in (dtypes.uint8, dtypes.float32):
        raise ShapeError(f"the aligned batch's dtype must be uint8 or float32, got {dtype.name}")
    return [BlobSpec((handle.shape[0], _align(h, alignment), _align(w, alignment), c), dtype)]


def _batch_align_kernel(ctx: KernelContext) -> Any:
    """Pastes each image at the top-left corner of a zeroed (H, W, C) slot, in the reader thread."""
    reader, node, spec = find_reader(ctx), ctx.node_name, ctx.outputs[0]
    source, (max_h, max_w, channels) = ctx.attrs["source"], tuple(ctx.attrs["shape"])

    def align(_records: list[OFRecord], refs: list[RecordRef], decoded: dict) -> np.ndarray:
        batch = np.zeros(spec.shape, dtype=spec.dtype)
        for i, (pixels, ref) in enumerate(zip(decoded[source], refs)):
            h, w, c = pixels.shape
            if h > max_h or w > max_w or c != channels:
                raise OFRecordError(f"{node}: the {h}x{w}x{c} image of {ref.where()} does not fit the shape "
                                    f"({max_h}, {max_w}, {channels})")
            batch[i, :h, :w] = pixels
        return batch

    reader.add_decoder(node, align)
    return copy_decoded(ctx, reader)


def _op(name: str, infer: Any, transform: Callable[[KernelContext], Transform], prefix: str, doc: str) -> OpDef:
    return OpDef(name, infer, kernel=_handle_kernel(transform), not_differentiable=True, doc=doc,
                 legacy=LegacyFace(name_prefix=prefix))


IMAGE_DECODE = _op("image_decode", _decode_infer, _decode, "ImageDecode",
                   "Encoded images (a bytes decoder's handle) decoded in the reader thread; a handle")
IMAGE_FLIP = _op("image_flip", _flip_infer, _flip, "ImageFlip",
                 "Images of a handle flipped by a fixed code (1 horizontal, 16 vertical, 17 both); a handle")
IMAGE_RANDOM_CROP = _op("image_random_crop", _random_crop_infer, _random_crop, "ImageRandomCrop",
                        "A random crop (area fraction, log-uniform aspect ratio) of each image of a handle")
IMAGE_NORMALIZE = _op("image_normalize", _normalize_infer, _normalize, "ImageNormalize",
                      "(image - mean) / std per channel for each image of a handle, float32; a handle")
IMAGE_BATCH_ALIGN = OpDef(
    "image_batch_align", _batch_align_infer, kernel=_batch_align_kernel, not_differentiable=True,
    doc="Images of a handle pasted top-left into one zero-padded (batch, H, W, C) blob, H and W aligned",
    effects=Effects(host_state=True))

OPS = (IMAGE_DECODE, IMAGE_FLIP, IMAGE_RANDOM_CROP, IMAGE_NORMALIZE, IMAGE_BATCH_ALIGN)
