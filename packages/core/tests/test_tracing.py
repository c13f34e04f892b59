"""Tracing: legacy naming, namespaces, placements, build-time shape errors and the verifier."""
# no "from __future__ import annotations": the signatures below use local names

import re

import numpy as np
import pytest

from flowjob_core import (FlowjobError, JobArgumentError, JobDefinitionError, JobFunction, OpBuildError, apply)
from flowjob_core.ir import naming
from flowjob_core.trace import scope
from flowjob_core.passes.pipeline import PassContext, VerificationError, verify
from flowjob_core.api.placement import placement as placement_scope


def _job(session, toy, body, ret=None, shapes=((3,),)):
    params = ", ".join(f"x{i}: toy.Array({s!r})" for i, s in enumerate(shapes))
    ret_ann = "toy.Sync" if ret is None else ret
    ns = {"toy": toy, "body": body}
    exec(f"def job({params}) -> {ret_ann}:\n    return body({', '.join(f'x{i}' for i in range(len(shapes)))})", ns)
    return JobFunction(ns["job"], "predict", None, session)


def test_unnamed_ops_share_one_process_wide_counter(session, toy):
    fn = _job(session, toy, lambda x: apply("twice", [apply("twice", [x])]))
    job = fn.ensure_traced()
    names = [n.name for n in job.nodes if n.op == "twice"]
    ids = [int(re.fullmatch(r"Twice_(\d+)", n).group(1)) for n in names]
    assert ids[1] == ids[0] + 1
    start = naming.next_id()
    assert start > ids[1]  # never reset, shared by every prefix


def test_lbns_and_explicit_names(session, toy):
    fn = _job(session, toy, lambda x: apply("twice", [x], name="double"))
    job = fn.ensure_traced()
    node = next(n for n in job.nodes if n.op == "twice")
    assert node.name == "double" and node.outputs == ("double/out_0",)
    assert job.placeholders[0].lbn.startswith("Input_") and job.placeholders[0].lbn.endswith("/out")


def test_namespace_joins_with_dash(session, toy):
    def body(x):
        with scope.namespace("backbone"), scope.namespace("branch"):
            return apply("twice", [x], name="f")
    job = _job(session, toy, body).ensure_traced()
    assert "backbone-branch-f" in [n.name for n in job.nodes]


def test_placement_tags_nodes(session, toy):
    def body(x):
        with placement_scope("cpu", "0:0"):
            return apply("twice", [x])
    job = _job(session, toy, body).ensure_traced()
    assert {n.device for n in job.nodes if n.op == "twice"} == {"cpu"}
    with pytest.raises(ValueError, match="machine_device_ids"):
        placement_scope("cpu", "zero")
    with pytest.raises(ValueError, match="device_tag"):
        placement_scope("tpu", "0:0")
    assert placement_scope("gpu", "0:0-3").device_count == 4


def test_shape_error_at_build_time_names_op_and_user_line(session, toy):
    def body(a, b):
        return apply("toy_add", [a, b], name="bad_add")  # the line the error must point at
    fn = _job(session, toy, body, shapes=((3,), (4,)))
    with pytest.raises(OpBuildError) as info:
        fn(np.zeros(3, np.float32), np.zeros(4, np.float32))
    message = str(info.value)
    assert "'bad_add' (toy_add)" in message and "cannot broadcast (3,) and (4,)" in message
    assert f"test_tracing.py:{body.__code__.co_firstlineno + 1}" in message
    assert "job 'job'" in message


def test_session_usable_after_errors(session, toy):
    bad = _job(session, toy, lambda a, b: apply("toy_add", [a, b]), shapes=((3,), (4,)))
    with pytest.raises(OpBuildError):
        bad(np.zeros(3, np.float32), np.zeros(4, np.float32))
    good = _job(session, toy, lambda x: apply("twice", [x]))
    with pytest.raises(JobArgumentError, match="argument 'x0'"):
        good(np.zeros(4, np.float32))
    with pytest.raises(JobArgumentError, match="positional"):
        good(x0=np.zeros(3, np.float32))
    with pytest.raises(JobArgumentError, match="takes 1 argument"):
        good()
    np.testing.assert_array_equal(good(np.arange(3, dtype=np.float32)), [0, 2, 4])


def test_bad_definitions(session, toy):
    def no_annotation(x) -> toy.Sync:
        return x
    with pytest.raises(JobDefinitionError, match="parameter 'x' has no annotation"):
        JobFunction(no_annotation, "predict", None, session)

    def bad_annotation(x: int) -> toy.Sync:
        return x
    with pytest.raises(JobDefinitionError, match="invalid parameter annotation"):
        JobFunction(bad_annotation, "predict", None, session)

    def bad_return(x: toy.Array((3,))) -> int:
        return x
    with pytest.raises(JobDefinitionError, match="invalid return annotation"):
        JobFunction(bad_return, "predict", None, session)

    def star(*xs: toy.Array((3,))) -> toy.Sync:
        return xs[0]
    with pytest.raises(JobDefinitionError, match=r"\*args"):
        JobFunction(star, "predict", None, session)


def test_ops_only_inside_a_job():
    with pytest.raises(FlowjobError, match="only valid inside"):
        apply("twice", [])


