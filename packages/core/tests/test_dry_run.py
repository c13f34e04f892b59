"""Dry runs: job definitions are recorded, a call stops the program, a job can be seen after any pass."""
# no "from __future__ import annotations": the signatures below use local names
import pytest

from flowjob_core import FlowjobError, JobFunction, add_loss, apply, get_variable
from flowjob_core.api.dry_run import JobCalled, active, dry_run, job_after, pass_names


def _define(session, toy, job_type="predict"):
    def job(x: toy.Array((3,))) -> toy.Sync:
        w = get_variable("w", shape=(3,), initializer=None)
        y = apply("twice", [apply("toy_add", [x, w])], name="y")
        if job_type == "train":
            add_loss(y)
        return y

    return JobFunction(job, job_type, None, session)


def test_calls_stop_and_definitions_are_recorded(session, toy):
    with dry_run() as run:
        first = _define(session, toy)
        second = _define(session, toy)  # the same name again: the later definition counts
        with pytest.raises(JobCalled, match="'job' was called during a dry run"):
            second([1.0, 2.0, 3.0])
    assert run.functions == [first, second] and run.latest() == [second]
    assert second._plan is None and active() is None  # nothing planned; the dry run is over
    assert not isinstance(JobCalled("job"), Exception)  # a script's `except Exception` cannot swallow it


def test_job_after_a_pass_runs_the_passes_up_to_it_on_a_copy(session, toy):
    fn = _define(session, toy, "train")
    traced = job_after(fn, None)
    assert traced is fn.ensure_traced()
    after_autodiff = job_after(fn, "autodiff")
    seeds = [n for n in after_autodiff.nodes if n.op == "ones_like"]  # autodiff's seed of the loss
    assert seeds and not [n for n in traced.nodes if n.op == "ones_like"]  # the traced job is untouched
    assert pass_names(fn).index("autodiff") < pass_names(fn).index("dce")
    final = job_after(fn, "all")
    assert len(final.nodes) <= len(after_autodiff.nodes)
    assert fn._plan is None  # printing never plans


def test_an_unknown_pass_is_an_error_listing_the_passes_in_order(session, toy):
    fn = _define(session, toy)
    with pytest.raises(FlowjobError, match=r"unknown pass 'fuse'; the passes, in order: verify, autodiff, .*'all'"):
        job_after(fn, "fuse")
