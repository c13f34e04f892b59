"""The legacy ``flow.data`` OFRecord and OneRec readers and decoders (v0.3/v0.4 names, arguments and defaults);
legacy's older ``BlobConf`` API, in the same namespace, is in ``blob_conf``."""
from __future__ import annotations

from typing import Any, Sequence

from flowjob_core import Blob, apply, current_builder
from flowjob_core.ir import dtypes

from flowjob_ofrecord.api.inputs import check_crop_args, producer
from flowjob_ofrecord.images import check_color_space
from flowjob_ofrecord.reader import shard
from flowjob_ofrecord.sessions import session_token

__all__ = ["ImageDecoderRandomCropResize", "OFRecordBytesDecoder", "OFRecordImageDecoder",
           "OFRecordImageDecoderRandomCrop", "OFRecordRawDecoder", "OneRecDecoder", "image_decoder_random_crop_resize",
           "ofrecord_bytes_decoder", "ofrecord_image_classification_reader", "ofrecord_image_decoder",
           "ofrecord_image_decoder_random_crop", "ofrecord_raw_decoder", "ofrecord_reader", "onerec_decoder",
           "onerec_reader"]


def ofrecord_reader(ofrecord_dir: str, batch_size: int = 1, data_part_num: int = 1, part_name_prefix: str = "part-",
                    part_name_suffix_length: int = -1, random_shuffle: bool = False, shuffle_buffer_size: int = 1024,
                    shuffle_after_epoch: bool = False, name: str | None = None, *, seed: int | None = None) -> Blob:
    """The next ``batch_size`` records of the OFRecord folder at every step, for the decoders to read.

    The folder holds ``data_part_num`` files ``<part_name_prefix><n>`` (``n`` zero-padded to
    ``part_name_suffix_length`` digits; -1: not padded). Records are read epoch after epoch, by a
    background thread that keeps the next batches ready (decoded) while the step computes; this process
    reads its rank's share of the part files (the rank and size of the session's ``flowjob_world``).

    Args:
        ofrecord_dir: the data folder (a missing folder or part file is an error when the job is traced).
        batch_size: records per step, over all processes.
        data_part_num: how many part files the folder holds.
        part_name_prefix: the part files' common prefix.
        part_name_suffix_length: digits of the part number, zero-padded; -1 for none.
        random_shuffle: pass the records through a shuffle buffer of ``shuffle_buffer_size``.
        shuffle_buffer_size: records in the shuffle buffer.
        shuffle_after_epoch: read the part files in a new random order every epoch.
        name: the op name; default ``OFRecord_Reader_<n>``.
        seed: seeds both shuffles, so the order repeats (flowjob's addition; default: fresh entropy).

    Returns:
        The batch's record ids, int64 ``(batch_size,)``: each record's position in the folder (parts in
        order), which the decoders of this reader turn into values.
    """
    session = current_builder("flow.data.ofrecord_reader").session
    rank, world = shard(session)
    attrs = {"data_dir": str(ofrecord_dir), "batch_size": batch_size, "data_part_num": data_part_num,
             "part_name_prefix": part_name_prefix, "part_name_suffix_length": part_name_suffix_length,
             "random_shuffle": random_shuffle, "shuffle_buffer_size": shuffle_buffer_size,
             "shuffle_after_epoch": shuffle_after_epoch, "seed": seed, "rank": rank, "world": world,
             "session": session_token(session)}
    return apply("ofrecord_reader", [], attrs, name=name)


def _reader_of(blob: Any, what: str) -> str:
    """The name of the ofrecord_reader node whose output ``blob`` is."""
    return producer(blob, ("ofrecord_reader",), what, "flow.data.ofrecord_reader").name


