# no "from __future__ import annotations": the signatures below use local names
"""The planner: buffer reuse, no per-step allocation, in-place update ordering, readable failures."""
import numpy as np
import pytest

from flowjob_core import BlobSpec, JobFunction, apply, current_builder
from flowjob_core.plan.planner import StepError


def _chain(session, toy, length, shape=(8,)):
    def job(x: toy.Array(shape)) -> toy.Sync:
        for _ in range(length):
            x = apply("twice", [x])
        return x
    return JobFunction(job, "predict", None, session)


def test_chain_reuses_two_buffers(session, toy):
    fn = _chain(session, toy, 10)
    out = fn(np.ones(8, np.float32))
    np.testing.assert_array_equal(out, np.full(8, 2.0 ** 10))
    plan = fn.plan()
    # each value dies when the next is made: ten outputs alternate between two slots
    assert len(plan.buffers.slot_nbytes) == 2
    assert plan.arena.allocated_bytes == 2 * 8 * 4


def test_buffers_are_reused_across_steps_and_results_are_fresh(session, toy):
    fn = _chain(session, toy, 3)
    plan = fn.plan()
    first = fn(np.ones(8, np.float32))
    raw = dict(plan.arena._raw)
    second = fn(np.full(8, 2, np.float32))
    assert all(plan.arena._raw[k] is v for k, v in raw.items())  # same memory, no new allocation
    np.testing.assert_array_equal(first, np.full(8, 8.0))  # a returned array is never overwritten
    np.testing.assert_array_equal(second, np.full(8, 16.0))


def test_values_alive_together_do_not_share(session, toy):
    def job(x: toy.Array((4,))) -> toy.Sync:
        a = apply("twice", [x])
        b = apply("twice", [a])
        c = apply("twice", [b])
        return apply("toy_add", [a, c])  # a is alive while b and c are made
    fn = JobFunction(job, "predict", None, session)
    np.testing.assert_array_equal(fn(np.ones(4, np.float32)), np.full(4, 2.0 + 8.0))
    slots = fn.plan().buffers.slot_of
    by_name = {lbn.split("/")[0]: s for lbn, s in slots.items()}
    a, b, c = sorted((n for n in by_name if n.startswith("Twice")), key=lambda n: int(n.split("_")[1]))
    assert by_name[a] not in (by_name[b], by_name[c])


def test_in_place_update_runs_after_every_reader(session, toy):
    def job(x: toy.Array((3,))) -> toy.Sync:
        w = current_builder().add_variable("w", BlobSpec((3,), np.float32))
        apply("toy_update", [w, x])  # declared first, must still run last
        return apply("twice", [w])
    fn = JobFunction(job, "predict", None, session)
    fn.ensure_traced()  # variables exist once the body was traced
    session.variables.assign("w", np.ones(3, np.float32))
    np.testing.assert_array_equal(fn(np.full(3, 5, np.float32)), [2, 2, 2])  # read before the update
    np.testing.assert_array_equal(session.variables.get("w"), [6, 6, 6])
    order = [n.op for n in fn.plan().order]
    assert order.index("toy_update") > order.index("twice")


def test_returned_variable_is_the_value_before_the_update(session, toy):
    def job(x: toy.Array((3,))) -> toy.Sync:
        w = current_builder().add_variable("v", BlobSpec((3,), np.float32))
        apply("toy_update", [w, x])
        return w
    fn = JobFunction(job, "predict", None, session)
    fn.ensure_traced()  # variables exist once the body was traced
    session.variables.assign("v", np.zeros(3, np.float32))
    np.testing.assert_array_equal(fn(np.ones(3, np.float32)), [0, 0, 0])
    np.testing.assert_array_equal(fn(np.ones(3, np.float32)), [1, 1, 1])


def test_kernel_failure_names_the_op(session, toy):
    def exploding(x: toy.Array((3,))) -> toy.Sync:
        return apply("boom", [x], name="exploding")
    fn = JobFunction(exploding, "predict", None, session)
    with pytest.raises(StepError, match=r"op 'exploding' \(boom\) at .*test_planner.py.*boom"):
        fn(np.ones(3, np.float32))
    ok = _chain(session, toy, 1)
    np.testing.assert_array_equal(ok(np.ones(8, np.float32)), np.full(8, 2.0))


