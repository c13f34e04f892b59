"""Images of tensor buffers, each element one (H, W, C) image, worked on in the step (legacy's image ops over
buffers made by ``coco_reader`` or ``flow.tensor_list_to_tensor_buffer``): decoding encoded files with Pillow,
flipping, resizing to a target size keeping the aspect ratio (scales and new ``(w, h)`` sizes as blobs, as the
reader-thread variant gives), normalizing per channel, and pasting into one zero-padded batch."""
from __future__ import annotations

import io
import numbers
from typing import Any, Callable, Sequence

import numpy as np

from flowjob_core import BlobSpec, Effects, KernelContext, LegacyFace, OpDef, ShapeError
from flowjob_core.ir import dtypes

from flowjob_ofrecord import images
from flowjob_ofrecord.errors import OFRecordError, require_pillow

DECODED = (dtypes.uint8, dtypes.float32)


def _infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (x,) = inputs
    if x.dtype != dtypes.tensor_buffer:
        raise ShapeError(f"the input must be a tensor buffer of encoded images, got {x}")
    images.check_color_space(attrs["color_space"])
    if dtypes.as_dtype(attrs["data_type"]) not in DECODED:
        raise ShapeError(f"images decode to uint8 or float32, got data_type {attrs['data_type']!r}")
    return [BlobSpec(x.shape, dtypes.tensor_buffer)]


def _kernel(ctx: KernelContext) -> Any:
    Image = require_pillow(ctx.node_name)
    color_space, node, xp = images.check_color_space(ctx.attrs["color_space"]), ctx.node_name, ctx.xp
    dtype = dtypes.as_dtype(ctx.attrs["data_type"])
    to_host = ctx.backend.to_host

    def one(encoded: Any, k: int) -> Any:
        data = np.asarray(to_host(encoded)).tobytes()
        try:
            picture = Image.open(io.BytesIO(data))
            picture.load()
        except Exception as exc:  # Pillow raises several kinds for bytes that are not an image
            raise OFRecordError(f"{node}: tensor buffer element {k} is not a decodable image: {exc}") from None
        return xp.asarray(images.to_array(picture, color_space).astype(dtype))

    def run(buffer: Any) -> Any:
        flat = buffer.reshape(-1)
        out = np.empty(buffer.shape, dtype=object)
        for k, element in enumerate(flat):
            out.reshape(-1)[k] = one(element, k)
        return out

    return run


IMAGE_DECODE_TENSOR_BUFFER = OpDef(
    "image_decode_tensor_buffer", _infer, kernel=_kernel, not_differentiable=True,
    doc="each element's encoded image decoded to (H, W, C) pixels of data_type (BGR, RGB or GRAY)",
    effects=Effects(host_state=True), legacy=LegacyFace(name_prefix="ImageDecode"))



def _images(inputs: Sequence[BlobSpec]) -> BlobSpec:
    x = inputs[0]
    if x.dtype != dtypes.tensor_buffer or len(x.shape) != 1:
        raise ShapeError(f"the images must be a one-axis tensor buffer, got {x}")
    return x


def _each(ctx: KernelContext, one: Callable[[np.ndarray, int], np.ndarray]) -> Callable[[Any], np.ndarray]:
    """A buffer of ``one(image, k)`` for each (H, W, C) image of the input buffer (computed on the host)."""
    to_host, xp, node = ctx.backend.to_host, ctx.xp, ctx.node_name

    def run(buffer: Any) -> np.ndarray:
        out = np.empty(buffer.shape, dtype=object)
        for k, element in enumerate(buffer.reshape(-1)):
            pixels = np.asarray(to_host(element))
            if pixels.ndim != 3:
                raise OFRecordError(f"{node}: tensor buffer element {k} is not an (H, W, C) image: {pixels.shape}")
            out[k] = xp.asarray(one(pixels, k))
        return out

    return run


# flip -------------------------------------------------------------------------------------------
def _flip_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    x = _images(inputs)
    if len(inputs) == 2 and (inputs[1].shape != x.shape or inputs[1].dtype.kind not in "iu"):
        raise ShapeError(f"flip_code must be integers, one per image {x.shape}, got {inputs[1]}")
    return [x]


def _flip(pixels: np.ndarray, code: int) -> np.ndarray:
    if code & 0x01:
        pixels = pixels[:, ::-1]
    if code & 0x10:
        pixels = pixels[::-1]
    return np.ascontiguousarray(pixels)


def _flip_kernel(ctx: KernelContext) -> Any:
    fixed, to_host = ctx.attrs.get("flip_code"), ctx.backend.to_host
    codes: list[Any] = [None]
    each = _each(ctx, lambda pixels, k: _flip(pixels, int(fixed if codes[0] is None else codes[0][k])))

    def run(buffer: Any, *code: Any) -> np.ndarray:
        codes[0] = np.asarray(to_host(code[0])).reshape(-1) if code else None
        return each(buffer)

    return run


# target resize ----------------------------------------------------------------------------------
def _resize_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    x = _images(inputs)
    for key, low in (("target_size", 1), ("min_size", 0), ("max_size", 0)):
        v = attrs[key]
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < low:
            raise ShapeError(f"{key} must be an int >= {low}, got {v!r}")
    return [x, BlobSpec((x.shape[0], 2), dtypes.float32), BlobSpec((x.shape[0], 2), dtypes.int32)]


