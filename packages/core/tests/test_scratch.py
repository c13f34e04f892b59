# no "from __future__ import annotations": the job signatures below use local names
"""KernelContext.scratch: temporaries lent by one pool per plan, a node's requests never overlapping."""
import types
from typing import Any

import numpy as np
import pytest

from flowjob_core import JobFunction, OpDef, Session, apply, hookimpl, make_plugin_manager
from flowjob_core.ir.opdef import KernelContext
from flowjob_core.plan.scratch import SLACK, ScratchPool, size_class

SEEN: list[tuple[str, list[Any]]] = []  # (node, its scratch arrays), as the kernels were built


def _same(inputs, attrs):
    return [inputs[0]]


def _scratchy_kernel(ctx: KernelContext) -> Any:
    """out = 3x + 1 through three temporaries; each is filled with junk first to catch overlaps."""
    xp, out, spec = ctx.xp, ctx.out(0), ctx.inputs[0]
    a = ctx.scratch(spec.shape, spec.dtype)
    b = ctx.scratch(spec.shape, spec.dtype)
    flags = ctx.scratch(spec.shape, bool)
    SEEN.append((ctx.node_name, [a, b, flags]))

    def run(x):
        a[...] = -7
        b[...] = -9
        flags[...] = False
        xp.multiply(x, 2, out=a)
        xp.add(x, 1, out=b)  # would clobber a if they overlapped
        xp.greater(a, -1e30, out=flags)
        xp.add(a, b, out=out)
        xp.copyto(out, xp.nan, where=xp.logical_not(flags))  # flags overlapping a would show
        return out

    return run


SCRATCHY = OpDef("scratchy", _same, kernel=_scratchy_kernel, not_differentiable=True)

plugin = types.SimpleNamespace()


@hookimpl
def flowjob_add_ops(registry: Any) -> None:
    registry.add(SCRATCHY)


plugin.flowjob_add_ops = flowjob_add_ops


@pytest.fixture
def scratch_session(toy):
    SEEN.clear()
    s = Session(make_plugin_manager(plugins=[toy, plugin], autoload=False))
    yield s
    s.close()


def _chain(session, toy, shape, length=3, dtype="float32"):
    def job(x: toy.Array(shape, dtype)) -> toy.Sync:
        for _ in range(length):
            x = apply("scratchy", [x])
        return x
    return JobFunction(job, "predict", None, session)


def _expected(x, length=3):
    for _ in range(length):
        x = 3 * x + 1
    return x


def _base(a):
    while a.base is not None:
        a = a.base
    return a


def test_distinct_within_a_node_shared_across_nodes(scratch_session, toy):
    fn = _chain(scratch_session, toy, (4, 5))
    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    np.testing.assert_array_equal(fn(x), _expected(x))
    assert len(SEEN) == 3
    for _, arrays in SEEN:
        bases = [id(_base(a)) for a in arrays]
        assert len(set(bases)) == 3  # a node's requests never overlap
    first = [id(_base(a)) for a in SEEN[0][1]]
    for _, arrays in SEEN[1:]:
        assert [id(_base(a)) for a in arrays] == first  # every node gets the same buffers
    pool = fn.plan().arena.scratch
    # three requests of at most 80 bytes: three buffers of the smallest class, lent to every node
    assert pool.allocated_bytes == 3 * size_class(80)


def test_views_have_the_requested_dtype_and_shape(scratch_session, toy):
    fn = _chain(scratch_session, toy, (2, 3, 4), length=1, dtype="float64")
    fn(np.ones((2, 3, 4), np.float64))
    a, b, flags = SEEN[0][1]
    assert a.shape == b.shape == flags.shape == (2, 3, 4)
    assert a.dtype == np.float64 and flags.dtype == np.bool_
    assert a.flags.c_contiguous and a.flags.writeable


def test_a_plan_run_twice_gives_the_same_results(scratch_session, toy):
    fn = _chain(scratch_session, toy, (64,))
    x = (np.arange(64, dtype=np.float32) - 32) / 8  # exact in float32, so 2x + (x + 1) == 3x + 1
    first = fn(x)
    second = fn(x)
    np.testing.assert_array_equal(first, second)
    np.testing.assert_array_equal(first, _expected(x))


def test_outside_a_plan_scratch_is_private():
    ctx = KernelContext(np, None, "scratchy", "n", {}, (), ())
    a, b = ctx.scratch((3,)), ctx.scratch((3,))
    assert a.dtype == np.float32 and not np.shares_memory(a, b)


def test_pool_lends_the_smallest_fitting_buffer_a_node_does_not_hold():
    pool = ScratchPool(np)
    one, two = pool.requests(), pool.requests()
    a1, b1 = one.take((1000,), np.float32), one.take((1000,), np.int32)
    a2, b2 = two.take((1000,), np.float32), two.take((999,), np.float32)
    assert _base(a1) is _base(a2) and _base(b1) is _base(b2) and _base(a1) is not _base(b1)
    c = two.take((2, 0), np.float32)  # 0 bytes: the 4096-byte buffers are more than SLACK times too big
    assert c.shape == (2, 0)
    assert pool.allocated_bytes == 2 * size_class(4000) + size_class(0)
    three = pool.requests()
    smaller = three.take((750,), np.float32)  # 3000 bytes: a 4096-byte buffer is close enough
    assert _base(smaller) is _base(a1)
    far = three.take((150,), np.float32)  # 600 bytes: more than SLACK times smaller than 4096, larger than 256
    assert not any(_base(far) is _base(x) for x in (a1, b1, c))
    assert pool.allocated_bytes == 2 * size_class(4000) + size_class(0) + size_class(600)
    assert SLACK * 600 < size_class(4000)


@pytest.mark.parametrize("nbytes", [1, 256, 257, 1000, 4096, 4097, 5000, 10**6, 3 * 2**20 + 1])
def test_size_class_bounds(nbytes):
    size = size_class(nbytes)
    assert size >= nbytes and (size <= 256 or size < 1.25 * nbytes + 1)
    assert size_class(size) == size
