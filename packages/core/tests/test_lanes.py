# no "from __future__ import annotations": the job signatures below use local names
"""The planner's lanes: independent nodes of a step side by side on the host threads, results as in order."""
import threading
import types
from typing import Any

import numpy as np
import pytest

from flowjob_core import Compute, Effects, JobFunction, OpDef, Session, apply, hookimpl, make_plugin_manager
from flowjob_core.backends.blas_threads import BlasThreads
from flowjob_core.backends.host_threads import HostThreads, LaneAborted
from flowjob_core.ir.opdef import KernelContext
from flowjob_core.plan import lanes
from flowjob_core.plan.lanes import Signals
from flowjob_core.plan.planner import StepError
from flowjob_core.plan.scratch import ScratchPool

RAN_ON: dict[str, set[int]] = {}  # node -> the threads that ran it


def _same(inputs, attrs):
    return [inputs[0]]


def _traced_kernel(ctx: KernelContext) -> Any:
    """out = 3x + 1 through a scratch temporary filled with junk first (a shared one would show)."""
    xp, out, spec = ctx.xp, ctx.out(0), ctx.inputs[0]
    tmp = ctx.scratch(spec.shape, spec.dtype)
    name = ctx.node_name

    def run(x):
        RAN_ON.setdefault(name, set()).add(threading.get_ident())
        tmp[...] = -7
        xp.multiply(x, 3, out=tmp)
        xp.add(tmp, 1, out=out)
        return out

    return run


def _ordered_kernel(ctx: KernelContext) -> Any:
    name = ctx.node_name

    def run(x):
        RAN_ON.setdefault(name, set()).add(threading.get_ident())
        return x.copy()

    return run


TRACED = OpDef("traced", _same, kernel=_traced_kernel, not_differentiable=True)
COLLECTIVE = OpDef("toy_collective", _same, kernel=_ordered_kernel, not_differentiable=True,
                   effects=Effects(ordered=True))

plugin = types.SimpleNamespace()


@hookimpl
def flowjob_add_ops(registry: Any) -> None:
    registry.add(TRACED)
    registry.add(COLLECTIVE)


plugin.flowjob_add_ops = flowjob_add_ops


@pytest.fixture
def wide(monkeypatch):
    """Two host threads, every node worth a lane and lanes free: the widest schedule the graph allows."""
    monkeypatch.setenv("FLOWJOB_HOST_THREADS", "2")
    monkeypatch.setattr(lanes, "CALL_US", 1000.0)
    monkeypatch.setattr(lanes, "SECTION_US", 0.0)
    monkeypatch.setattr(lanes, "WAIT_US", 0.0)
    RAN_ON.clear()


def _session(toy) -> Session:
    return Session(make_plugin_manager(plugins=[toy, plugin], autoload=False))


def _branches(session, toy, op="traced", boom=False):
    """x -> two chains of three nodes each -> their sum (and a failing node on the second, if asked)."""
    def job(x: toy.Array((4, 5), "float32")) -> toy.Sync:
        a, b = x, x
        for _ in range(3):
            a = apply(op, [a])
        b = apply("traced", [b])
        if boom:
            b = apply("boom", [b], name="the_failing_node")
        for _ in range(2):
            b = apply("traced", [b])
        return apply("toy_add", [a, b])
    return JobFunction(job, "predict", None, session)


def _expected(x):
    for _ in range(3):
        x = 3 * x + 1
    return 2 * x


def test_independent_chains_run_on_two_lanes_with_the_results_in_order(toy, wide):
    session = _session(toy)
    try:
        fn = _branches(session, toy)
        x = np.arange(20, dtype=np.float32).reshape(4, 5)
        for _ in range(3):
            np.testing.assert_array_equal(fn(x), _expected(x))
        plan = fn.plan()
        assert plan.lanes is not None and any(len(s.lanes) == 2 for s in plan.lanes.sections)
        assert "def lane" in plan.source and "_lanes((" in plan.source
        threads = set().union(*RAN_ON.values())
        assert len(threads) == 2  # the chains ran on two threads
    finally:
        session.close()


def test_one_thread_keeps_the_straight_line_step(toy, wide, monkeypatch):
    monkeypatch.setenv("FLOWJOB_HOST_THREADS", "1")
    session = _session(toy)
    try:
        fn = _branches(session, toy)
        x = np.ones((4, 5), np.float32)
        np.testing.assert_array_equal(fn(x), _expected(x))
        assert fn.plan().lanes is None and "def lane" not in fn.plan().source
    finally:
        session.close()


