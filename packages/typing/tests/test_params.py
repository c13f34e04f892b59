"""Parameter kinds on their own: feeding checks and copies, per-device lists."""
from typing import Tuple

import numpy as np
import pytest

from flowjob_core import JobArgumentError
from flowjob_core.plan.mirrored import PerDevice
from flowjob_typing import ListListNumpy, ListNumpy, Numpy
from flowjob_typing.params import ArrayParam, ListParam, TupleParam, match_param


def test_array_param_copies():
    param = match_param(Numpy.Placeholder((2,)))
    assert isinstance(param, ArrayParam)
    data = np.ones(2, np.float32)
    (fed,) = param.feed(data, "x")
    data[:] = 0
    assert fed.tolist() == [1, 1] and fed.flags.c_contiguous


def test_list_params_feed_per_device():
    param = match_param(ListNumpy.Placeholder((2,)))
    assert isinstance(param, ListParam)
    (fed,) = param.feed([np.ones(2, np.float32), np.zeros(2, np.float32)], "x")
    assert type(fed) is PerDevice and len(fed) == 2
    nested = match_param(ListListNumpy.Placeholder((2,)))
    (fed,) = nested.feed([[np.ones(2, np.float32)]], "x")
    assert type(fed) is PerDevice and fed[0].tolist() == [1, 1]
    with pytest.raises(JobArgumentError, match=r"x: expected a list with one ndarray per device, found list of "
                                               r"length 0"):
        param.feed([], "x")


def test_tuple_param_and_unknown_annotations():
    param = match_param(Tuple[Numpy.Placeholder((1,)), ListNumpy.Placeholder((1,))])
    assert isinstance(param, TupleParam) and len(param.input_specs()) == 2
    assert match_param(Tuple[Numpy.Placeholder((1,)), int]) is None
    assert match_param(int) is None and match_param(Tuple[()]) is None