def OFRecordRawDecoder(input_blob: Blob, blob_name: str, shape: Sequence[int], dtype: Any,
                       dim1_varying_length: bool = False, auto_zero_padding: bool = False,
                       name: str | None = None, *, truncate: bool = False) -> Blob:
    """Feature ``blob_name`` of every record as a ``(batch_size, *shape)`` blob of ``dtype``.

    Numeric lists convert to ``dtype``; a bytes list (one value) is read as its bytes, for int8/uint8.
    A record without the feature, or with one of another size, is an error naming the part file, the
    record's index in it and the feature; ``truncate=True`` (legacy's ``auto_zero_padding``, and
    ``dim1_varying_length``) cuts longer values and zero-pads shorter ones instead.

    Args:
        input_blob: the output of ``flow.data.ofrecord_reader``.
        blob_name: the feature's key in each record.
        shape: one record's shape (``()`` for a scalar per record).
        dtype: the blob's dtype.
        dim1_varying_length: values may be fewer than the shape holds (zero-padded here).
        auto_zero_padding: legacy's older name of truncate.
        name: the op name; default ``OFRecordRawDecoder_<n>``.
        truncate: cut or zero-pad values to the shape's size.
    """
    reader = _reader_of(input_blob, "flow.data.OFRecordRawDecoder")
    attrs = {"name": blob_name, "shape": tuple(shape), "data_type": dtypes.as_dtype(dtype).name,
             "dim1_varying_length": bool(dim1_varying_length), "truncate": bool(truncate or auto_zero_padding),
             "reader": reader}
    return apply("ofrecord_raw_decoder", [input_blob], attrs, name=name)


ofrecord_raw_decoder = OFRecordRawDecoder


def OFRecordImageDecoder(input_blob: Blob, blob_name: str, color_space: str = "BGR", name: str | None = None) -> Blob:
    """Decodes feature ``blob_name`` (one encoded image, JPEG or PNG, per record) of every record.

    Decoding runs in the reader's thread, ahead of the step. The images differ in size, so the blob is a
    handle (the batch's record ids, int64), as legacy's tensor buffer was: pass it to ``flow.image.Resize``.

    Args:
        input_blob: the output of ``flow.data.ofrecord_reader``.
        blob_name: the feature holding the encoded image (a bytes list).
        color_space: ``"BGR"`` (legacy's default), ``"RGB"`` or ``"GRAY"``.
        name: the op name; default ``OFRecordImageDecoder_<n>``.
    """
    reader = _reader_of(input_blob, "flow.data.OFRecordImageDecoder")
    attrs = {"name": blob_name, "color_space": check_color_space(color_space), "reader": reader}
    return apply("ofrecord_image_decoder", [input_blob], attrs, name=name)


def OFRecordImageDecoderRandomCrop(input_blob: Blob, blob_name: str, color_space: str = "BGR", num_attempts: int = 10,
                                   seed: int | None = None, random_area: Sequence[float] = (0.08, 1.0),
                                   random_aspect_ratio: Sequence[float] = (0.75, 1.333333),
                                   name: str | None = None) -> Blob:
    """Decodes a random crop of each record's encoded image, as ``OFRecordImageDecoder`` does the whole image.

    Each crop covers a fraction of the image's area drawn in ``random_area`` with a width/height ratio
    drawn log-uniformly in ``random_aspect_ratio``; after ``num_attempts`` draws that do not fit, the
    whole image. ``seed`` makes the crops repeat (default: fresh entropy).
    """
    reader = _reader_of(input_blob, "flow.data.OFRecordImageDecoderRandomCrop")
    area, ratio = check_crop_args(num_attempts, random_area, random_aspect_ratio)
    attrs = {"name": blob_name, "color_space": check_color_space(color_space), "reader": reader,
             "num_attempts": num_attempts, "random_area": area, "random_aspect_ratio": ratio, "seed": seed}
    return apply("ofrecord_image_decoder_random_crop", [input_blob], attrs, name=name)


