"""flowjob_core.ir.analysis: the graph facts passes and the planner share (observed values, readers,
producers, the buffer each value lives in, in-place writers), on small hand-made jobs."""
from __future__ import annotations

import numpy as np

from flowjob_core.ir import analysis
from flowjob_core.ir.job import BlobSpec, Job, Node, SideOutput
from flowjob_core.ir.opdef import Effects, OpDef


def _op(name: str, **kw: object) -> OpDef:
    return OpDef(name, lambda inputs, attrs: [inputs[0]], **kw)  # type: ignore[arg-type]  # opdef-codemod: keep


OPS = {"input": _op("input"), "exp": _op("exp"), "add": _op("add"),
       "reshape": _op("reshape", effects=Effects(view=True)),
       "update": OpDef("update", lambda inputs, attrs: [], not_differentiable=True, effects=Effects(mutates=(0,)))}


def _job() -> Job:
    """x -> exp -> e; e reshaped twice (views); add(e, v2) -> s; update writes through the second view."""
    job = Job("j")
    job.nodes = [Node("input", "x", (), ("x/out",)),
                 Node("exp", "e", ("x/out",), ("e/out_0",)),
                 Node("reshape", "v1", ("e/out_0",), ("v1/out_0",)),
                 Node("reshape", "v2", ("v1/out_0",), ("v2/out_0",)),
                 Node("add", "s", ("e/out_0", "v2/out_0"), ("s/out_0",)),
                 Node("add", "d", ("s/out_0", "s/out_0"), ("d/out_0",)),
                 Node("update", "u", ("v2/out_0", "x/out"), ())]
    job.specs = {lbn: BlobSpec((2,), np.float32) for n in job.nodes for lbn in n.outputs}
    return job


def test_observed_values_are_returns_side_outputs_and_losses() -> None:
    job = _job()
    assert analysis.observed_values(job) == set()
    job.returns = ["d/out_0"]
    job.side_outputs = [SideOutput("e/out_0", "watch-1")]
    job.losses = ["s/out_0"]
    assert analysis.observed_values(job) == {"d/out_0", "e/out_0", "s/out_0"}
    # fetched: read after the step, returns first (the order values are delivered); a loss is not fetched
    assert analysis.fetched_values(job) == ["d/out_0", "e/out_0"]


def test_readers_list_a_node_once_per_read_and_producers_every_output() -> None:
    job = _job()
    readers = analysis.value_readers(job)
    assert [n.name for n in readers["e/out_0"]] == ["v1", "s"]
    assert [n.name for n in readers["s/out_0"]] == ["d", "d"]  # read twice by one node: not a single reader
    assert [n.name for n in readers["x/out"]] == ["e", "u"]
    assert "d/out_0" not in readers
    producers = analysis.value_producers(job)
    assert {lbn: n.name for lbn, n in producers.items()} == {
        "x/out": "x", "e/out_0": "e", "v1/out_0": "v1", "v2/out_0": "v2", "s/out_0": "s", "d/out_0": "d"}


def test_views_of_views_live_in_the_first_real_buffer() -> None:
    job = _job()
    roots = analysis.buffer_roots(job.nodes, OPS)
    assert roots == {"x/out": "x/out", "e/out_0": "e/out_0", "v1/out_0": "e/out_0", "v2/out_0": "e/out_0",
                     "s/out_0": "s/out_0", "d/out_0": "d/out_0"}
    # a view of a value no node defines (a fragment of a job) lives in that value's buffer
    assert analysis.buffer_roots([Node("reshape", "r", ("p",), ("r/out_0",))], OPS) == {"r/out_0": "p"}


def test_in_place_writers_are_keyed_by_the_buffer_written() -> None:
    job = _job()
    roots = analysis.buffer_roots(job.nodes, OPS)
    writers = analysis.in_place_writers(job.nodes, OPS, roots)
    assert {r: [n.name for n in nodes] for r, nodes in writers.items()} == {"e/out_0": ["u"]}
    assert analysis.in_place_writers(job.nodes[:-1], OPS, roots) == {}


def test_analyses_leave_the_job_unchanged() -> None:
    job = _job()
    job.returns = ["d/out_0"]
    before = job.copy()
    analysis.observed_values(job), analysis.value_readers(job), analysis.value_producers(job)
    analysis.in_place_writers(job.nodes, OPS, analysis.buffer_roots(job.nodes, OPS))
    assert job.nodes == before.nodes and job.specs == before.specs and job.returns == before.returns