def test_concurrent_nodes_never_share_a_scratch_buffer_or_a_slot(toy, wide):
    session = _session(toy)
    try:
        fn = _branches(session, toy)
        fn(np.ones((4, 5), np.float32))
        plan = fn.plan()
        slot_of = plan.buffers.slot_of
        for section in plan.lanes.sections:
            if not section.parallel:
                continue
            nodes = plan.order[section.start:section.stop]
            made = [o for n in nodes for o in n.outputs if o in slot_of]
            read = {i for n in nodes for i in n.inputs if i in slot_of}
            assert len({slot_of[o] for o in made}) == len(made)  # no two values made in a section share a slot
            assert not {slot_of[o] for o in made} & {slot_of[i] for i in read if i not in made}
    finally:
        session.close()


def test_pool_never_lends_a_buffer_a_node_beside_holds():
    pool = ScratchPool(np)
    first = pool.requests()
    a = first.take((100,), np.float32)
    beside = pool.requests([first])
    b = beside.take((100,), np.float32)
    later = pool.requests()
    c = later.take((100,), np.float32)
    assert not np.shares_memory(a, b)
    assert np.shares_memory(a, c)  # a node that never runs beside the first shares its buffer


def test_a_failing_node_in_a_lane_is_named_and_the_lanes_waiting_for_it_stop(toy, wide):
    session = _session(toy)
    try:
        fn = _branches(session, toy, boom=True)
        for _ in range(2):  # and again: nothing was left waiting
            with pytest.raises(StepError, match=r"the_failing_node.*\(boom\).*FloatingPointError"):
                fn(np.ones((4, 5), np.float32))
        assert fn.plan().lanes is not None
    finally:
        session.close()


def test_ordered_nodes_stay_on_the_steps_own_thread(toy, wide):
    session = _session(toy)
    try:
        fn = _branches(session, toy, op="toy_collective")
        x = np.arange(20, dtype=np.float32).reshape(4, 5)
        np.testing.assert_array_equal(fn(x), x + (27 * x + 13))  # copies on one chain, 3x + 1 thrice on the other
        order = fn.plan().order
        ordered = [p for p, n in enumerate(order) if n.op == "toy_collective"]
        assert len(ordered) == 3 and all(fn.plan().lanes.lane_of[p] == 0 for p in ordered)
        collective = {t for p in ordered for t in RAN_ON[order[p].name]}
        assert collective <= {threading.get_ident()}
    finally:
        session.close()


def test_lanes_raise_the_failure_not_the_abort_of_a_lane_waiting_for_it(monkeypatch):
    monkeypatch.setenv("FLOWJOB_HOST_THREADS", "2")
    host = HostThreads()
    signals = Signals(1)

    def waiting() -> None:
        signals.wait(0)

    def failing() -> None:
        raise KeyError("the real failure")

    with pytest.raises(KeyError, match="the real failure"):
        host.lanes([waiting, failing], signals.abort)
    with pytest.raises(LaneAborted):
        signals.wait(0)


def test_blas_runs_on_one_thread_inside_a_region_and_on_all_outside():
    from threadpoolctl import threadpool_info

    blas = BlasThreads(2)
    if not blas.describe():
        pytest.skip("no BLAS library found by threadpoolctl in this numpy")

    def counts() -> set[int]:
        return {lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"}

    blas.widen()
    assert counts() == {2}
    blas.narrow()
    blas.narrow()
    assert counts() == {1}
    blas.release()
    blas.widen()  # a chain may not widen while another region still runs
    assert counts() == {1}
    blas.release()
    assert counts() == {2}


def test_a_plan_of_host_split_kernels_holds_blas_to_one_thread_on_its_chains():
    from threadpoolctl import threadpool_info

    from flowjob_core.ir.job import BlobSpec, Job, Node
    from flowjob_core.ir.opdef import OpDef
    from flowjob_core.plan.lanes import blas_wide

    blas = BlasThreads(2)
    assert blas.describe(), "numpy's wheels bundle OpenBLAS, which threadpoolctl finds"

    def counts() -> set[int]:
        return {lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"}

    ops = {"plain": OpDef("plain", lambda *a: []), "window": OpDef("window", lambda *a: [],
                                                                   compute=Compute(host_split=True))}
    plain = [Node("input", "x", (), ("x/out",)), Node("plain", "p", ("x/out",), ("p/out",))]

    def job(rows: int) -> Job:
        made = Job("j")
        for lbn in ("x/out", "p/out", "w/out"):
            made.specs[lbn] = BlobSpec((rows, 64), np.float32)
        return made

    small, large = job(4), job(1 << 14)  # 1 KiB and 4 MiB values
    assert blas_wide(small, plain, ops)
    assert not blas_wide(small, plain + [Node("window", "w", ("p/out",), ("w/out",))], ops)
    assert not blas_wide(large, plain, ops)  # a large elementwise pass, which its kernel splits
    blas.widen()
    assert counts() == {2}
    blas.hold(False)  # the plan's chains: one BLAS thread, and a region's end gives back one
    assert counts() == {1} and blas.chain == 1
    blas.narrow()
    blas.release()
    assert counts() == {1}
    blas.hold(True)
    assert counts() == {2}
