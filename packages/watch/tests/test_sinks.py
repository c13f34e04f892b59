"""The sinks on their own: statistics, the recorder's files and bounds, sink selection."""
import math
import warnings

import numpy as np
import pytest

from flowjob_core import FlowjobError
from flowjob_core.plan.mirrored import PerDevice
from flowjob_watch.sinks import NonFiniteError, Recorder, RecorderFull, Stats, label, logical, read_records
from flowjob_watch.sinks.base import bind, resolve
from flowjob_watch.sinks.stats import summarize


class FakeBlob:
    def __init__(self, lbn="x/out", job_name="job", batch_axis=0):
        self.lbn, self.job_name, self.batch_axis = lbn, job_name, batch_axis


def test_summarize():
    row = summarize(np.array([1.0, np.nan, 3.0, -np.inf], np.float32), 4)
    assert (row.step, row.mean, row.min, row.max, row.nan, row.inf, row.size) == (4, 2.0, 1.0, 3.0, 1, 1, 4)
    empty = summarize(np.array([np.nan]), 0)
    assert math.isnan(empty.mean) and empty.nan == 1
    ints = summarize(np.arange(4), 0)
    assert (ints.mean, ints.nan, ints.finite) == (1.5, 0, True)


def test_stats_steps_per_label_and_raise():
    stats = Stats(raise_on_nonfinite=True, keep=2)
    for k in range(3):
        stats.consume(np.full(3, k, np.float32), FakeBlob())
    stats.consume(np.ones(3), FakeBlob(), diff=True)
    assert [r.step for r in stats.history["x/out"]] == [1, 2]  # the last `keep`
    assert stats.last("x/out:diff").mean == 1
    with pytest.raises(NonFiniteError, match=r"watched blob 'x/out' of job 'job' holds 0 NaN and 1 Inf value\(s\) "
                                             r"at step 3"):
        stats.consume(np.array([np.inf]), FakeBlob())
    with pytest.raises(KeyError, match="no statistics for 'nope'"):
        stats.last("nope")


def _step(recorder, value, job="job", lbn="x/out"):
    recorder.consume(np.asarray(value), FakeBlob(lbn, job))
    recorder.end_step(job)


def test_recorder_files_are_complete_steps(tmp_path):
    rec = Recorder(tmp_path, compress=True)
    _step(rec, [1.0, 2.0])
    rec.consume(np.ones(2), FakeBlob("y/out", "other"))
    _step(rec, [3.0], job="job")  # another job's values wait for that job's own end of step
    rec.end_step("other")
    records = list(read_records(tmp_path))
    assert [(r["__job__"], r["__step__"]) for r in records] == [("job", 0), ("job", 1), ("other", 0)]
    assert records[2]["y/out"].tolist() == [1, 1]
    assert not list(tmp_path.glob(".*.tmp"))


def test_recorder_bounds(tmp_path):
    rotate = Recorder(tmp_path / "r", max_steps=3)
    for k in range(7):
        _step(rotate, [k])
    assert [int(r["x/out"][0]) for r in read_records(tmp_path / "r")] == [4, 5, 6]
    stop = Recorder(tmp_path / "s", max_bytes=1, on_full="stop")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _step(stop, [1.0])
        _step(stop, [2.0])
    assert stop.stopped and list(read_records(tmp_path / "s")) == []
    assert [w.category for w in caught] == [RecorderFull]
    with pytest.raises(ValueError, match="on_full must be 'rotate' or 'stop'"):
        Recorder(tmp_path, on_full="wrap")
    with pytest.raises(ValueError, match="every must be a positive int"):
        Recorder(tmp_path, every=0)


def test_values_over_devices_are_merged_once():
    pieces = PerDevice([np.ones((1, 2)), np.zeros((1, 2))])
    assert logical(pieces, FakeBlob()).shape == (2, 2)
    assert logical(PerDevice([np.ones(2), np.ones(2)]), FakeBlob(batch_axis=None)).shape == (2,)
    with pytest.raises(FlowjobError, match="differs across the 2 devices"):
        logical(PerDevice([np.ones(2), np.zeros(2)]), FakeBlob(batch_axis=None))
    assert label(FakeBlob(), True) == "x/out:diff"


def test_bind_tells_a_sink_whether_it_sees_a_gradient():
    stats = Stats()
    bind(stats, True)(np.ones(1), FakeBlob())
    bind(stats, False)(np.ones(1), FakeBlob())
    assert set(stats.history) == {"x/out", "x/out:diff"}
    plain = []
    bind(lambda v, b: plain.append(b.lbn), True)(np.ones(1), FakeBlob())
    assert plain == ["x/out"]


def test_resolve_rejects_what_is_not_a_sink(session):
    with pytest.raises(FlowjobError, match=r"w: sink must be a registered name, a flowjob_watch.sinks.Sink"):
        resolve(session.registries, 42, None, {}, "w")
    assert resolve(session.registries, "stats", None, {"log": False}, "w").log is False
