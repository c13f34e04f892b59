"""flow.summary as legacy programs use it, read back with TensorBoard's own EventAccumulator.

Legacy v0.3/v0.4 wrote summaries from ops inside jobs: ``create_summary_writer(logdir)`` opened the
process's writer, ``scalar`` / ``histogram`` / ``image`` / ``pb`` wrote each time their job ran, with
the step an int64 blob and the tag the int8 bytes of its name.
"""
from __future__ import annotations

import struct
import zlib

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from tensorboard.backend.event_processing import event_accumulator  # TensorBoard's own reader (requirements-dev)
from flowjob_core import FlowjobError
from flowjob_core.testing.modules import sibling

_helpers = sibling(__file__, "op_surface_helpers")
fresh_session = _helpers.fresh_session


@pytest.fixture(autouse=True)
def no_writers():
    from flowjob_watch.summary import writer
    writer.close_all()
    yield
    writer.close_all()


def _tag(name: str) -> np.ndarray:
    return np.frombuffer(name.encode("ascii"), dtype=np.int8)  # legacy: np.fromstring(name, dtype=np.int8)


def _read(logdir) -> event_accumulator.EventAccumulator:
    flow.sync_default_session()
    acc = event_accumulator.EventAccumulator(str(logdir), size_guidance={event_accumulator.TENSORS: 0,
                                                                      event_accumulator.IMAGES: 0,
                                                                      event_accumulator.HISTOGRAMS: 0})
    acc.Reload()
    return acc


def _define_writer_jobs(logdir):
    @flow.global_function()
    def CreateWriter():
        flow.summary.create_summary_writer(str(logdir))

    @flow.global_function()
    def FlushWriter():
        flow.summary.flush_summary_writer()

    return CreateWriter, FlushWriter


def test_legacy_scalar_and_histogram_jobs(tmp_path):
    CreateWriter, FlushWriter = _define_writer_jobs(tmp_path)

    @flow.global_function()
    def ScalarJob(value: tp.ListNumpy.Placeholder((1,), dtype=flow.float),
                  step: tp.ListNumpy.Placeholder((1,), dtype=flow.int64),
                  tag: tp.ListNumpy.Placeholder((1000,), dtype=flow.int8)):
        flow.summary.scalar(value, step, tag)

    @flow.global_function()
    def HistogramJob(value: tp.ListNumpy.Placeholder((20, 30), dtype=flow.float),
                     step: tp.ListNumpy.Placeholder((1,), dtype=flow.int64),
                     tag: tp.ListNumpy.Placeholder((9,), dtype=flow.int8)):
        flow.summary.histogram(value, step, tag)

    CreateWriter()
    rng = np.random.default_rng(0)
    hists = []
    for i in range(4):
        ScalarJob([np.array([i * 0.5], np.float32)], [np.array([i], np.int64)], [_tag("scalar")])
        hists.append(rng.standard_normal((20, 30)).astype(np.float32))
        HistogramJob([hists[-1]], [np.array([i], np.int64)], [_tag("histogram")])
    FlushWriter()
    acc = _read(tmp_path)
    assert [(e.step, e.value) for e in acc.Scalars("scalar")] == [(i, i * 0.5) for i in range(4)]
    events = acc.Histograms("histogram")
    assert [e.step for e in events] == [0, 1, 2, 3]
    for event, h in zip(events, hists):
        hv = event.histogram_value
        assert (hv.num, hv.min, hv.max) == (600, float(h.min()), float(h.max()))
        assert hv.sum == pytest.approx(float(h.astype(np.float64).sum()))
        assert sum(hv.bucket) == 600