def test_blob_from_another_job_is_refused(session, toy):
    leaked = []
    first = _job(session, toy, lambda x: leaked.append(x) or apply("twice", [x]))
    first.ensure_traced()
    second = _job(session, toy, lambda x: apply("toy_add", [x, leaked[0]]))
    with pytest.raises(OpBuildError, match="belongs to job"):
        second.ensure_traced()


def test_blob_is_a_plain_object_in_a_condition(session, toy):
    # legacy's lazy blobs were plain objects: ``if bias:`` tests an optional argument
    seen = []

    def body(x):
        seen.append(bool(x))
        return x if x else None
    _job(session, toy, body).ensure_traced()
    assert seen == [True]


@pytest.mark.parametrize("ask", [float, int, lambda b: b.numpy(), lambda b: [0, 1][b]])
def test_blob_has_no_value_while_tracing(session, toy, ask):
    def body(x):
        ask(x)
        return x
    with pytest.raises(FlowjobError, match="no value while the job is traced"):
        _job(session, toy, body).ensure_traced()


def test_verifier_catches_broken_ir(session, toy):
    job = _job(session, toy, lambda x: apply("twice", [x])).ensure_traced().copy()
    ctx = PassContext(session, session.registries)
    verify(job, ctx)
    job.nodes.reverse()
    with pytest.raises(VerificationError, match="used before it is defined"):
        verify(job, ctx)


def test_a_job_may_be_defined_after_another_ran(session, toy):
    first = _job(session, toy, lambda x: apply("twice", [x]))
    np.testing.assert_array_equal(first(np.ones(3, np.float32)), [2, 2, 2])
    later = _job(session, toy, lambda x: apply("twice", [apply("twice", [x])]))
    np.testing.assert_array_equal(later(np.ones(3, np.float32)), [4, 4, 4])


def test_string_annotations_may_name_locals_of_the_decorating_scope(toy, monkeypatch):
    import flowjob_core.api.function as function_module
    from flowjob_core import Session, make_plugin_manager
    session = Session(make_plugin_manager(plugins=[toy], autoload=False))
    monkeypatch.setattr(function_module, "get_default_session", lambda: session)
    shape = (2,)
    ns = {"toy": toy, "apply": apply, "global_function": function_module.global_function}
    exec("from __future__ import annotations\n"
         "def define(shape):\n"
         "    @global_function()\n"
         "    def job(x: toy.Array(shape)) -> toy.Sync:\n"
         "        return apply('twice', [x])\n"
         "    @global_function\n"
         "    def bare(x: toy.Array(shape)) -> toy.Sync:\n"
         "        return x\n"
         "    return job, bare\n", ns)
    job, bare = ns["define"](shape)
    np.testing.assert_array_equal(job(np.ones(2, np.float32)), [2, 2])
    np.testing.assert_array_equal(bare(np.ones(2, np.float32)), [1, 1])
    session.close()


def test_side_outputs_name_their_consumer_by_a_key_the_planner_binds(session, toy):
    import copy
    from flowjob_core import SideOutput
    from flowjob_core.ir.bindings import Bindings
    from flowjob_core.plan.planner import build_plan

    bindings = Bindings()
    sink = []
    key = bindings.add(sink.append, "collect")
    assert key == "collect#0" and bindings[key] == sink.append
    assert bindings.add(sink) == bindings.add(sink)  # one object, one key
    with pytest.raises(TypeError, match="consumer must be the key of a callable added with ctx.bindings.add"):
        SideOutput("x/out", sink.append)
    fn = _job(session, toy, lambda x: apply("twice", [x], name="y"))
    job = copy.deepcopy(fn.ensure_traced())
    job.side_outputs.append(SideOutput("y/out_0", "missing#9", "y"))
    with pytest.raises(FlowjobError, match=r"job 'job', side output 'y': no object is bound to key 'missing#9'"):
        build_plan(job, session.backend, session.registries, session.variables, bindings)
    job.side_outputs[0] = SideOutput("y/out_0", key, "y")
    plan = build_plan(job, session.backend, session.registries, session.variables, bindings)
    _, sides = plan.run([np.ones(3, np.float32)])
    plan.side_consumers[0](sides[0])
    np.testing.assert_array_equal(sink[0], [2, 2, 2])


def test_a_traced_job_keeps_a_frozen_snapshot_of_its_function_config(session, toy):
    from flowjob_core.ir.job import ConfigSnapshot

    fn = _job(session, toy, lambda x: apply("twice", [x]))
    fn.config.enable_numerics_check(True)
    job = fn.ensure_traced()
    assert isinstance(job.config, ConfigSnapshot) and job.config.get("enable_numerics_check") is True
    fn.config.enable_numerics_check(False)  # the function's own config: later traces see it, this job does not
    assert job.config.get("enable_numerics_check") is True


def test_nodes_record_the_placement_they_were_traced_in(session, toy):
    def body(x):
        with placement_scope("cpu", ["0:0-1", "1:0"]):
            y = apply("twice", [x])
        return apply("twice", [y])
    job = _job(session, toy, body).ensure_traced()
    placed = [n.placement for n in job.nodes if n.op == "twice"]
    assert placed == [("0:0-1", "1:0"), ()]  # the second: the job's default placement
    text = str(job)
    assert "= twice(" in text and " on 0:0-1,1:0 = twice(Input" in text, text
