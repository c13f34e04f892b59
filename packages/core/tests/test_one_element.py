"""Arrays of shape (1,) delivered as legacy's full reductions were, convertible as numpy 1 allowed."""
import numpy as np

from flowjob_core.runtime.one_element import OneElementArray, one_element


def test_one_element_arrays_take_float_int_and_format_as_numpy_1_did():
    value = one_element(np.array([2.5], np.float32))
    assert type(value) is OneElementArray and value.shape == (1,) and value[0] == 2.5
    assert float(value) == 2.5 and int(value) == 2 and complex(value) == 2.5 and f"{value:.2f}" == "2.50"
    assert str(value) == "[2.5]" and value.item() == 2.5
    for other in (np.array(2.5), np.ones((2,)), np.ones((1, 1))):
        assert type(one_element(other)) is np.ndarray  # only (1,) arrays change class


def test_an_eager_tensor_of_one_element_converts_with_float():
    from flowjob_core.imperative.tensor import Tensor

    assert float(Tensor(np.array([1.5], np.float32)).numpy()) == 1.5