def test_kernels_see_the_sessions_op_records(session, toy):
    seen = []
    twice = session.registries.ops["twice"]

    def recording(ctx):
        seen.append(ctx.ops)
        return twice.kernel(ctx)

    session.registries.kernels.add("twice", session.backend.tag, recording)
    np.testing.assert_array_equal(_chain(session, toy, 2)(np.ones(8, np.float32)), np.full(8, 4.0))
    assert seen and all(ops is session.registries.ops for ops in seen)  # a chain kernel reads its steps there


def test_generated_step_is_straight_line(session, toy):
    plan = _chain(session, toy, 3).plan()
    body = plan.source.splitlines()
    assert body[0] == "def step(feeds):"
    assert sum("= k" in line for line in body) == plan.kernel_count == 4  # 3 ops + the return copy
    assert not any(word in plan.source for word in ("for ", "while ", "if "))


def test_dead_code_is_not_planned(session, toy):
    def job(x: toy.Array((3,))) -> toy.Sync:
        apply("twice", [x], name="unused")
        return apply("twice", [x], name="used")
    fn = JobFunction(job, "predict", None, session)
    fn(np.ones(3, np.float32))
    assert "unused" not in [n.name for n in fn.plan().order]


def test_in_place_writers_are_ordered_after_each_others_reads(session, toy):
    def job(x: toy.Array((3,))) -> toy.Sync:
        a = current_builder().add_variable("a", BlobSpec((3,), np.float32))
        b = current_builder().add_variable("b", BlobSpec((3,), np.float32))
        apply("toy_update", [a, x])  # writes a: must wait for the read of a below
        apply("toy_update", [b, a])  # writes b from the old value of a
        return x
    fn = JobFunction(job, "predict", None, session)
    fn.ensure_traced()
    session.variables.assign("a", np.ones(3, np.float32))
    session.variables.assign("b", np.zeros(3, np.float32))
    fn(np.full(3, 5, np.float32))
    np.testing.assert_array_equal(session.variables.get("b"), [1, 1, 1])  # the old a
    np.testing.assert_array_equal(session.variables.get("a"), [6, 6, 6])


def test_cyclic_in_place_writes_are_refused(session, toy):
    def job(x: toy.Array((3,))) -> toy.Sync:
        a = current_builder().add_variable("c1", BlobSpec((3,), np.float32))
        b = current_builder().add_variable("c2", BlobSpec((3,), np.float32))
        apply("toy_update", [a, b])
        apply("toy_update", [b, a])
        return x
    with pytest.raises(Exception, match="no order satisfies"):
        JobFunction(job, "predict", None, session)(np.ones(3, np.float32))


def test_a_one_allocation_arena_hands_out_aligned_disjoint_parts_of_one_buffer():
    from flowjob_core.plan.planner import SLOT_ALIGNMENT, Arena, BufferPlan

    buffers = BufferPlan({"a/out_0": 0, "b/out_0": 1, "c/out_0": 2}, [10, 300, 0])
    arena = Arena(np, buffers, one_allocation=True)
    b = arena.view("b/out_0", BlobSpec((75,), np.float32))
    a = arena.view("a/out_0", BlobSpec((10,), np.uint8))
    c = arena.view("c/out_0", BlobSpec((0,), np.float32))
    assert arena.allocated_bytes == SLOT_ALIGNMENT + 2 * SLOT_ALIGNMENT + SLOT_ALIGNMENT
    whole = arena._whole
    assert all(np.shares_memory(v, whole) for v in (a, b)) and c.size == 0
    base = whole.__array_interface__["data"][0]
    offsets = [v.__array_interface__["data"][0] - base for v in (a, b)]
    assert offsets == [0, SLOT_ALIGNMENT]
    a[:] = 7
    b[:] = 1.5
    assert (a == 7).all() and (b == 1.5).all()  # disjoint parts
    again = Arena(np, buffers)  # the default: a buffer per slot, allocated when used
    again.view("a/out_0", BlobSpec((10,), np.uint8))
    assert again.allocated_bytes == 10 and again._whole is None