def test_short_training_run_writes_loss_scalars_and_weight_histograms(tmp_path):
    """A legacy train job writes its loss with flow.summary.scalar; the tensorboard watch sink files the
    weights as histograms and their gradient as another; every value matches what the job computed."""
    CreateWriter, _ = _define_writer_jobs(tmp_path / "summary")
    sink = flow.summary.TensorBoardSink(tmp_path / "watch")
    rng = np.random.default_rng(1)
    x = rng.standard_normal((8, 3)).astype(np.float32)
    y = (x @ np.array([[1.0], [-2.0], [0.5]], np.float32)).astype(np.float32)
    seen = {}

    @flow.global_function(type="train")
    def train(images: tp.Numpy.Placeholder((8, 3)), labels: tp.Numpy.Placeholder((8, 1)),
              step: tp.Numpy.Placeholder((1,), dtype=flow.int64)) -> tp.Numpy:
        w = flow.get_variable("w", shape=(3, 1), initializer=flow.zeros_initializer())
        loss = flow.math.reduce_mean(flow.math.square(flow.matmul(images, w) - labels))
        _helpers.sgd(loss)
        flow.summary.scalar(loss, step, "loss")
        flow.watch(w, sink)
        flow.watch_diff(w, sink)
        flow.watch(w, lambda v: seen.setdefault("w", []).append(v.copy()))
        return loss

    CreateWriter()
    losses = [float(train(x, y, np.array([s], np.int64))) for s in range(5)]
    sink.flush()
    acc = _read(tmp_path / "summary")
    assert [e.step for e in acc.Scalars("loss")] == list(range(5))
    np.testing.assert_allclose([e.value for e in acc.Scalars("loss")], losses, rtol=1e-6)
    assert losses[-1] < losses[0]  # it trains
    watched = _read(tmp_path / "watch")
    assert sorted(watched.Tags()["histograms"]) == ["w/out", "w/out_diff"]
    weights = watched.Histograms("w/out")
    assert [e.step for e in weights] == list(range(5))
    for event, w in zip(weights, seen["w"]):
        assert (event.histogram_value.min, event.histogram_value.max) == (float(w.min()), float(w.max()))


def test_watch_sink_by_name_scalars_every_other_step(tmp_path):
    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((1,))) -> tp.Numpy:
        y = flow.math.square(x)
        flow.watch(y, str(tmp_path), sink="tensorboard", tag="square", every=2)
        return y

    for v in range(5):
        job(np.array([v], np.float32))
    from flowjob_watch.summary import writer
    writer.flush()
    acc = _read(tmp_path)
    assert [(e.step, e.value) for e in acc.Scalars("square")] == [(0, 0.0), (2, 4.0), (4, 16.0)]


def test_mirrored_jobs_on_two_devices_write_one_summary_per_step(tmp_path):
    """As the documentation's program: a mirrored view, ListNumpy feeds, one piece per device; the histogram
    sees every device's values, the step and tag (fed to each device) count once."""
    flow.config.cpu_device_num(2)
    cfg = flow.function_config()
    cfg.default_logical_view(flow.scope.mirrored_view())
    CreateWriter, FlushWriter = _define_writer_jobs(tmp_path)

    @flow.global_function(function_config=cfg)
    def HistogramJob(value: tp.ListNumpy.Placeholder((3, 4), dtype=flow.float),
                     step: tp.ListNumpy.Placeholder((1,), dtype=flow.int64),
                     tag: tp.ListNumpy.Placeholder((9,), dtype=flow.int8)):
        flow.summary.histogram(value, step, tag)

    CreateWriter()
    a, b = np.arange(12, dtype=np.float32).reshape(3, 4), -np.ones((3, 4), np.float32)
    HistogramJob([a, b], [np.array([4], np.int64)] * 2, [_tag("h")] * 2)
    HistogramJob([a, b], [np.array([5], np.int64), np.array([6], np.int64)], [_tag("h")] * 2)
    with pytest.raises(FlowjobError, match=r"flow.summary.histogram .*: the step differs across the 2 devices"):
        FlushWriter()
        flow.sync_default_session()
    (event,) = _read(tmp_path).Histograms("h")
    hv = event.histogram_value
    assert (event.step, hv.num, hv.min, hv.max, hv.sum) == (4, 24, -1.0, 11.0, 66.0 - 12.0)


def _png_pixels(data: bytes) -> np.ndarray:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, chunks = 8, {}
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind = data[pos + 4:pos + 8]
        chunks[kind] = chunks.get(kind, b"") + data[pos + 8:pos + 8 + length]
        pos += 12 + length
    width, height, _, color = struct.unpack(">IIBB", chunks[b"IHDR"][:10])
    channels = {0: 1, 2: 3, 6: 4}[color]
    rows = np.frombuffer(zlib.decompress(chunks[b"IDAT"]), np.uint8).reshape(height, 1 + width * channels)
    assert not rows[:, 0].any()  # filter type none on every row
    return rows[:, 1:].reshape(height, width, channels)


