"""Watch sinks: chosen per watch or per scope, by registered name or as an object; third-party sinks."""
import logging
import warnings

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core import FlowjobError, JobFunction, Session, get_default_session, hookimpl, make_plugin_manager
from flowjob_watch.sinks import NonFiniteError, Recorder, RecorderFull, Sink, Stats, read_records


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


P = tp.Numpy.Placeholder((2, 2))


def _x(k=1.0):
    return np.array([[1, -2], [3, -4]], np.float32) * k


def test_built_in_sinks_are_registered_through_the_hook():
    assert {"callback", "dict", "recorder", "stats"} <= set(get_default_session().registries.watch_sinks.names())


def test_stats_sink_by_object():
    stats = Stats()

    @flow.global_function()
    def job(x: P) -> tp.Numpy:
        y = flow.nn.relu(x)
        flow.watch(y, stats)
        flow.watch(x, sink=stats)
        return y

    job(_x())
    job(_x(2))
    (relu_key,) = [k for k in stats.history if k.startswith("Relu_")]
    rows = list(stats.history[relu_key])
    assert [r.step for r in rows] == [0, 1]
    relu = np.maximum(_x(2), 0)
    last = rows[-1]
    assert (last.mean, last.min, last.max, last.nan, last.inf) == pytest.approx((relu.mean(), 0, 6, 0, 0))
    assert last.std == pytest.approx(relu.std())
    assert len(stats.history) == 2


def test_stats_sink_by_name_logs(caplog):
    @flow.global_function()
    def job(x: P) -> tp.Numpy:
        flow.watch(x, sink="stats")
        return x

    with caplog.at_level(logging.INFO, logger="flowjob.watch"):
        job(_x())
    assert any("Input_" in r.message and "step 0: mean=-0.5" in r.message and "nan=0 inf=0" in r.message
               for r in caplog.records)


def test_stats_counts_non_finite_values_and_keeps_finite_statistics():
    stats = Stats()

    @flow.global_function()
    def job(x: P) -> None:
        flow.watch(x, stats)

    job(np.array([[np.nan, 1], [np.inf, 3]], np.float32))
    flow.sync_default_session()
    row = next(iter(stats.history.values()))[-1]
    assert (row.nan, row.inf, row.mean, row.min, row.max, row.finite) == (1, 1, 2.0, 1.0, 3.0, False)


def test_raise_on_nonfinite_names_blob_and_step_at_the_next_sync_point():
    @flow.global_function()
    def job(x: P) -> None:
        flow.watch(x, sink="stats", raise_on_nonfinite=True, log=False)

    @flow.global_function()
    def sync_job(x: P) -> tp.Numpy:
        return x

    job(_x())
    job(np.full((2, 2), np.nan, np.float32))
    with pytest.raises(NonFiniteError, match=r"watched blob 'Input_\d+/out' of job 'job' holds 4 NaN and 0 Inf "
                                             r"value\(s\) at step 1"):
        sync_job(_x())
    np.testing.assert_array_equal(sync_job(_x()), _x())  # the session goes on


def test_stats_of_a_gradient_is_labelled_diff():
    stats = Stats()

    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((4,))) -> tp.Numpy:
        w = flow.get_variable("w", shape=(4,), initializer=lambda s, d, r: np.ones(s, d))
        flow.watch_diff(w, sink=stats)
        flow.watch(w, sink=stats)
        loss = x * w
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)
        return loss

    train(np.arange(4, dtype=np.float32))
    assert set(stats.history) == {"w/out", "w/out:diff"}
    assert stats.last("w/out:diff").mean == pytest.approx(1.5)


def test_recorder_writes_one_file_per_step(tmp_path):
    recorder = Recorder(tmp_path / "rec")

    @flow.global_function()
    def job(x: P) -> tp.Numpy:
        y = flow.nn.relu(x, name="y")
        flow.watch(y, recorder)
        flow.watch(x, sink=recorder)
        return y

    for k in range(3):
        job(_x(k + 1))
    records = list(read_records(tmp_path / "rec"))
    assert [r["__step__"] for r in records] == [0, 1, 2]
    assert {r["__job__"] for r in records} == {"job"}
    for k, record in enumerate(records):
        np.testing.assert_array_equal(record["y/out_0"], np.maximum(_x(k + 1), 0))
        assert sum(key.startswith("Input_") for key in record) == 1
    assert [p.name for p in recorder.files] == ["step_00000000.npz", "step_00000001.npz", "step_00000002.npz"]


def test_recorder_by_name_with_options_every_and_names(tmp_path):
    @flow.global_function()
    def job(x: P) -> None:
        y = flow.nn.relu(x, name="y")
        z = flow.nn.relu(y, name="z")
        flow.watch(y, str(tmp_path), sink="recorder", every=2, names=["y/out_0"])
        flow.watch(z, lambda v: None)

    for k in range(5):
        job(_x(k))
    flow.sync_default_session()
    records = list(read_records(tmp_path))
    assert [r["__step__"] for r in records] == [0, 2, 4]
    assert all(set(r) == {"__job__", "__step__", "y/out_0"} for r in records)