def ofrecord_image_classification_reader(
        ofrecord_dir: str, image_feature_name: str, label_feature_name: str, batch_size: int = 1,
        data_part_num: int = 1, part_name_prefix: str = "part-", part_name_suffix_length: int = -1,
        random_shuffle: bool = False, shuffle_buffer_size: int = 1024, shuffle_after_epoch: bool = False,
        color_space: str = "BGR", decode_buffer_size_per_thread: int = 32,
        num_decode_threads_per_machine: int | None = None, name: str | None = None, *,
        seed: int | None = None) -> tuple[Blob, Blob]:
    """Reads an image classification OFRecord folder: ``(images, labels)`` in one call.

    ``images`` are the decoded ``image_feature_name`` images of the batch, a handle as
    ``OFRecordImageDecoder``'s (pass it to ``flow.image.Resize``); ``labels`` the int32 ``(batch_size,)``
    ``label_feature_name`` values, one per record. The reader arguments are ``ofrecord_reader``'s. The images
    are decoded in the reader's thread on at most ``num_decode_threads_per_machine`` threads of the decoding
    pool (default: all of it). ``decode_buffer_size_per_thread`` sized legacy's per-thread buffers; here the
    reader keeps two whole batches ready instead, so it is only checked.
    """
    if isinstance(decode_buffer_size_per_thread, bool) or not isinstance(decode_buffer_size_per_thread, int) \
            or decode_buffer_size_per_thread < 1:
        raise ValueError(f"flow.data.ofrecord_image_classification_reader: decode_buffer_size_per_thread must be "
                         f"an int >= 1, got {decode_buffer_size_per_thread!r}")
    threads = num_decode_threads_per_machine
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 0):
        raise ValueError(f"flow.data.ofrecord_image_classification_reader: num_decode_threads_per_machine must be "
                         f"an int >= 0 or None, got {threads!r}")
    records = ofrecord_reader(ofrecord_dir, batch_size=batch_size, data_part_num=data_part_num,
                              part_name_prefix=part_name_prefix, part_name_suffix_length=part_name_suffix_length,
                              random_shuffle=random_shuffle, shuffle_buffer_size=shuffle_buffer_size,
                              shuffle_after_epoch=shuffle_after_epoch, name=name, seed=seed)
    reader = _reader_of(records, "flow.data.ofrecord_image_classification_reader")
    attrs = {"name": image_feature_name, "color_space": check_color_space(color_space), "reader": reader,
             "threads": threads or None}
    image = apply("ofrecord_image_decoder", [records], attrs, name=f"{name}_image" if name else None)
    label = OFRecordRawDecoder(records, label_feature_name, shape=(), dtype=dtypes.int32,
                               name=f"{name}_label" if name else None)
    return image, label


ofrecord_image_decoder = OFRecordImageDecoder
ofrecord_image_decoder_random_crop = OFRecordImageDecoderRandomCrop


def OFRecordBytesDecoder(input_blob: Blob, blob_name: str, name: str | None = None) -> Blob:
    """Each record's bytes value of feature ``blob_name`` (one per record), e.g. an encoded image.

    The values differ in size, so the blob is a handle (the batch's record ids), as legacy's tensor
    buffer was; ``flow.data.ImageDecoderRandomCropResize`` decodes it.
    """
    reader = _reader_of(input_blob, "flow.data.OFRecordBytesDecoder")
    return apply("ofrecord_bytes_decoder", [input_blob], {"name": blob_name, "reader": reader}, name=name)


def ImageDecoderRandomCropResize(input_blob: Blob, target_width: int, target_height: int,
                                 num_attempts: int | None = None, seed: int | None = None,
                                 random_area: Sequence[float] | None = None,
                                 random_aspect_ratio: Sequence[float] | None = None, num_workers: int | None = None,
                                 warmup_size: int | None = None, max_num_pixels: int | None = None,
                                 name: str | None = None) -> Blob:
    """Decodes a random crop of each encoded image of an ``OFRecordBytesDecoder`` blob and resizes it to
    ``(batch, target_height, target_width, 3)`` uint8, RGB, in the reader's thread.

    The crop is drawn as ``OFRecordImageDecoderRandomCrop``'s (defaults: 10 attempts, area (0.08, 1), aspect
    ratio (0.75, 1.333333)); ``seed`` repeats the crops. ``num_workers``, ``warmup_size`` and
    ``max_num_pixels`` tuned legacy's GPU decoder and change nothing here.
    """
    source = producer(input_blob, ("ofrecord_bytes_decoder",), "flow.data.ImageDecoderRandomCropResize",
                      "flow.data.OFRecordBytesDecoder")
    area, ratio = check_crop_args(10 if num_attempts is None else num_attempts,
                                   (0.08, 1.0) if random_area is None else random_area,
                                   (0.75, 1.333333) if random_aspect_ratio is None else random_aspect_ratio)
    attrs = {"target_width": target_width, "target_height": target_height,
             "num_attempts": 10 if num_attempts is None else num_attempts, "random_area": area,
             "random_aspect_ratio": ratio, "seed": seed, "source": source.name, "reader": source.attrs["reader"]}
    return apply("image_decoder_random_crop_resize", [input_blob], attrs, name=name)


