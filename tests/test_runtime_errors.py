"""Errors raised by callbacks, handlers and steps: never lost, never fatal, raised at the next synchronous point."""
import subprocess
import sys
import textwrap
import traceback

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


P = tp.Numpy.Placeholder((2,))
X = np.array([1, -1], np.float32)


def _frames(exc):
    return [frame.name for frame in traceback.extract_tb(exc.__traceback__)]


def failing_handler(y: tp.Numpy):
    raise KeyError("from a handler")


def failing_callback(y):
    raise ZeroDivisionError("from a callback")


def _sync_job():
    @flow.global_function()
    def sync_job(x: P) -> tp.Numpy:
        return x
    return sync_job


def test_handler_error_of_a_none_call_is_raised_by_the_next_sync_call():
    @flow.global_function()
    def watched(x: P) -> None:
        flow.watch(x, failing_handler)

    sync_job = _sync_job()
    assert watched(X) is None  # not a synchronous point: no raise here
    with pytest.raises(KeyError, match="from a handler") as info:
        sync_job(X)
    assert "failing_handler" in _frames(info.value)  # the original traceback
    np.testing.assert_array_equal(sync_job(X), X)  # raised once; the session still works


def test_handler_error_of_a_sync_call_is_raised_by_that_call():
    @flow.global_function()
    def job(x: P) -> tp.Numpy:
        flow.watch(x, failing_handler)
        return x

    with pytest.raises(KeyError, match="from a handler"):
        job(X)
    flow.sync_default_session()  # nothing left over


def test_callback_error_is_raised_by_sync_default_session():
    @flow.global_function()
    def job(x: P) -> tp.Callback[tp.Numpy]:
        return x

    job(X)(failing_callback)
    with pytest.raises(ZeroDivisionError, match="from a callback") as info:
        flow.sync_default_session()
    assert "failing_callback" in _frames(info.value)
    got = []
    job(X)(got.append)
    flow.sync_default_session()
    assert len(got) == 1


def test_async_get_callback_error_is_raised_by_future_get_of_a_later_call():
    @flow.global_function()
    def job(x: P):
        return x

    job(X).async_get(failing_callback)
    with pytest.raises(ZeroDivisionError):
        job(X).get()
    assert job(X).get().numpy().tolist() == [1, -1]


def test_several_errors_raise_the_first_and_mention_the_rest():
    @flow.global_function()
    def job(x: P) -> tp.Callback[tp.Numpy]:
        return x

    for _ in range(3):
        job(X)(failing_callback)
    with pytest.raises(ZeroDivisionError) as info:
        flow.sync_default_session()
    assert any("2 more callback error(s)" in note for note in info.value.__notes__)
    flow.sync_default_session()


def test_step_failure_of_an_unclaimed_future_is_not_lost():
    @flow.global_function()
    def job(x: P):
        flow.watch(x, failing_handler)
        return x

    job(X)  # the future is dropped: nobody will call get()
    with pytest.raises(KeyError, match="from a handler"):
        flow.sync_default_session()


def test_future_get_raises_the_error_once():
    @flow.global_function()
    def job(x: P):
        flow.watch(x, failing_handler)
        return x

    future = job(X)
    with pytest.raises(KeyError):
        future.get()
    flow.sync_default_session()  # already delivered by get(): not raised again


def test_handler_error_does_not_stop_other_handlers_or_the_result():
    seen = []

    @flow.global_function()
    def job(x: P) -> tp.Callback[tp.Numpy]:
        flow.watch(x, failing_handler)
        flow.watch(x, lambda y: seen.append("second handler"))
        return x

    job(X)(lambda y: seen.append("callback"))
    with pytest.raises(KeyError):
        flow.sync_default_session()
    assert seen == ["second handler", "callback"]


def test_error_left_at_exit_is_printed_and_the_exit_status_says_so():
    result = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import numpy as np
        import oneflow as flow
        import oneflow.typing as tp

        def bad(y):
            raise RuntimeError("late failure")

        @flow.global_function()
        def job(x: tp.Numpy.Placeholder((2,))) -> tp.Callback[tp.Numpy]:
            return x

        job(np.zeros(2, np.float32))(bad)
        print("end of program", flush=True)
    """)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 1  # flowjob_core/runtime/exit_status.py: an error left at exit is not a success
    assert "end of program" in result.stdout
    assert "RuntimeError: late failure" in result.stderr and "in bad" in result.stderr
    assert "an error was raised by a job callback or handler" in result.stderr  # the flowjob.session logger
