"""The legacy ``flow.image`` functions for decoded OFRecord images: ``Resize`` and ``CropMirrorNormalize`` (the
tensor-buffer ops ``decode``, ``flip``, ``random_crop``, ``normalize``, ``batch_align`` are in image_handles)."""
from __future__ import annotations

import warnings
from typing import Any, Sequence

from flowjob_core import Blob, apply
from flowjob_core.ir import dtypes

from flowjob_ofrecord.api.inputs import UINT8_HANDLES, WANTED, channels_of, producer
from flowjob_ofrecord.images import INTERPOLATIONS, check_color_space

__all__ = ["CropMirrorNormalize", "Resize", "crop_mirror_normalize", "resize", "target_resize"]

_INTERP_TYPES = {"Linear": "bilinear", "NN": "nearest_neighbor", "Cubic": "bicubic"}


def Resize(image: Blob, target_size: Sequence[int] | int | None = None, min_size: int | None = None,
           max_size: int | None = None, keep_aspect_ratio: bool = False, resize_side: str = "shorter",
           channels: int = 3, dtype: Any = None, interpolation_type: str = "auto", name: str | None = None,
           color_space: str | None = None, interp_type: str | None = None, resize_shorter: int = 0,
           resize_x: int = 0, resize_y: int = 0) -> Any:
    """Resizes decoded images (the blob of an OFRecord image decoder) in the reader's thread, ahead of the step.

    To ``target_size = (width, height)``: returns ``(images, scale, None)``, ``images`` a
    ``(batch, height, width, channels)`` blob of ``dtype`` (uint8 by default), ``scale`` float32
    ``(batch, 2)`` each image's (width, height) scale. With ``keep_aspect_ratio`` the shorter side
    (``resize_side="longer"``: the longer) becomes the int ``target_size``, the other side limited by
    ``max_size`` (``min_size``); the images then differ in size and stay a handle, as legacy's tensor
    buffer (``flow.image.CropMirrorNormalize`` with a crop makes them one blob), with their scales and
    int32 (width, height) sizes. Legacy's deprecated arguments (``color_space``, ``interp_type``,
    ``resize_x`` / ``resize_y``, ``resize_shorter``) still work and, as there, make it return the images
    alone. ``interpolation_type`` ``"auto"`` averages areas when shrinking and interpolates bilinearly when
    growing.
    """
    deprecated = False
    if color_space is not None:
        warnings.warn("flow.image.Resize: color_space is deprecated, use channels", DeprecationWarning, stacklevel=2)
        channels, deprecated = (1 if check_color_space(color_space) == "GRAY" else 3), True
    if interp_type is not None:
        if interp_type not in _INTERP_TYPES:
            raise ValueError(f"interp_type must be one of {sorted(_INTERP_TYPES)}, got {interp_type!r}")
        interpolation_type, deprecated = _INTERP_TYPES[interp_type], True
    if resize_x > 0 and resize_y > 0:
        target_size, keep_aspect_ratio, deprecated = (resize_x, resize_y), False, True
    if resize_shorter > 0:
        target_size, keep_aspect_ratio, resize_side, deprecated = resize_shorter, True, "shorter", True
    if interpolation_type not in INTERPOLATIONS:
        raise ValueError(f"interpolation_type must be one of {INTERPOLATIONS}, got {interpolation_type!r}")
    if keep_aspect_ratio and isinstance(image, Blob) and image.dtype == dtypes.tensor_buffer:
        # a tensor buffer of images (flow.tensor_list_to_tensor_buffer, coco_reader): resized in the step
        attrs = {"target_size": target_size, "min_size": min_size or 0, "max_size": max_size or 0,
                 "resize_longer": resize_side == "longer", "interpolation_type": interpolation_type}
        resized, scale, new_size = apply("image_target_resize_tensor_buffer", [image], attrs, name=name)
        return resized if deprecated else (resized, scale, new_size)
    source = producer(image, UINT8_HANDLES, "flow.image.Resize", WANTED)
    if keep_aspect_ratio:
        if isinstance(target_size, bool) or not isinstance(target_size, int):
            raise ValueError(f"target_size must be an int when keep_aspect_ratio is True, got {target_size!r}")
        if resize_side not in ("shorter", "longer"):
            raise ValueError(f'resize_side must be "shorter" or "longer", got {resize_side!r}')
        attrs = {"target_size": target_size, "min_size": min_size or 0, "max_size": max_size or 0,
                 "resize_longer": resize_side == "longer", "interpolation_type": interpolation_type,
                 "channels": channels_of(source), "source": source.name, "reader": source.attrs["reader"]}
        handle, scale, new_size = apply("image_resize_keep_aspect_ratio", [image], attrs, name=name)
        return handle if deprecated else (handle, scale, new_size)
    if (not isinstance(target_size, (list, tuple)) or len(target_size) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in target_size)):
        raise ValueError(f"target_size must be (width, height) ints when keep_aspect_ratio is False, got "
                         f"{target_size!r}")
    attrs = {"target_width": target_size[0], "target_height": target_size[1], "channels": channels,
             "data_type": dtypes.as_dtype(dtype if dtype is not None else dtypes.uint8).name,
             "interpolation_type": interpolation_type, "source": source.name, "reader": source.attrs["reader"]}
    images, scale = apply("image_resize_to_fixed", [image], attrs, name=name)
    return images if deprecated else (images, scale, None)