def test_image_text_and_hparams(tmp_path):
    CreateWriter, FlushWriter = _define_writer_jobs(tmp_path)

    @flow.global_function()
    def ImageJob(value: tp.ListNumpy.Placeholder((2, 5, 7, 3), dtype=flow.uint8),
                 step: tp.ListNumpy.Placeholder((1,), dtype=flow.int64),
                 tag: tp.ListNumpy.Placeholder((10,), dtype=flow.int8)):
        flow.summary.image(value, step, tag)

    @flow.global_function()
    def PbJob(value: tp.ListNumpy.Placeholder((1500,), dtype=flow.int8),
              step: tp.ListNumpy.Placeholder((1,), dtype=flow.int64)):
        flow.summary.pb(value, step=step)

    CreateWriter()
    images = np.random.default_rng(2).integers(0, 256, (2, 5, 7, 3)).astype(np.uint8)
    ImageJob([images], [np.array([3], np.int64)], [_tag("image")])
    net = ["vgg16", "resnet50", "mask-rcnn", "yolov3"]
    PbJob([_tag(str(flow.summary.text(net)))], [np.array([1], np.int64)])
    hparams = {
        flow.summary.HParam("learning_rate", flow.summary.RealRange(1e-2, 1e-1)): 0.02,
        flow.summary.HParam("dense_layers", flow.summary.IntegerRange(2, 7)): 5,
        flow.summary.HParam("optimizer", flow.summary.ValueSet(["adam", "sgd"])): "adam",
        flow.summary.HParam("magic", flow.summary.ValueSet([False, True])): True,
        flow.summary.Metric("loss", float): 0.02,
        "dropout": 0.6,
    }
    PbJob([_tag(str(flow.summary.hparams(hparams)))], [np.array([1], np.int64)])
    FlushWriter()
    acc = _read(tmp_path)
    assert sorted(acc.Tags()["images"]) == ["image/image/0", "image/image/1"]
    for i in range(2):
        (event,) = acc.Images(f"image/image/{i}")
        assert (event.step, event.width, event.height) == (3, 7, 5)
        np.testing.assert_array_equal(_png_pixels(event.encoded_image_string), images[i])
    (text,) = acc.Tensors("text")
    assert text.step == 1 and [s.decode() for s in text.tensor_proto.string_val] == net
    assert acc.SummaryMetadata("text").plugin_data.plugin_name == "text"
    from tensorboardX.proto import plugin_hparams_pb2
    meta = acc.SummaryMetadata("_hparams_/session_start_info").plugin_data
    info = plugin_hparams_pb2.HParamsPluginData.FromString(meta.content).session_start_info
    assert meta.plugin_name == "hparams"
    assert info.hparams["learning_rate"].number_value == 0.02 and info.hparams["dense_layers"].number_value == 5
    assert info.hparams["optimizer"].string_value == "adam" and info.hparams["magic"].bool_value is True
    assert info.hparams["dropout"].number_value == 0.6
    assert [(e.step, e.value) for e in acc.Scalars("loss")] == [(1, pytest.approx(0.02))]


def test_a_summary_op_without_a_writer_fails_at_the_next_call_and_the_session_goes_on(tmp_path):
    @flow.global_function()
    def ScalarJob(value: tp.Numpy.Placeholder((1,)), step: tp.Numpy.Placeholder((1,), dtype=flow.int64)):
        flow.summary.scalar(value, step, "x", name="MyScalar")

    ScalarJob(np.ones(1, np.float32), np.zeros(1, np.int64))
    with pytest.raises(flow.summary.NoSummaryWriterError, match=r"'MyScalar' of job 'ScalarJob'.*"
                                                               r"create_summary_writer\(logdir\) first"):
        flow.sync_default_session()
    CreateWriter, _ = _define_writer_jobs(tmp_path)
    CreateWriter()
    ScalarJob(np.full(1, 2.0, np.float32), np.array([7], np.int64))
    assert [(e.step, e.value) for e in _read(tmp_path).Scalars("x")] == [(7, 2.0)]


