# no "from __future__ import annotations": the job signatures below use local names
"""The buffer plan's slots: a free slot smaller than a new value grows to it instead of a new slot."""
import numpy as np

from flowjob_core import JobFunction, apply
from flowjob_core.plan.planner import SLOT_SLACK


def test_a_free_smaller_slot_grows_to_a_larger_value(session, toy):
    def job(x: toy.Array((8,)), m: toy.Array((4, 8))) -> toy.Sync:
        a = apply("twice", [x])        # 32 bytes; x's slot (32 bytes) is free once a is made
        b = apply("toy_add", [a, m])   # 128 bytes: x's slot, grown
        c = apply("twice", [b])        # m's slot (128 bytes) is free
        return apply("twice", [c])     # b's slot is free again
    fn = JobFunction(job, "predict", None, session)
    x, m = np.arange(8, dtype=np.float32), np.ones((4, 8), np.float32)
    np.testing.assert_array_equal(fn(x, m), 4 * (2 * x + m))
    plan = fn.plan()
    x_in, _, _, b_out = (node.outputs[0] for node in plan.order[:4])
    assert plan.buffers.slot_of[b_out] == plan.buffers.slot_of[x_in]
    # exact sizes only: x 32, m 128, a 32, b a fourth slot of 128 (no free slot had its size)
    assert sorted(plan.buffers.slot_nbytes) == [32, 128, 128]


def test_a_free_slot_far_larger_than_the_value_stays_free(session, toy):
    # a (8,) value next to a free slot of SLOT_SLACK * 4 times its size takes a new slot of its own
    rows = 4 * SLOT_SLACK

    def job(x: toy.Array((rows, 8)), y: toy.Array((8,))) -> toy.Sync:
        big = apply("twice", [x])
        small = apply("twice", [y])    # big's slot is still taken
        big2 = apply("twice", [big])   # big dies here: its slot is free afterwards
        return apply("toy_add", [apply("twice", [small]), big2])
    fn = JobFunction(job, "predict", None, session)
    x, y = np.ones((rows, 8), np.float32), np.arange(8, dtype=np.float32)
    np.testing.assert_array_equal(fn(x, y), 4 * y + 4 * x)
    plan = fn.plan()
    x_in, _, _, small = (node.outputs[0] for node in plan.order[:4])
    small_slot = plan.buffers.slot_of[small]  # x's slot was free when it was made
    assert plan.buffers.slot_nbytes[small_slot] == 32 and small_slot != plan.buffers.slot_of[x_in]
