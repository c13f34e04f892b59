"""Return kinds through real jobs made of core's own ops (no op package needed)."""
import asyncio
from typing import Dict, List, Tuple

import numpy as np
import pytest

from flowjob_core import JobDefinitionError, JobReturnError, apply
from flowjob_typing import Bundle, Callback, Future, ListListNumpy, ListNumpy, LocalBlob, Numpy

X = np.arange(4, dtype=np.float32).reshape(2, 2)
P = Numpy.Placeholder((2, 2))


def twice(x):
    return apply("scalar_mul", [x], {"scalar": 2.0})


def test_sync_structures(define):
    def job(x: P) -> Tuple[Numpy, Dict[str, List[ListNumpy]], ListListNumpy]:
        return x, {"k": [twice(x)]}, x

    a, d, lists = define(job)(X)
    np.testing.assert_array_equal(a, X)
    np.testing.assert_array_equal(d["k"][0][0], 2 * X)
    np.testing.assert_array_equal(lists[0][0], X)


def test_none_callback_future_and_legacy(define, session):
    def none(x: P) -> None:
        twice(x)

    def callback(x: P) -> Callback[Numpy]:
        return twice(x)

    def awaitable(x: P) -> Future[Bundle[Numpy]]:
        return {"x": [x]}

    def legacy(x: P):
        return twice(x), x

    assert define(none)(X) is None
    got = []
    define(callback)(X)(got.append)
    session.sync()
    np.testing.assert_array_equal(got[0], 2 * X)

    async def main():
        return await define(awaitable)(X)

    np.testing.assert_array_equal(asyncio.run(main())["x"][0], X)
    doubled, same = define(legacy)(X).get()
    assert isinstance(doubled, LocalBlob) and doubled.sum() == 2 * X.sum()


def test_trace_time_errors_name_the_position(define):
    def job(x: P) -> Dict[str, Tuple[Numpy, Numpy]]:
        return {"a": (x, [x])}

    with pytest.raises(JobReturnError, match=r"global function 'job', return value\['a'\]\[1\]: expected a blob "
                                             r"\(tp.Numpy\), found list"):
        define(job)(X)


def test_decoration_errors(define):
    def job(x: P) -> Tuple[Numpy, str]:
        return x

    with pytest.raises(JobDefinitionError, match=r"the item at \[1\] is str"):
        define(job)