def test_recorder_rotation_keeps_the_newest_steps(tmp_path):
    recorder = Recorder(tmp_path, max_steps=2)

    @flow.global_function()
    def job(x: P) -> None:
        flow.watch(x, recorder)

    for k in range(5):
        job(_x(k))
    flow.sync_default_session()
    assert [p.name for p in recorder.files] == ["step_00000003.npz", "step_00000004.npz"]
    assert [r["__step__"] for r in read_records(tmp_path)] == [3, 4]


def test_recorder_max_bytes_rotation(tmp_path):
    recorder = Recorder(tmp_path, max_bytes=1500)

    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((64,))) -> None:
        flow.watch(x, recorder)

    for k in range(6):
        job(np.full(64, k, np.float32))
    flow.sync_default_session()
    sizes = [p.stat().st_size for p in recorder.files]
    assert sum(sizes) <= 1500 and len(sizes) >= 1
    assert [r["__step__"] for r in read_records(tmp_path)][-1] == 5


def test_recorder_stop_policy_warns_once_and_keeps_what_it_wrote(tmp_path):
    recorder = Recorder(tmp_path, max_steps=2, on_full="stop")

    @flow.global_function()
    def job(x: P) -> None:
        flow.watch(x, recorder)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for k in range(4):
            job(_x(k))
        flow.sync_default_session()
    assert [r["__step__"] for r in read_records(tmp_path)] == [0, 1]
    assert recorder.stopped
    assert sum(issubclass(w.category, RecorderFull) for w in caught) == 1


def test_recorder_is_readable_after_a_crash_and_resumes(tmp_path):
    recorder = Recorder(tmp_path)

    @flow.global_function()
    def job(x: P) -> None:
        flow.watch(x, recorder)

    job(_x())
    flow.sync_default_session()
    (tmp_path / ".step_00000001.npz.tmp").write_bytes(b"half a step")  # a crash while writing
    assert [r["__step__"] for r in read_records(tmp_path)] == [0]
    resumed = Recorder(tmp_path)
    assert len(resumed.files) == 1
    resumed.consume(_x(), type("B", (), {"lbn": "x/out", "job_name": "j", "batch_axis": 0})())
    resumed.end_step("j")
    assert [p.name for p in resumed.files] == ["step_00000000.npz", "step_00000001.npz"]


def test_watch_scope_with_a_recorder(tmp_path):
    @flow.global_function()
    def job(x: P) -> None:
        with flow.watch_scope(sink=Recorder(tmp_path)):
            flow.nn.relu(flow.nn.relu(x, name="a"), name="b")

    job(_x())
    flow.sync_default_session()
    (record,) = read_records(tmp_path)
    assert list(k for k in record if not k.startswith("__")) == ["a/out_0", "b/out_0"]


def test_sink_selection_errors():
    @flow.global_function()
    def unknown(x: P) -> None:
        flow.watch(x, sink="nope")

    with pytest.raises(FlowjobError, match=r"flow.watch\('Input_\d+/out'\): no watch sink 'nope'; registered: "):
        unknown(_x())

    @flow.global_function()
    def both(x: P) -> None:
        flow.watch(x, print, sink=Stats())

    with pytest.raises(FlowjobError, match="give either a handler or sink=, not both"):
        both(_x())

    @flow.global_function()
    def options_on_object(x: P) -> None:
        flow.watch(x, Stats(), log=True)

    with pytest.raises(FlowjobError, match=r"options \['log'\] apply to a sink given by name"):
        options_on_object(_x())

    @flow.global_function()
    def bad_option(x: P) -> None:
        flow.watch(x, sink="stats", colour="red")

    with pytest.raises(FlowjobError, match=r"sink 'stats' cannot be made from None and \{'colour': 'red'\}"):
        bad_option(_x())


class Collect(Sink):
    """A third-party sink: registered by a plugin, chosen by name."""

    def __init__(self, target=None, **options):
        self.values, self.steps, self.options = [], [], options

    def consume(self, value, blob_def, *, diff=False):
        self.values.append((blob_def.lbn, diff, value.copy()))

    def end_step(self, job):
        self.steps.append(job)


made = []


class ThirdPartyPlugin:
    @hookimpl
    def flowjob_add_watch_sinks(self, registry):
        registry.add("collect", lambda target=None, **options: made.append(Collect(target, **options)) or made[-1])


def test_a_third_party_sink_is_chosen_by_name():
    session = Session(make_plugin_manager(plugins=[ThirdPartyPlugin()]))
    try:
        def job(x: P) -> tp.Numpy:
            y = flow.nn.relu(x)
            flow.watch(y, sink="collect", flavour="test")
            flow.watch(x, sink="collect")
            return y

        fn = JobFunction(job, "predict", None, session)
        fn(_x())
        fn(_x(2))
        first, second = made[-2:]
        assert first.options == {"flavour": "test"}
        assert [v[1] for v in first.values] == [False, False] and first.steps == ["job", "job"]
        np.testing.assert_array_equal(second.values[1][2], _x(2))
    finally:
        session.close()
