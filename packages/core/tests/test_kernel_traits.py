"""What a kernel builder returns (a bare step function, or a ``Kernel`` with traits) and the one decision those
traits take part in: whether a recorded step runs a node live (``flowjob_core.ir.kernel.runs_live``)."""
# no "from __future__ import annotations": the job signatures below use local names
import itertools

import numpy as np
import pytest

from flowjob_core import (
    Effects, FlowjobError, JobFunction, Kernel, OpDef, Session, apply, hookimpl, make_plugin_manager)
from flowjob_core.ir.kernel import kernel_of, runs_live
from flowjob_core.plan.kernel_outputs import KernelOutputError


def _same(inputs, attrs):
    return [inputs[0]]


def _identity(x):
    return x


def test_a_bare_function_is_a_kernel_without_traits_and_a_kernel_is_itself():
    plain = kernel_of(_identity)
    assert plain == Kernel(_identity) and plain.host_state is None and not plain.gated
    flagged = Kernel(_identity, host_state=False, gated=True)
    assert kernel_of(flagged) is flagged
    assert flagged(3) == 3  # calling it calls run


def test_a_kernel_around_another_keeps_its_traits_and_one_level_of_run():
    inner = Kernel(_identity, host_state=True, gated=True)
    calls = []

    def checked(*args):
        calls.append(args)
        return inner.run(*args)

    outer = inner.around(checked)
    assert outer.run is checked and outer.host_state is True and outer.gated
    assert outer(5) == 5 and calls == [(5,)]
    assert Kernel(inner, host_state=False).run is _identity  # a kernel given as run: its function


def _flagged_the_old_way(ctx):
    def run(x):
        return x

    run.host_state = False  # the attribute form of before Kernel: nothing reads it
    return run


class _OldOps:
    @hookimpl
    def flowjob_add_ops(self, registry):
        registry.add(OpDef("toy_old_flag", _same, kernel=_flagged_the_old_way, not_differentiable=True))


def test_a_trait_set_as_a_function_attribute_is_refused_naming_the_op_not_dropped(toy):
    with pytest.raises(TypeError, match=r"carries host_state=False as attributes, which are not read: return "
                                        r"flowjob_core.Kernel\(run, host_state=False\) instead"):
        kernel_of(_flagged_the_old_way(None))
    s = Session(make_plugin_manager(plugins=[toy, _OldOps()], autoload=False))
    try:
        with pytest.raises(FlowjobError, match=r"building the kernel of op 'ToyOldFlag_[0-9]+' \(toy_old_flag\).*"
                                               r"carries host_state=False"):
            _fn(s, toy, "toy_old_flag")(np.arange(3, dtype=np.float32))
    finally:
        s.close()


def test_a_kernel_refuses_a_run_that_is_not_callable():
    with pytest.raises(TypeError, match="Kernel.run must be callable, got 3"):
        Kernel(3)  # type: ignore[arg-type]


RECORD_MARKS = [Effects(), Effects(host_state=True)]
KERNEL_WORDS = [None, True, False]


@pytest.mark.parametrize("mark,word,drew_rng", list(itertools.product(RECORD_MARKS, KERNEL_WORDS, [False, True])))
def test_the_kernels_word_overrides_the_record_mark_and_the_random_stream(mark, word, drew_rng):
    op = OpDef("toy_live", _same, effects=mark)
    live = runs_live(op, Kernel(_identity, host_state=word), drew_rng)
    assert live is (word if word is not None else (mark.host_state or drew_rng))


@pytest.mark.parametrize("word", KERNEL_WORDS)
def test_cpu_only_nodes_stay_live_whatever_the_kernel_says(word):
    op = OpDef("toy_pinned", _same, effects=Effects(cpu_only=True))
    assert runs_live(op, Kernel(_identity, host_state=word), drew_rng=False) is True


@pytest.mark.parametrize("word", KERNEL_WORDS)
def test_ordered_nodes_are_live_unless_their_kernel_keeps_to_the_device(word):
    """A collective enqueued on a device stream (flowjob-mpi's NCCL boxing) is recorded in the step's order."""
    op = OpDef("toy_ordered", _same, effects=Effects(ordered=True))
    assert runs_live(op, Kernel(_identity, host_state=word), drew_rng=False) is (word is not False)


def test_an_effect_alone_is_no_host_state():
    op = OpDef("toy_effect", _same, effects=Effects(effect=True))
    assert runs_live(op, kernel_of(_identity), drew_rng=False) is False


# the planner reads the traits: liveness per call, and a gated kernel's skipped calls --------------------------
def _sits_out_first_call(ctx):
    calls = []

    def run(x):
        calls.append(1)
        return None if len(calls) == 1 else x * 2

    return Kernel(run, gated=True)


def _returns_nothing(ctx):
    return lambda x: None


class _GateOps:
    @hookimpl
    def flowjob_add_ops(self, registry):
        registry.add(OpDef("toy_gated", _same, kernel=_sits_out_first_call, not_differentiable=True))
        registry.add(OpDef("toy_ungated_none", _same, kernel=_returns_nothing, not_differentiable=True))


@pytest.fixture
def gate_session(toy):
    s = Session(make_plugin_manager(plugins=[toy, _GateOps()], autoload=False))
    yield s
    s.close()


def _fn(session, toy, op):
    def job(x: toy.Array((3,))) -> toy.Sync:
        y = apply(op, [x])
        return apply("twice", [x]) if op == "toy_gated" else y

    return JobFunction(job, "predict", None, session)


def test_a_gated_kernel_that_sits_out_a_call_is_not_taken_for_a_wrong_output(gate_session, toy):
    fn = _fn(gate_session, toy, "toy_gated")
    x = np.arange(3, dtype=np.float32)
    np.testing.assert_array_equal(fn(x), 2 * x)  # its first call returned None: no output error
    np.testing.assert_array_equal(fn(x), 2 * x)


def test_a_bare_kernel_returning_nothing_is_an_output_error_naming_the_op(gate_session, toy):
    fn = _fn(gate_session, toy, "toy_ungated_none")
    with pytest.raises(KernelOutputError, match=r"toy_ungated_none.*output 0 is a NoneType"):
        fn(np.arange(3, dtype=np.float32))
