# no "from __future__ import annotations": the signatures below use local names
"""A plan's step as data (StepProgram) and its split into pieces at the live nodes, for backends that record steps."""
import numpy as np
import pytest

from flowjob_core import Effects, JobFunction, Kernel, OpDef, Session, apply, hookimpl, make_plugin_manager
from flowjob_core.plan.pieces import failing_node, split
from flowjob_core.plan.planner import StepError


def _host_kernel(ctx):
    calls = ctx.shared.setdefault("host calls", [])

    def run(x):
        calls.append(1)
        return x + len(calls)  # depends on a host counter: must run every step

    return run


def _drawing_kernel(ctx):
    ctx.rng(0)  # a random stream drawn on the host
    return lambda x: x


def _flagged_kernel(ctx):
    def run(x):
        return x

    return Kernel(run, host_state=True)


def _device_stream_kernel(ctx):
    ctx.rng(0)  # drawn, but the kernel says it keeps its state on the device

    def run(x):
        return x

    return Kernel(run, host_state=False)


class _DeviceOps:
    """A record marked host_state whose (backend's) kernel declares itself not: the kernel's word wins."""

    @hookimpl
    def flowjob_add_ops(self, registry):
        same = lambda inputs, attrs: [inputs[0]]  # noqa: E731
        registry.add(OpDef("toy_device_stream", same, kernel=_device_stream_kernel, not_differentiable=True,
                           effects=Effects(host_state=True)))
        registry.add(OpDef("toy_ordered", same, kernel=_device_stream_kernel, not_differentiable=True,
                           effects=Effects(ordered=True)))
        registry.add(OpDef("toy_ordered_host", same, kernel=lambda ctx: lambda x: x, not_differentiable=True,
                           effects=Effects(ordered=True)))


class _HostOps:
    @hookimpl
    def flowjob_add_ops(self, registry):
        same = lambda inputs, attrs: [inputs[0]]  # noqa: E731
        registry.add(OpDef("toy_host", same, kernel=_host_kernel, not_differentiable=True,
                           effects=Effects(host_state=True)))
        registry.add(OpDef("toy_draw", same, kernel=_drawing_kernel, not_differentiable=True))
        registry.add(OpDef("toy_flagged", same, kernel=_flagged_kernel, not_differentiable=True))


@pytest.fixture
def host_session(toy):
    s = Session(make_plugin_manager(plugins=[toy, _HostOps()], autoload=False))
    yield s
    s.close()


def _plan(session, toy, body, shape=(4,)):
    def job(x: toy.Array(shape)) -> toy.Sync:
        return body(x)

    fn = JobFunction(job, "predict", None, session)
    fn(np.ones(shape, np.float32))  # the first call checks the kernels' outputs
    return fn, fn.plan()


def _run(pieces, program, feeds):
    env = dict(zip(program.feeds, feeds))
    for piece in pieces:
        piece.run(env)
    return [env[v] for v in program.returns]


def test_the_program_lists_the_steps_calls_in_order_with_what_it_is_fed_and_returns(session, toy):
    fn, plan = _plan(session, toy, lambda x: apply("toy_add", [apply("twice", [x]), x]))
    program = plan.program
    # the return node copies the result out of the step: device work, not live
    assert [call.node.op for call in program.calls] == ["twice", "toy_add", "return"]
    assert len(program.feeds) == 1 and len(program.returns) == 1
    twice, add, ret = program.calls
    assert twice.inputs == program.feeds and add.inputs == (twice.outputs[0], program.feeds[0])
    assert ret.inputs == add.outputs and ret.outputs == program.returns
    assert not any(call.live for call in program.calls)
    assert add.statement() == f"{add.outputs[0]} = {add.kernel}({', '.join(add.inputs)})"


def test_without_live_calls_the_step_is_one_piece_giving_the_steps_results(session, toy):
    fn, plan = _plan(session, toy, lambda x: apply("twice", [apply("twice", [x])]))
    (piece,) = split(plan.program)
    assert not piece.live and piece.reads == plan.program.feeds and piece.writes == plan.program.returns
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(_run([piece], plan.program, [x]), [x * 4])


def test_live_calls_cut_the_step_and_only_values_read_later_pass_between_pieces(session, toy):
    def body(x):
        a = apply("twice", [x])
        b = apply("twice", [a])  # read only inside its piece
        c = apply("twice", [b])
        d = apply("toy_add", [c, a])  # a crosses two cuts
        return apply("twice", [d])

    fn, plan = _plan(session, toy, body)
    program = plan.program
    pieces = split(program, {2, 3})  # c and d's calls run live
    assert [p.live for p in pieces] == [False, True, False]
    first, live, last = pieces
    a, b, c, d = (call.outputs[0] for call in program.calls[:4])
    assert first.writes == tuple(sorted((a, b))) and b not in first.reads
    assert live.reads == (b, a) and live.writes == (d,)
    assert last.reads == (d,) and last.writes == program.returns
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(_run(pieces, program, [x]), [(8 * x + 2 * x) * 2])


def test_host_state_ops_random_streams_and_flagged_kernels_are_live(host_session, toy):
    def body(x):
        return apply("toy_flagged", [apply("toy_draw", [apply("twice", [apply("toy_host", [x])])])])

    fn, plan = _plan(host_session, toy, body)
    assert [(c.node.op, c.live) for c in plan.program.calls] == [
        ("toy_host", True), ("twice", False), ("toy_draw", True), ("toy_flagged", True), ("return", False)]
    pieces = split(plan.program)
    assert [p.live for p in pieces] == [True, False, True, False]
    x = np.zeros(4, np.float32)
    (out,) = _run(pieces, plan.program, [x])
    np.testing.assert_array_equal(out, np.full(4, 4.0))  # the host counter saw the step's first call and this one


def test_a_kernel_declaring_host_state_false_is_recorded_even_ordered_and_other_ordered_nodes_stay_live(toy):
    # an ordered node declaring it keeps to the device is a collective on a device stream (NCCL's): a recording
    # keeps it in the step's order, so it is recorded; without the declaration it works on the host (MPI)
    s = Session(make_plugin_manager(plugins=[toy, _DeviceOps()], autoload=False))
    try:
        fn, plan = _plan(s, toy, lambda x: apply("toy_ordered_host", [apply("toy_ordered", [
            apply("toy_device_stream", [x])])]))
        assert [(c.node.op, c.live) for c in plan.program.calls] == [
            ("toy_device_stream", False), ("toy_ordered", False), ("toy_ordered_host", True), ("return", False)]
    finally:
        s.close()


def test_a_kernel_failing_inside_a_piece_is_named(session, toy):
    fn, plan = _plan(session, toy, lambda x: apply("twice", [x]))
    program = plan.program
    (piece,) = split(program)
    boom = ValueError("boom")

    def failing(*args):
        raise boom

    program.namespace[program.calls[0].kernel] = failing
    with pytest.raises(ValueError) as caught:
        piece.run({program.feeds[0]: np.ones(4, np.float32)})
    assert failing_node(program, caught.value) is program.calls[0].node
    error = plan._step_error(caught.value)
    assert isinstance(error, StepError)
    assert f"op {program.calls[0].node.name!r} (twice)" in str(error)
    assert failing_node(program, ValueError("elsewhere")) is None
