"""Return kinds: sync values, structures, local blobs and the legacy future, callbacks, asyncio futures."""
import asyncio
import threading
from typing import Any, Dict, List, Tuple

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core import JobDefinitionError, JobReturnError
from flowjob_typing import AsyncResult, FutureResult, LocalBlob


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


X = np.array([[-1.0, 2.0], [3.0, -4.0]], np.float32)
RELU = np.maximum(X, 0)
P = tp.Numpy.Placeholder((2, 2))


def test_none_returns_none_at_once():
    gate = threading.Event()
    ran = []

    def handler(y: tp.Numpy):
        gate.wait(10)
        ran.append(y)

    @flow.global_function()
    def job(x: P) -> None:
        flow.watch(x, handler)

    assert job(X) is None
    assert ran == []  # returned before its handler could run
    gate.set()
    flow.sync_default_session()
    np.testing.assert_array_equal(ran[0], X)


def test_none_annotation_rejects_a_returned_blob():
    @flow.global_function()
    def job(x: P) -> None:
        return x

    with pytest.raises(JobReturnError, match=r"global function 'job', return value: annotated -> None but the body "
                                             r"returns blob 'Input_\d+/out'"):
        job(X)


@pytest.mark.parametrize("annotation, expect", [
    (tp.Numpy, lambda out: np.testing.assert_array_equal(out, RELU)),
    (tp.ListNumpy, lambda out: (len(out) == 1 and np.testing.assert_array_equal(out[0], RELU)) or None),
    (tp.ListListNumpy, lambda out: np.testing.assert_array_equal(out[0][0], RELU)),
])
def test_leaf_kinds(annotation, expect):
    def body(x: P):
        return flow.nn.relu(x)
    body.__annotations__["return"] = annotation
    out = flow.global_function()(body)(X)
    expect(out)
    if annotation is not tp.Numpy:
        assert isinstance(out, list)


def test_nested_structures_keep_keys_and_order():
    @flow.global_function()
    def job(x: P) -> Tuple[Dict[str, Dict[int, tp.Numpy]], List[tp.ListNumpy], Tuple[tp.Numpy, ...]]:
        y = flow.nn.relu(x)
        return {"b": {2: y}, "a": {1: x}}, [x, y], (y, x, y)

    d, lst, tup = job(X)
    assert list(d) == ["b", "a"] and list(d["b"]) == [2]
    np.testing.assert_array_equal(d["a"][1], X)
    assert len(lst) == 2 and isinstance(lst[1], list)
    np.testing.assert_array_equal(lst[1][0], RELU)
    assert len(tup) == 3
    np.testing.assert_array_equal(tup[1], X)


def test_tp_dict_is_typing_dict():
    assert tp.Dict is Dict

    @flow.global_function()
    def job(x: P) -> tp.Dict[str, tp.Numpy]:
        return {"x": x}

    np.testing.assert_array_equal(job(X)["x"], X)


def test_results_are_fresh_arrays_per_call():
    @flow.global_function()
    def job(x: P) -> tp.Numpy:
        return flow.nn.relu(x)

    first = job(X)
    second = job(-X)
    np.testing.assert_array_equal(first, RELU)  # not overwritten by the next step
    assert first is not second


def test_dict_key_type_is_checked_exactly():
    @flow.global_function()
    def job(x: P) -> Dict[int, tp.Numpy]:
        return {True: x}  # a bool is an int subclass, but legacy checked type(key) is K

    with pytest.raises(JobReturnError, match=r"return value: key True has type bool, the annotation says int"):
        job(X)


@pytest.mark.parametrize("annotation, returned, message", [
    (Tuple[tp.Numpy, tp.Numpy], "(x,)", r"return value: expected a tuple of 2, found one of 1"),
    (Tuple[tp.Numpy, tp.Numpy], "[x, x]", r"return value: expected a tuple, found list"),
    (List[tp.Numpy], "[x, 3]", r"return value\[1\]: expected a blob \(tp.Numpy\), found int 3"),
    (Dict[str, Tuple[tp.Numpy]], "{'a': x}", r"return value\['a'\]: expected a tuple, found blob"),
    (tp.Numpy, "None", r"return value: expected a blob \(tp.Numpy\), found NoneType"),
])
def test_trace_time_mismatch_names_function_position_expected_and_found(annotation, returned, message):
    def body(x: P):
        return eval(returned)
    body.__annotations__["return"] = annotation
    job = flow.global_function()(body)
    with pytest.raises(JobReturnError, match=r"global function 'body', " + message + r".*\[return annotation: "):
        job(X)


@pytest.mark.parametrize("annotation, message", [
    ("Tuple[tp.Numpy, int]", r"Tuple\[tp.Numpy, int\]: the item at \[1\] is int"),
    ("Dict[str, float]", r"Dict\[str, float\]: the item at \[<value>\] is float"),
    ("tp.Callback", r"tp.Callback needs its type"),
    ("tp.Bundle[Tuple[tp.Numpy]]", r"tp.Bundle takes tp.Numpy, tp.ListNumpy or tp.ListListNumpy"),
    ("tp.Callback[int]", r"tp.Callback\[int\]: the item at \[T\] is int"),
    ("int", r"global function 'job': invalid return annotation"),
])
def test_bad_return_annotations_fail_at_decoration(annotation, message):
    with pytest.raises(JobDefinitionError, match=message):
        exec(f"@flow.global_function()\ndef job(x: P) -> {annotation}:\n    return x",
             {"flow": flow, "tp": tp, "P": P, "Tuple": Tuple, "Dict": Dict})