def test_bad_values_are_named(tmp_path):
    CreateWriter, _ = _define_writer_jobs(tmp_path)
    CreateWriter()

    @flow.global_function()
    def NotScalar(value: tp.Numpy.Placeholder((2,)), step: tp.Numpy.Placeholder((1,), dtype=flow.int64)):
        flow.summary.scalar(value, step, "two")

    NotScalar(np.ones(2, np.float32), np.zeros(1, np.int64))
    with pytest.raises(FlowjobError,
                       match=r"flow.summary.scalar \(op 'WriteScalar_\d+' of job 'NotScalar'\): a scalar summary "
                             r"needs a value with one element, got shape \(2,\)"):
        flow.sync_default_session()

    @flow.global_function()
    def FloatStep(value: tp.Numpy.Placeholder((1,)), step: tp.Numpy.Placeholder((1,))):
        flow.summary.histogram(value, step, "h")

    FloatStep(np.ones(1, np.float32), np.zeros(1, np.float32))
    with pytest.raises(FlowjobError,
                       match=r"flow.summary.histogram .*step must be one integer, got shape \(1,\) float32"):
        flow.sync_default_session()

    @flow.global_function()
    def BadTag(value: tp.Numpy.Placeholder((1,))):
        flow.summary.scalar(value, 0, 3)

    with pytest.raises(FlowjobError, match=r"tag must be an int8 blob of the tag's bytes or a str, got 3"):
        BadTag(np.ones(1, np.float32))

    sink = flow.summary.TensorBoardSink(tmp_path, tag="one")

    @flow.global_function()
    def TwoBlobsOneTag(x: tp.Numpy.Placeholder((1,))) -> tp.Numpy:
        y = flow.math.square(x)
        flow.watch(x, sink)
        flow.watch(y, sink)
        return y

    with pytest.raises(FlowjobError, match=r"this sink's tag 'one' already names 'Input_\d+/out'"):
        TwoBlobsOneTag(np.ones(1, np.float32))
    with pytest.raises(FlowjobError, match=r"kind must be one of"):
        flow.summary.TensorBoardSink(tmp_path, kind="image")


def test_hparam_descriptions_check_their_arguments():
    with pytest.raises(TypeError, match="IntegerRange: min_value must be an int"):
        flow.summary.IntegerRange(1.0, 2)
    with pytest.raises(ValueError, match="RealRange: min_value 2.0 is above max_value 1.0"):
        flow.summary.RealRange(2.0, 1.0)
    with pytest.raises(TypeError, match="ValueSet: every value must be a str"):
        flow.summary.ValueSet(["a", 1])
    with pytest.raises(ValueError, match="Metric 'm': the value type must be int or float"):
        flow.summary.Metric("m", str)
    with pytest.raises(FlowjobError, match="HParam 'layers': value 'many' does not fit its IntegerRange"):
        flow.summary.hparams({flow.summary.HParam("layers", flow.summary.IntegerRange(1, 3)): "many"})
    assert flow.summary.Hparam is flow.summary.HParam
    assert flow.summary.ValueSet([3, 1, 2]).values == [1, 2, 3]


@pytest.mark.parametrize("name", ["Graph", "Projector"])
def test_formats_tensorboard_does_not_read_are_refused(name, tmp_path):
    with pytest.raises(NotImplementedError, match=rf"flow.summary.{name} is not supported: .*TensorBoard"):
        getattr(flow.summary, name)(str(tmp_path))


def test_a_log_folder_that_cannot_be_written_is_named_at_the_call(tmp_path):
    (tmp_path / "logs").write_text("not a folder\n")  # a file where the folder would go
    logdir = str(tmp_path / "logs" / "run")

    @flow.global_function()
    def CreateWriter():  # returns nothing: its step is not waited for, so the check is made at the call
        flow.summary.create_summary_writer(logdir)

    with pytest.raises(FlowjobError, match=rf"the summary log folder '{logdir}' cannot be written"):
        CreateWriter()
    flow.sync_default_session()  # nothing was left to fail later
