"""Legacy ``flow.image`` functions over tensor buffers (decode, flip, random_crop, normalize, batch_align), on
the image handles of this design: the blobs of the OFRecord image and bytes decoders and of the ops below.

Legacy built tensor buffers from fed lists too (``flow.tensor_list_to_tensor_buffer``); here images exist only
in a reader's thread, so these ops take a handle that an OFRecord reader's decoders made, and do their work in
that thread, ahead of the step.
"""
from __future__ import annotations

from typing import Any, Sequence

from flowjob_core import Blob, OpBuildError, apply
from flowjob_core.ir import dtypes

from flowjob_ofrecord.api.inputs import HANDLES, UINT8_HANDLES, WANTED, channels_of, check_crop_args, producer
from flowjob_ofrecord.images import check_color_space

__all__ = ["batch_align", "decode", "flip", "normalize", "random_crop"]


def _buffer(blob: Any) -> bool:
    """Whether ``blob`` is a tensor buffer of images (worked on in the step) rather than a reader's handle."""
    return isinstance(blob, Blob) and blob.dtype == dtypes.tensor_buffer


def _source(blob: Any, what: str, ops: tuple[str, ...] = UINT8_HANDLES, wanted: str = WANTED) -> Any:
    return producer(blob, ops, what, wanted)


def _handle_attrs(source: Any) -> dict:
    return {"source": source.name, "reader": source.attrs["reader"], "channels": channels_of(source)}


def decode(images_bytes_buffer: Blob, dtype: Any = dtypes.uint8, color_space: str = "BGR",
           name: str | None = None) -> Blob:
    """Decodes the encoded images of a ``flow.data.OFRecordBytesDecoder`` blob (JPEG, PNG, ...) in the reader's
    thread; a handle of uint8 (H, W, C) images (C = 1 for ``"GRAY"``), as ``OFRecordImageDecoder``'s.

    A tensor buffer of encoded files (``flow.data.coco_reader``'s images) is decoded in the step instead, to a
    tensor buffer of (H, W, C) images of ``dtype`` (uint8 or float32)."""
    if _buffer(images_bytes_buffer):
        attrs = {"color_space": check_color_space(color_space), "data_type": dtypes.as_dtype(dtype)}
        return apply("image_decode_tensor_buffer", [images_bytes_buffer], attrs, name=name)
    source = _source(images_bytes_buffer, "flow.image.decode", ("ofrecord_bytes_decoder",),
                     "flow.data.OFRecordBytesDecoder")
    if dtypes.as_dtype(dtype) != dtypes.uint8:
        raise ValueError(f"flow.image.decode: images decode to uint8, got dtype {dtypes.as_dtype(dtype).name}")
    color_space = check_color_space(color_space)
    attrs = {"color_space": color_space, "data_type": "uint8", "feature": source.attrs["name"],
             "source": source.name, "reader": source.attrs["reader"], "channels": 1 if color_space == "GRAY" else 3}
    return apply("image_decode", [images_bytes_buffer], attrs, name=name)


def flip(image: Blob, flip_code: int | Blob, name: str | None = None) -> Blob:
    """Flips every image of a handle: ``flip_code`` 0 none, 1 horizontally, 16 vertically, 17 both.

    The flip runs in the reader's thread, before the step, so the code is an int; a flag blob computed in the
    step (``flow.random.CoinFlip``) goes to ``flow.image.CropMirrorNormalize``'s ``mirror_blob`` instead.
    A tensor buffer of images is flipped in the step, by an int or a blob of one code per image.
    """
    if _buffer(image):
        codes = [flip_code] if isinstance(flip_code, Blob) else []
        attrs = {} if codes else {"flip_code": int(flip_code)}
        return apply("image_flip_tensor_buffer", [image, *codes], attrs, name=name)
    if isinstance(flip_code, Blob):
        raise OpBuildError("flow.image.flip: flip_code must be an int here: the images are flipped in the reader "
                           "thread ahead of the step, before a blob's value exists; mirror by a flag blob with "
                           "flow.image.CropMirrorNormalize(mirror_blob=...)")
    source = _source(image, "flow.image.flip")
    return apply("image_flip", [image], {"flip_code": flip_code, **_handle_attrs(source)}, name=name)