def resize_any(pixels: np.ndarray, width: int, height: int, interpolation: str) -> np.ndarray:
    """An (H, W, C) image of uint8 or float32 resized; floats channel by channel (Pillow's mode F)."""
    if pixels.dtype == np.uint8:
        return images.resize(pixels, width, height, interpolation)
    Image = require_pillow("flow.image.target_resize")
    method = images.resample(interpolation, width * height < pixels.shape[0] * pixels.shape[1])
    channels = [np.asarray(Image.fromarray(np.ascontiguousarray(pixels[:, :, c], np.float32), mode="F")
                           .resize((width, height), method)) for c in range(pixels.shape[2])]
    return np.stack(channels, axis=2).astype(pixels.dtype)


def _resize_kernel(ctx: KernelContext) -> Any:
    attrs, xp = ctx.attrs, ctx.xp
    out_scale, out_size = ctx.out(1), ctx.out(2)
    found: list[tuple[float, float, int, int]] = []

    def one(pixels: np.ndarray, k: int) -> np.ndarray:
        h, w = images.aspect_size(pixels.shape[0], pixels.shape[1], attrs["target_size"], attrs["resize_longer"],
                                  attrs["min_size"], attrs["max_size"])
        found.append((w / pixels.shape[1], h / pixels.shape[0], w, h))
        return resize_any(pixels, w, h, attrs["interpolation_type"])

    each = _each(ctx, one)

    def run(buffer: Any) -> tuple:
        found.clear()
        resized = each(buffer)
        table = np.array(found, np.float64).reshape(-1, 4)
        out_scale[...] = xp.asarray(table[:, :2].astype(np.float32))
        out_size[...] = xp.asarray(table[:, 2:].astype(np.int32))
        return resized, out_scale, out_size

    return run


# normalize --------------------------------------------------------------------------------------
def _normalize_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    x = _images(inputs)
    if any(float(v) == 0.0 for v in attrs["std"]) or not attrs["std"] or not attrs["mean"]:
        raise ShapeError(f"std and mean must hold values, std none 0; got {attrs['std']!r} and {attrs['mean']!r}")
    return [x]


def _normalize_kernel(ctx: KernelContext) -> Any:
    mean = np.asarray(ctx.attrs["mean"], np.float32)
    inv_std = (1.0 / np.asarray(ctx.attrs["std"], np.float64)).astype(np.float32)
    return _each(ctx, lambda pixels, k: (pixels.astype(np.float32) - mean) * inv_std)


# batch align ------------------------------------------------------------------------------------
def _align(size: int, alignment: int) -> int:
    return (size + alignment - 1) // alignment * alignment


def _align_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    x = _images(inputs)
    shape, alignment = tuple(attrs["shape"]), attrs["alignment"]
    if len(shape) != 3 or isinstance(alignment, bool) or not isinstance(alignment, numbers.Integral) \
            or alignment < 1:
        raise ShapeError(f"shape must be (H, W, C) and alignment an int >= 1, got {shape} and {alignment!r}")
    h, w, c = shape
    return [BlobSpec((x.shape[0], _align(h, alignment), _align(w, alignment), c), dtypes.as_dtype(attrs["data_type"]))]


def _align_kernel(ctx: KernelContext) -> Any:
    out, node, to_host, xp = ctx.out(0), ctx.node_name, ctx.backend.to_host, ctx.xp
    max_h, max_w, channels = tuple(ctx.attrs["shape"])
    host = np.zeros(out.shape, out.dtype)

    def run(buffer: Any) -> Any:
        host[...] = 0
        for k, element in enumerate(buffer.reshape(-1)):
            pixels = np.asarray(to_host(element))
            h, w, c = pixels.shape
            if h > max_h or w > max_w or c != channels:
                raise OFRecordError(f"{node}: image {k} is {h}x{w}x{c}, larger than the shape "
                                    f"({max_h}, {max_w}, {channels})")
            host[k, :h, :w] = pixels
        out[...] = xp.asarray(host)
        return out

    return run


def _op(name: str, infer: Any, kernel: Any, prefix: str, doc: str) -> OpDef:
    return OpDef(name, infer, kernel=kernel, not_differentiable=True, doc=doc, legacy=LegacyFace(name_prefix=prefix))


IMAGE_FLIP_TENSOR_BUFFER = _op("image_flip_tensor_buffer", _flip_infer, _flip_kernel, "ImageFlip",
                               "each image flipped: flip_code 1 horizontally, 16 vertically, 17 both")
IMAGE_TARGET_RESIZE_TENSOR_BUFFER = _op(
    "image_target_resize_tensor_buffer", _resize_infer, _resize_kernel, "ImageTargetResize",
    "each image resized keeping its aspect ratio; its (w, h) scale and new (w, h) size as blobs")
IMAGE_NORMALIZE_TENSOR_BUFFER = _op("image_normalize_tensor_buffer", _normalize_infer, _normalize_kernel,
                                    "ImageNormalize", "(image - mean) / std per channel; the images become float32")
IMAGE_BATCH_ALIGN_TENSOR_BUFFER = _op("image_batch_align_tensor_buffer", _align_infer, _align_kernel,
                                      "ImageBatchAlign", "the images pasted at the top-left of one zeroed batch")

OPS = (IMAGE_DECODE_TENSOR_BUFFER, IMAGE_FLIP_TENSOR_BUFFER, IMAGE_TARGET_RESIZE_TENSOR_BUFFER,
       IMAGE_NORMALIZE_TENSOR_BUFFER, IMAGE_BATCH_ALIGN_TENSOR_BUFFER)
