"""Legacy's older OFRecord API: ``flow.data.decode_ofrecord`` with ``BlobConf`` / ``RawCodec`` / ``ImageCodec``
and its preprocessors, and ``flow.data.ofrecord_loader``; built from the reader, decoder and image ops."""
from __future__ import annotations

from typing import Any, Sequence

from flowjob_core import Blob, OpBuildError, apply
from flowjob_core.ir import dtypes

from flowjob_ofrecord.api.data import OFRecordImageDecoder, OFRecordRawDecoder, ofrecord_reader
from flowjob_ofrecord.api.image import CropMirrorNormalize, Resize

__all__ = ["BlobConf", "BytesListCodec", "ImageCodec", "ImagePreprocessor", "ImageResizePreprocessor",
           "NormByChannelPreprocessor", "RawCodec", "decode_ofrecord", "ofrecord_loader"]


class RawCodec:
    """Decode a feature's values as they are (``OFRecordRawDecoder``); ``auto_zero_padding`` pads short ones."""

    def __init__(self, auto_zero_padding: bool = False) -> None:
        self.auto_zero_padding = bool(auto_zero_padding)


class BytesListCodec:
    """Legacy's codec for a list of raw byte strings: a blob of differing sizes, which flowjob cannot hold."""


class ImagePreprocessor:
    """``"bgr2rgb"`` (decode in RGB order) or ``"mirror"`` (flip each image horizontally with probability 1/2,
    drawn afresh at every step by flowjob-ops' ``coin_flip``)."""

    def __init__(self, preprocessor: str) -> None:
        if not isinstance(preprocessor, str) or preprocessor.lower() not in ("bgr2rgb", "mirror"):
            raise ValueError(f'preprocessor must be "bgr2rgb" or "mirror", got {preprocessor!r}')
        self.preprocessor = preprocessor.lower()


class ImageResizePreprocessor:
    """Resize the decoded image to ``width`` x ``height``."""

    def __init__(self, width: int, height: int) -> None:
        if not (isinstance(width, int) and isinstance(height, int)):
            raise TypeError(f"width and height must be ints, got {width!r}, {height!r}")
        self.width, self.height = width, height


class ImageCodec:
    """Decode an encoded image feature (BGR, as legacy's OpenCV decoding), then apply ``image_preprocessors``."""

    def __init__(self, image_preprocessors: Sequence[Any] | None = None) -> None:
        self.image_preprocessors = list(image_preprocessors) if isinstance(image_preprocessors, (list, tuple)) else []


class NormByChannelPreprocessor:
    """``(x - mean) / std`` per channel of a decoded image, in ``data_format`` (channels_last or channels_first)."""

    def __init__(self, mean_values: Sequence[float], std_values: Sequence[float] = (1.0, 1.0, 1.0),
                 data_format: str = "channels_last") -> None:
        if data_format not in ("channels_last", "channels_first"):
            raise ValueError(f'data_format must be "channels_last" or "channels_first", got {data_format!r}')
        self.mean_values, self.std_values, self.data_format = list(mean_values), list(std_values), data_format


class BlobConf:
    """One blob ``decode_ofrecord`` returns: feature ``name``, one record's ``shape``, ``dtype``, its codec."""

    def __init__(self, name: str, shape: Sequence[int], dtype: Any, codec: Any,
                 preprocessors: Sequence[Any] | None = None) -> None:
        if not isinstance(name, str) or not isinstance(shape, (list, tuple)):
            raise TypeError(f"BlobConf needs a str name and a list or tuple shape, got {name!r}, {shape!r}")
        self.name, self.shape, self.dtype, self.codec = name, tuple(shape), dtypes.as_dtype(dtype), codec
        self.preprocessors = list(preprocessors) if isinstance(preprocessors, (list, tuple)) else []