def random_crop(input_blob: Blob, num_attempts: int = 10, seed: int | None = None,
                random_area: Sequence[float] | None = None, random_aspect_ratio: Sequence[float] | None = None,
                name: str | None = None) -> Blob:
    """A random crop of every image of a handle, drawn as ``OFRecordImageDecoderRandomCrop``'s (area fraction in
    ``random_area``, default (0.08, 1); aspect ratio log-uniform in ``random_aspect_ratio``, default
    (0.75, 1.333333); the whole image after ``num_attempts`` misses); ``seed`` repeats the crops."""
    source = _source(input_blob, "flow.image.random_crop")
    area, ratio = check_crop_args(num_attempts, (0.08, 1.0) if random_area is None else random_area,
                                   (0.75, 1.333333) if random_aspect_ratio is None else random_aspect_ratio)
    attrs = {"num_attempts": num_attempts, "random_area": area, "random_aspect_ratio": ratio, "seed": seed,
             **_handle_attrs(source)}
    return apply("image_random_crop", [input_blob], attrs, name=name)


def normalize(image: Blob, std: Sequence[float], mean: Sequence[float], name: str | None = None) -> Blob:
    """``(image - mean) / std`` per channel for every image of a handle; the images become float32 (one value or
    one per channel in ``std`` and ``mean``). ``flow.image.batch_align`` makes them one blob."""
    if not isinstance(std, (list, tuple)) or not isinstance(mean, (list, tuple)):
        raise TypeError(f"flow.image.normalize: std and mean must be lists or tuples, got {type(std).__name__} and "
                        f"{type(mean).__name__}")
    if _buffer(image):
        attrs = {"std": tuple(float(v) for v in std), "mean": tuple(float(v) for v in mean)}
        return apply("image_normalize_tensor_buffer", [image], attrs, name=name)
    source = _source(image, "flow.image.normalize")
    channels = channels_of(source)
    if len(std) not in (1, channels) or len(mean) not in (1, channels):
        raise ValueError(f"flow.image.normalize: the images have {channels} channels; std and mean must hold 1 or "
                         f"{channels} values, got {list(std)} and {list(mean)}")
    attrs = {"std": tuple(float(v) for v in std), "mean": tuple(float(v) for v in mean), **_handle_attrs(source)}
    return apply("image_normalize", [image], attrs, name=name)


def batch_align(images: Blob, shape: Sequence[int], dtype: Any, alignment: int, name: str | None = None) -> Blob:
    """The images of a handle as one ``(batch, H', W', C)`` blob of ``dtype``: ``shape`` is the largest image's
    (H, W, C), H' and W' rounded up to a multiple of ``alignment``; each image sits at the top-left corner and
    the rest is zeros. An image larger than ``shape`` is an error naming its record."""
    if _buffer(images):
        attrs = {"shape": tuple(shape), "data_type": dtypes.as_dtype(dtype), "alignment": alignment}
        return apply("image_batch_align_tensor_buffer", [images], attrs, name=name)
    source = _source(images, "flow.image.batch_align", HANDLES, WANTED + " or flow.image.normalize")
    channels = channels_of(source)
    if len(shape) == 3 and shape[2] != channels:
        raise ValueError(f"flow.image.batch_align: the images have {channels} channels, shape {tuple(shape)} holds "
                         f"{shape[2]}")
    attrs = {"shape": tuple(shape), "data_type": dtypes.as_dtype(dtype).name, "alignment": alignment,
             "source": source.name, "reader": source.attrs["reader"]}
    return apply("image_batch_align", [images], attrs, name=name)