ofrecord_bytes_decoder = OFRecordBytesDecoder
image_decoder_random_crop_resize = ImageDecoderRandomCropResize


def onerec_reader(files: Sequence[str], batch_size: int = 1, random_shuffle: bool = False,
                  shuffle_mode: str = "instance", shuffle_buffer_size: int = 1024, shuffle_after_epoch: bool = False,
                  verify_example: bool = True, name: str | None = None, *, seed: int | None = None) -> Blob:
    """The next ``batch_size`` examples of the OneRec ``files`` at every step, for ``onerec_decoder`` to read.

    Read as ``ofrecord_reader`` reads part files: epoch after epoch by a background thread that keeps the
    next batches decoded, this process taking its rank's share of the files. Each frame's header and
    payload digests are checked, and every offset of an example is checked to lie inside it.

    Args:
        files: the OneRec files (a list or tuple of paths; a missing one is an error when the job is traced).
        batch_size: examples per step, over all processes.
        random_shuffle: shuffle through a buffer of ``shuffle_buffer_size`` items.
        shuffle_mode: ``"instance"`` shuffles examples; ``"batch"`` shuffles whole batches of consecutive
            examples (a buffer of ``shuffle_buffer_size`` batches).
        shuffle_buffer_size: examples (or batches) in the shuffle buffer.
        shuffle_after_epoch: read the files in a new random order every epoch.
        verify_example: accepted for legacy programs; the structure checks always run here.
        name: the op name; default ``OneRecReader_<n>``.
        seed: seeds the shuffles, so the order repeats (flowjob's addition; default: fresh entropy).

    Returns:
        The batch's example ids, int64 ``(batch_size,)`` (positions over the files in order).
    """
    if not isinstance(files, (list, tuple)):
        raise TypeError(f"flow.data.onerec_reader: files must be a list or tuple of paths, got "
                        f"{type(files).__name__}")
    session = current_builder("flow.data.onerec_reader").session
    rank, world = shard(session)
    attrs = {"files": tuple(str(f) for f in files), "batch_size": batch_size, "random_shuffle": random_shuffle,
             "shuffle_mode": shuffle_mode, "shuffle_buffer_size": shuffle_buffer_size,
             "shuffle_after_epoch": shuffle_after_epoch, "verify_example": bool(verify_example), "seed": seed,
             "rank": rank, "world": world,
             "session": session_token(session)}
    return apply("onerec_reader", [], attrs, name=name)


def OneRecDecoder(input_blob: Blob, key: str, dtype: Any, shape: Sequence[int], is_dynamic: bool = False,
                  reshape: Sequence[int] | None = None, batch_padding: Sequence[int] | None = None,
                  name: str | None = None) -> Blob:
    """Feature ``key`` of every OneRec example as a ``(batch_size, *shape)`` blob of ``dtype``.

    Each example's tensor must be of the list kind ``dtype`` reads (Int32List for int32, Float32List for
    float32, ...) and have ``shape``, after ``reshape`` when given (one -1 takes what the values leave).
    ``batch_padding`` pads the first axis with zeros: ``[n, 0, ...]`` up to n rows, ``[-1, 0, ...]`` up to
    the batch's largest, ``[0, ...]`` none (all equal); the padded shape must be ``shape``.

    Args:
        input_blob: the output of ``flow.data.onerec_reader``.
        key: the feature's name in each example.
        dtype: int8, int32, int64, float32 or float64.
        shape: one example's shape.
        is_dynamic: legacy's blob whose shape each batch decides; refused here (an OpBuildError).
        reshape: the shape each tensor's values are read as.
        batch_padding: how the first axis is padded.
        name: the op name; default ``OneRecDecoder_<n>``.
    """
    reader = producer(input_blob, ("onerec_reader",), "flow.data.onerec_decoder", "flow.data.onerec_reader").name
    attrs = {"key": key, "data_type": dtypes.as_dtype(dtype).name, "static_shape": tuple(shape),
             "is_dynamic": bool(is_dynamic), "has_reshape": reshape is not None,
             "reshape": tuple(reshape) if reshape is not None else tuple(shape),
             "has_batch_padding": batch_padding is not None,
             "batch_padding": tuple(batch_padding) if batch_padding is not None else tuple(shape), "reader": reader}
    return apply("onerec_decoder", [input_blob], attrs, name=name)


onerec_decoder = OneRecDecoder