def _decode_image(records: Blob, conf: BlobConf) -> Blob:
    color_space, size, mirror = "BGR", None, False
    for p in conf.codec.image_preprocessors:
        if isinstance(p, ImageResizePreprocessor):
            size = (p.width, p.height)
        elif isinstance(p, ImagePreprocessor):
            color_space, mirror = ("RGB", mirror) if p.preprocessor == "bgr2rgb" else (color_space, True)
        else:
            raise OpBuildError(f"decode_ofrecord blob {conf.name!r}: {type(p).__name__} is not an image "
                               f"preprocessor (ImagePreprocessor, ImageResizePreprocessor)")
    norms = [p for p in conf.preprocessors if isinstance(p, NormByChannelPreprocessor)]
    if len(norms) != len(conf.preprocessors) or len(norms) > 1:
        raise OpBuildError(f"decode_ofrecord blob {conf.name!r}: only one NormByChannelPreprocessor is provided "
                           f"as a blob preprocessor, got {conf.preprocessors!r}")
    first = bool(norms) and norms[0].data_format == "channels_first"
    h, w, c = (conf.shape[1], conf.shape[2], conf.shape[0]) if first else conf.shape
    if size is not None and size != (w, h):
        raise OpBuildError(f"decode_ofrecord blob {conf.name!r}: resized to {size[0]}x{size[1]} (width x height) "
                           f"but its shape {conf.shape} holds {w}x{h}")
    decoded = OFRecordImageDecoder(records, conf.name, color_space=color_space if c == 3 else "GRAY")
    resized, _, _ = Resize(decoded, target_size=(w, h), channels=c)
    # legacy's random mirror: a fresh coin per image and step (the coin_flip op of flowjob-ops)
    flips = apply("coin_flip", [], {"batch_size": records.shape[0], "probability": 0.5, "seed": None}) \
        if mirror else None
    if not norms and conf.dtype == dtypes.uint8 and flips is None:
        return resized
    if not norms and conf.dtype == dtypes.uint8:
        raise OpBuildError(f"decode_ofrecord blob {conf.name!r}: a mirrored image blob is a float one (dtype "
                           f"flow.float), as CropMirrorNormalize gives")
    mean, std = (norms[0].mean_values, norms[0].std_values) if norms else ([0.0], [1.0])
    return CropMirrorNormalize(resized, mirror_blob=flips, color_space=color_space,
                                     output_layout="NCHW" if first else "NHWC", mean=mean, std=std,
                                     output_dtype=conf.dtype)


def decode_ofrecord(ofrecord_dir: str, blobs: Sequence[BlobConf], batch_size: int = 1, data_part_num: int = 1,
                    part_name_prefix: str = "part-", part_name_suffix_length: int = -1, shuffle: bool = False,
                    buffer_size: int = 1024, name: str | None = None) -> tuple[Blob, ...]:
    """One ``(batch_size, *conf.shape)`` blob per ``BlobConf``, read from the OFRecord folder (legacy v0.3's API).

    Raw codecs decode as ``OFRecordRawDecoder``; image codecs decode, resize to the conf's shape and, with a
    ``NormByChannelPreprocessor``, normalize (``(x - mean) / std``) into the conf's float dtype.
    """
    records = ofrecord_reader(ofrecord_dir, batch_size=batch_size, data_part_num=data_part_num,
                              part_name_prefix=part_name_prefix, part_name_suffix_length=part_name_suffix_length,
                              random_shuffle=shuffle, shuffle_buffer_size=buffer_size, name=name)
    out = []
    for conf in blobs:
        if not isinstance(conf, BlobConf):
            raise TypeError(f"decode_ofrecord: blobs must be BlobConf objects, got {type(conf).__name__}")
        if isinstance(conf.codec, RawCodec):
            if conf.preprocessors:
                raise OpBuildError(f"decode_ofrecord blob {conf.name!r}: a raw blob takes no preprocessors")
            out.append(OFRecordRawDecoder(records, conf.name, conf.shape, conf.dtype,
                                          auto_zero_padding=conf.codec.auto_zero_padding))
        elif isinstance(conf.codec, ImageCodec):
            out.append(_decode_image(records, conf))
        else:
            raise OpBuildError(f"decode_ofrecord blob {conf.name!r}: codec {type(conf.codec).__name__} gives blobs "
                               f"of differing sizes, which flowjob's static blobs cannot hold; use RawCodec or "
                               f"ImageCodec")
    return tuple(out)


def ofrecord_loader(ofrecord_dir: str, batch_size: int = 1, data_part_num: int = 1, part_name_prefix: str = "part-",
                    part_name_suffix_length: int = -1, shuffle: bool = False, shuffle_buffer_size: int = 1024,
                    name: str | None = None) -> Blob:
    """Legacy's older name of ``ofrecord_reader`` (``shuffle`` is its ``random_shuffle``)."""
    return ofrecord_reader(ofrecord_dir, batch_size=batch_size, data_part_num=data_part_num,
                           part_name_prefix=part_name_prefix, part_name_suffix_length=part_name_suffix_length,
                           random_shuffle=shuffle, shuffle_buffer_size=shuffle_buffer_size, name=name)
