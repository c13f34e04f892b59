"""A watched job is plain data: the sinks, handlers and blobs it refers to are keys of the function's bindings."""
import numpy as np

from flowjob_core import add_loss, apply, get_variable
from flowjob_core.testing.plain_data import traced_and_passed
from flowjob_watch import watch, watch_diff, watch_scope
from flowjob_watch.sinks import Sink

X = np.array([1.0, -2.0, 3.0], np.float32)


class Steps(Sink):
    def __init__(self):
        self.events = []

    def consume(self, value, blob_def, *, diff=False):
        self.events.append(("value", blob_def.lbn, diff))

    def end_step(self, job):
        self.events.append(("end", job))


def _watched_train_job(define, kinds, sink, seen):
    def job(x: kinds.Array((3,))) -> kinds.Later:
        w = get_variable("w", shape=(3,), initializer=lambda s, d, r: np.ones(s, d))
        with watch_scope({}, sink=sink):
            y = apply("add_n", [x, w], name="y")
        watch(y, lambda v: seen.append(v.tolist()))
        watch(y, sink="stats")
        watch_diff(y, sink)
        add_loss(y)

    return define(job, "train")


def test_traced_and_passed_job_holds_no_callables_and_deep_copies(define, kinds, session):
    sink, seen = Steps(), []
    fn = _watched_train_job(define, kinds, sink, seen)
    traced, final = traced_and_passed(fn)  # each holds no object and deep-copies equal
    labels = [s.label for s in final.side_outputs]
    assert labels == ["y/out_0"] * 4 + ["y/out_0:diff"]  # the scope (dict, sink), watch y twice, diff of y
    assert all(isinstance(s.consumer, str) and s.consumer in fn.bindings for s in final.side_outputs)
    watch_intent = next(i for i in traced.intents if i.kind == "watch")
    assert fn.bindings[watch_intent.payload["sink"]] is not None
    assert set(watch_intent.payload) == {"lbn", "diff", "optional", "sink", "blob_def"}


def test_watch_delivery_is_unchanged_by_keys(define, kinds, session):
    sink, seen = Steps(), []
    fn = _watched_train_job(define, kinds, sink, seen)
    fn(X)
    fn(X)
    session.sync()
    assert len(seen) == 2
    step = [e for e in sink.events]
    per_step = len(step) // 2
    assert step[:per_step] == step[per_step:]
    assert step[per_step - 1] == ("end", fn.name)  # once per step, after the sink's last value (the diff)
    assert [e for e in step if e[0] == "end"] == [("end", fn.name)] * 2
