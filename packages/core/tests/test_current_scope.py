"""Legacy's distribute annotations on blobs, the logical-view queries and ``flow.current_scope()``."""
# no "from __future__ import annotations": the signatures below use local names

import pytest

from flowjob_core import FunctionConfig, JobFunction, apply
from flowjob_core.api import current_scope as scopes
from flowjob_core.api.placement import placement
from flowjob_core.ir import distribute
from flowjob_core.trace import scope


def _trace(session, toy, body, config=None, shape=(4, 6)):
    ns = {"toy": toy, "body": body}
    exec(f"def job(x: toy.Array({shape!r})) -> toy.Sync:\n    return body(x)", ns)
    return JobFunction(ns["job"], "predict", config, session).ensure_traced()


def test_with_distribute_annotates_the_same_value(session, toy):
    seen = {}

    def body(x):
        y = apply("twice", [x])
        split = y.with_split_distribute(-1)
        whole = y.with_broadcast_distribute()
        seen.update(y=y, split=split, whole=whole, grad=split.with_gradient_distribute(distribute.broadcast()))
        return apply("twice", [split])

    job = _trace(session, toy, body)
    y, split, whole = seen["y"], seen["split"], seen["whole"]
    assert y.distribute == distribute.auto()  # legacy's default
    assert split.lbn == whole.lbn == seen["grad"].lbn == y.lbn and split.spec == y.spec
    assert split.distribute == distribute.split(1) and repr(split.distribute) == "split(1)"  # -1 counted from the end
    assert whole.distribute == distribute.broadcast() and seen["grad"].distribute == split.distribute
    # an annotation adds no node: the job computes twice(twice(x))
    assert [n.op for n in job.nodes if n.op == "twice"] == ["twice", "twice"]


@pytest.mark.parametrize("bad, error, match", [
    (lambda y: y.with_split_distribute(2), ValueError, "split axis 2 is out of range for a blob of shape"),
    (lambda y: y.with_distribute("split"), TypeError, "expected flow.distribute.split"),
    (lambda y: y.with_split_distribute(1.0), TypeError, "axis must be an int"),
])
def test_bad_distributions_name_the_blob(session, toy, bad, error, match):
    with pytest.raises(error, match=match):
        _trace(session, toy, lambda x: bad(apply("twice", [x])))


def test_assert_is_valid_distribute():
    for good in (distribute.split(0), distribute.broadcast(), distribute.auto()):
        distribute.assert_is_valid_distribute(good)
    with pytest.raises(AssertionError, match="not a valid distribute policy"):
        distribute.assert_is_valid_distribute("broadcast")
    assert isinstance(distribute.split(0), distribute.SplitDistribute)
    assert not isinstance(distribute.broadcast(), distribute.SplitDistribute)


def test_views_follow_the_scopes_and_the_job_config(session, toy):
    assert scopes.consistent_view_enabled() and not scopes.mirrored_view_enabled()  # legacy's default
    with scope.mirrored_view():
        assert scopes.mirrored_view_enabled()
        with scope.consistent_view():
            assert scopes.consistent_view_enabled()
    seen = []

    def body(x):
        seen.append(scopes.mirrored_view_enabled())
        with scope.consistent_view():
            seen.append(scopes.mirrored_view_enabled())
        return apply("twice", [x])

    config = FunctionConfig()
    config.default_logical_view(scope.mirrored_view())
    _trace(session, toy, body, config)
    _trace(session, toy, body)
    assert seen == [True, False, False, False]


def test_current_scope_counts_the_placement_devices(session, toy):
    seen = []

    def body(x):
        seen.append(scopes.current_scope())
        with placement("cpu", ["0:0-3", "1:0-1"]):
            seen.append(scopes.current_scope())
        return apply("twice", [x])

    _trace(session, toy, body)
    default, placed = seen
    assert default.job_name == "job" and default.is_consistent and not default.is_mirrored
    assert default.device_parallel_desc_symbol.parallel_num == 1
    assert placed.device_parallel_desc_symbol.device_tag == "cpu"
    assert placed.device_parallel_desc_symbol.machine_id2device_id_list == {0: [0, 1, 2, 3], 1: [0, 1]}
    assert placed.device_parallel_desc_symbol.parallel_num == 6
    assert scopes.current_scope().job_name is None  # outside a body: the session's initial scope


def test_job_only_calls_outside_a_body_raise_legacys_not_implemented():
    from flowjob_core import add_loss
    from flowjob_core.errors import FlowjobError

    with pytest.raises(NotImplementedError, match="only valid inside a @flow.global_function body") as info:
        add_loss(None)
    assert isinstance(info.value, FlowjobError)