def CropMirrorNormalize(input_blob: Blob, mirror_blob: Blob | None = None, color_space: str = "BGR",
                        output_layout: str = "NCHW", crop_h: int = 0, crop_w: int = 0, crop_pos_y: float = 0.5,
                        crop_pos_x: float = 0.5, mean: Sequence[float] = (0.0,), std: Sequence[float] = (1.0,),
                        output_dtype: Any = dtypes.float32, name: str | None = None) -> Blob:
    """Crops uint8 images ``(batch, h, w, C)``, flips those whose ``mirror_blob`` entry is nonzero
    horizontally, and returns ``(x - mean) / std`` per channel in ``output_layout``.

    ``crop_h`` / ``crop_w`` 0 keep the whole image; the window's corner is ``crop_pos * (size - crop)``.
    Images of differing sizes (the handle of a decoder or of a Resize keeping the aspect ratio) need a
    crop, which makes them one blob; it is cut in the reader's thread.
    """
    check_color_space(color_space)
    made_by = producer(input_blob, None, "flow.image.CropMirrorNormalize", "") if isinstance(input_blob, Blob) else None
    if made_by is not None and made_by.op in UINT8_HANDLES:  # images of differing sizes: one crop size makes one blob
        crop = {"crop_h": int(crop_h), "crop_w": int(crop_w), "crop_pos_y": float(crop_pos_y),
                "crop_pos_x": float(crop_pos_x), "channels": channels_of(made_by), "source": made_by.name,
                "reader": made_by.attrs["reader"]}
        input_blob = apply("image_crop_from_tensorbuffer", [input_blob], crop,
                           name=None if name is None else f"{name}_crop")
        crop_h = crop_w = 0
    inputs = [input_blob] if mirror_blob is None else [input_blob, mirror_blob]
    attrs = {"color_space": color_space, "output_layout": output_layout, "crop_h": int(crop_h),
             "crop_w": int(crop_w), "crop_pos_y": float(crop_pos_y), "crop_pos_x": float(crop_pos_x),
             "mean": tuple(float(v) for v in mean), "std": tuple(float(v) for v in std),
             "output_dtype": dtypes.as_dtype(output_dtype).name}
    return apply("crop_mirror_normalize_from_uint8", inputs, attrs, name=name)


def target_resize(images: Blob, target_size: int, min_size: int | None = None, max_size: int | None = None,
                  resize_side: str = "shorter", interpolation_type: str = "auto", name: str | None = None) -> Any:
    """``Resize`` keeping the aspect ratio, returning legacy's order ``(images, new_size, scale)``."""
    resized, scale, new_size = Resize(images, target_size=target_size, min_size=min_size, max_size=max_size,
                                      keep_aspect_ratio=True, resize_side=resize_side,
                                      interpolation_type=interpolation_type, name=name)
    return resized, new_size, scale


resize = Resize
crop_mirror_normalize = CropMirrorNormalize
