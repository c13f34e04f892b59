"""Errors of asynchronous calls surface, name their call, and never pass silently: the next synchronous
call raises a kept error instead of running, and one left at interpreter exit makes the exit status 1."""
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core import JobArgumentError, get_default_session
from flowjob_core.plan.numerics import NumericsError


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


def define_jobs(config=None):
    @flow.global_function(function_config=config)
    def later(x: tp.Numpy.Placeholder((2,))) -> tp.Callback[tp.Numpy]:
        return flow.math.sqrt(x)

    @flow.global_function(type="train")
    def step(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        v = flow.get_variable("v", shape=(2,), initializer=flow.constant_initializer(1.0))
        loss = flow.math.reduce_sum(v * x)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [1.0]), momentum=0).minimize(loss)
        return loss

    return later, step


def _v() -> np.ndarray:
    flow.sync_default_session()
    return get_default_session().variables.get("v").copy()


def test_a_failed_callback_is_raised_by_the_next_synchronous_call_which_does_not_run():
    later, step = define_jobs()
    ones = np.ones(2, np.float32)

    def broken(_):
        raise KeyError("lost label")

    later(ones)(broken)
    with pytest.raises(KeyError, match="lost label") as excinfo:
        step(ones)
    notes = excinfo.value.__notes__
    assert "flowjob: raised by a callback of call #1 of global function 'later'" in notes
    assert "flowjob: raised at call #2 of global function 'step', which therefore did not run" in notes
    np.testing.assert_array_equal(_v(), [1.0, 1.0])  # step's update never happened
    step(ones)  # the error was delivered once; the session goes on
    np.testing.assert_array_equal(_v(), [0.0, 0.0])


@pytest.mark.filterwarnings("ignore:invalid value encountered")  # sqrt(-1) on the worker thread, as numpy warns
def test_a_failed_asynchronous_step_is_raised_before_the_next_synchronous_call():
    cfg = flow.function_config()
    cfg.enable_numerics_check(True)
    later, step = define_jobs(cfg)
    seen = []
    later(np.array([-1.0, 4.0], np.float32))(seen.append)  # NaN: the step fails, nobody waits
    with pytest.raises(NumericsError, match="job 'later'") as excinfo:
        step(np.ones(2, np.float32))
    assert "flowjob: call #1 of global function 'later' failed" in excinfo.value.__notes__
    assert any("call #2 of global function 'step', which therefore did not run" in n for n in excinfo.value.__notes__)
    assert seen == []  # the failed call's callback never ran
    np.testing.assert_array_equal(_v(), [1.0, 1.0])


def test_a_raising_watch_handler_names_its_call():
    def handler(_):
        raise ValueError("handler broke")

    @flow.global_function()
    def watched(x: tp.Numpy.Placeholder((2,))) -> tp.Callback[tp.Numpy]:
        flow.watch(x, handler)
        return x

    watched(np.ones(2, np.float32))(lambda _: None)
    with pytest.raises(ValueError, match="handler broke") as excinfo:
        flow.sync_default_session()
    assert "flowjob: raised by a callback or watch handler of call #1 of global function 'watched'" in (
        excinfo.value.__notes__)


def test_a_synchronous_failure_is_raised_by_its_own_call_only():
    later, step = define_jobs()
    with pytest.raises(JobArgumentError, match="global function 'step', argument 'x': expected shape"):
        step(np.ones(3, np.float32))
    assert step(np.ones(2, np.float32)) == pytest.approx(2.0)  # nothing was kept for later


def _run(program: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(program)], capture_output=True, text=True,
                          timeout=120)


PROGRAM = """
    import numpy as np
    import oneflow as flow
    import oneflow.typing as tp

    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((2,))) -> tp.Callback[tp.Numpy]:
        return x

    def callback(y):
        {body}

    job(np.zeros(2, np.float32))(callback)
    print("end of program", flush=True)
"""


def test_an_error_left_at_exit_makes_the_exit_status_one():
    result = _run(PROGRAM.format(body='raise RuntimeError("late failure")'))
    assert result.returncode == 1
    assert "end of program" in result.stdout
    assert "RuntimeError: late failure" in result.stderr
    assert "raised by a callback of call #1 of global function 'job'" in result.stderr


def test_a_clean_exit_keeps_status_zero():
    result = _run(PROGRAM.format(body='print("callback ran", flush=True)'))
    assert result.returncode == 0, result.stderr
    # the callback runs on the worker thread: print's text and its newline may interleave with the main one's
    assert result.stdout.count("callback ran") == 1 and result.stdout.count("end of program") == 1