def test_bundle_any_nesting_any_key_type():
    @flow.global_function()
    def job(x: P) -> tp.Bundle[tp.Numpy]:
        return (x, (x,), [x, x, x], {"x": {256: x}})

    a, (b,), c, d = job(X)
    assert len(c) == 3 and isinstance(c, list)
    np.testing.assert_array_equal(d["x"][256], X)

    @flow.global_function()
    def listed(x: P) -> tp.Bundle[tp.ListNumpy]:
        return {"y": x}

    assert isinstance(listed(X)["y"], list)


# legacy future (no annotation) -------------------------------------------------------
def test_future_get_gives_local_blobs_with_numpy_forwarding():
    @flow.global_function()
    def job(x: P):
        return flow.nn.relu(x)

    future = job(X)
    assert isinstance(future, FutureResult)
    blob = future.get()
    assert isinstance(blob, LocalBlob)
    np.testing.assert_array_equal(blob.ndarray(), RELU)
    np.testing.assert_array_equal(blob.numpy(), RELU)
    assert [a.tolist() for a in blob.numpy_list()] == [RELU.tolist()]
    assert blob.parallel_num() == 1
    assert blob.mean() == pytest.approx(RELU.mean())  # job(x).get().mean()
    assert blob.shape == (2, 2) and blob.dtype == np.float32
    np.testing.assert_array_equal(blob + 1, RELU + 1)
    np.testing.assert_array_equal(np.asarray(blob), RELU)
    assert f"{job(X).get().max():.1f}" == "3.0"


def test_future_structure_is_preserved():
    @flow.global_function()
    def job(x: P):
        return {"pair": (x, [x])}

    got = job(X).get()
    assert isinstance(got["pair"], tuple) and isinstance(got["pair"][1], list)
    np.testing.assert_array_equal(got["pair"][1][0].numpy(), X)


def test_future_of_a_body_without_return():
    @flow.global_function()
    def job(x: P):
        flow.nn.relu(x)

    assert job(X).get() is None


def test_future_get_or_async_get_once():
    @flow.global_function()
    def job(x: P):
        return x

    future = job(X)
    future.get()
    with pytest.raises(RuntimeError, match=r"already delivered; get\(\) or async_get\(\) may be used once"):
        future.get()
    got = []
    second = job(X)
    second.async_get(got.append)
    with pytest.raises(RuntimeError, match="already delivered"):
        second.get()
    flow.sync_default_session()
    np.testing.assert_array_equal(got[0].ndarray(), X)


# callbacks -------------------------------------------------------------------------------
def test_callback_of_tuple_and_of_dict():
    @flow.global_function()
    def job(x: P) -> tp.Callback[Tuple[tp.Numpy, Dict[str, tp.ListNumpy]]]:
        return x, {"relu": flow.nn.relu(x)}

    got = []
    register = job(X)
    assert callable(register)
    assert register(got.append) is None
    flow.sync_default_session()
    (x, d), = got
    np.testing.assert_array_equal(x, X)
    np.testing.assert_array_equal(d["relu"][0], RELU)


def test_callback_needs_a_callable():
    @flow.global_function()
    def job(x: P) -> tp.Callback[tp.Numpy]:
        return x

    with pytest.raises(TypeError, match="call the result with a callable"):
        job(X)(3)


@pytest.mark.parametrize("inner", [tp.Numpy, tp.ListNumpy, tp.ListListNumpy, List[tp.Numpy], tp.Bundle[tp.Numpy]])
def test_callback_accepts_any_value_annotation(inner):
    def body(x: P):
        return [x] if inner in (List[tp.Numpy], tp.Bundle[tp.Numpy]) else x
    body.__annotations__["return"] = tp.Callback[inner]
    got = []
    flow.global_function()(body)(X)(got.append)
    flow.sync_default_session()
    assert len(got) == 1


# asyncio --------------------------------------------------------------------------------
def test_future_annotation_is_awaitable():
    @flow.global_function()
    def job(x: P) -> tp.Future[Tuple[tp.Numpy, tp.Numpy]]:
        return x, flow.nn.relu(x)

    async def main():
        results = [job(X * k) for k in range(1, 4)]
        assert all(isinstance(r, AsyncResult) for r in results)
        return [await r for r in results]

    outs = asyncio.run(main())
    for k, (x, y) in enumerate(outs, 1):
        np.testing.assert_array_equal(x, X * k)
        np.testing.assert_array_equal(y, np.maximum(X * k, 0))


def test_future_result_also_works_without_a_loop():
    @flow.global_function()
    def job(x: P) -> tp.Future[tp.Numpy]:
        return x

    np.testing.assert_array_equal(job(X).result(), X)


def test_await_is_a_synchronous_point_and_the_session_goes_on():
    calls: list[Any] = []

    def bad(y: tp.Numpy):
        calls.append(1)
        if len(calls) == 1:
            raise ValueError("handler failed")

    @flow.global_function()
    def job(x: P) -> tp.Future[tp.Numpy]:
        flow.watch(x, bad)
        return x

    async def main():
        return await job(X)

    with pytest.raises(ValueError, match="handler failed"):
        asyncio.run(main())
    np.testing.assert_array_equal(asyncio.run(main()), X)  # raised once; later calls work
    assert calls == [1, 1]
