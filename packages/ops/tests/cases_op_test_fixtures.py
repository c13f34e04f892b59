"""Op cases of the test ops legacy compiled into its library (``flowjob_ops.records.op_test_fixtures``), with
numpy references of what legacy's kernels wrote. op_cases.py appends ``CASES`` to its table.

``test_multi_input``'s gradient op gives 1 and 2 whatever the function, as legacy's did, so its gradient is
checked in test_op_test_fixtures.py, not against central differences.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

from flowjob_core.testing import OpCase
from flowjob_core.testing import strategies as fst

Draw = Any
Case = tuple[list[np.ndarray], dict]
DTYPES = [np.float32, np.float64, np.int8, np.int32, np.int64, np.uint8]


def _shape(draw: Draw, min_dims: int = 1) -> tuple[int, ...]:
    return tuple(draw(fst.small_shapes(min_dims, 3, 4)))


def _array(draw: Draw, shape: tuple[int, ...]) -> np.ndarray:
    return draw(fst.arrays(shape, st.floats(-3.0, 3.0, allow_subnormal=False)))


def _away_from_zero(draw: Draw) -> np.ndarray:
    return draw(fst.array_away_from(_shape(draw), (0.0,), 0.1, -3.0, 3.0))


def no_input_case(draw: Draw) -> Case:
    return draw(st.just(([], {})))  # a source op: nothing to draw


def mt19937_uniform(seed: int, size: int) -> np.ndarray:
    """libstdc++'s uniform_real_distribution<float>(0, nextafter(1)) over std::mt19937(seed), the first draws."""
    raw = np.random.RandomState(seed).randint(0, 2 ** 32, size=size, dtype=np.uint32)
    canonical = np.minimum(raw.astype(np.float32) / np.float32(2 ** 32), np.nextafter(np.float32(1), np.float32(0)))
    return canonical * np.nextafter(np.float32(1), np.float32(2))


def random_source_case(draw: Draw) -> Case:
    return [], {"seed": draw(st.integers(0, 2 ** 31))}


def fixed_out_num_case(draw: Draw) -> Case:
    return [], {"out_num": draw(st.integers(0, 9))}


def reshape_case(draw: Draw) -> Case:
    shape = _shape(draw)
    return [_array(draw, shape)], {"shape": tuple(draw(st.permutations(shape)))}


def one_input_case(draw: Draw) -> Case:
    return [_array(draw, _shape(draw))], {}


def multi_output_ref(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return x, np.zeros(x.shape[:-1] + (2 * x.shape[-1],), x.dtype)


def two_inputs_case(draw: Draw) -> Case:
    shape = _shape(draw, 0)
    return [_array(draw, shape), _array(draw, shape)], {}


def multi_input_grad_case(draw: Draw) -> Case:
    shape = _shape(draw, 0)
    return [_array(draw, shape), _array(draw, shape), _array(draw, shape)], {}


def data_type_case(draw: Draw) -> Case:
    x = np.round(np.abs(_array(draw, _shape(draw))))  # small whole numbers >= 0: every dtype holds them
    return [x], {"output_type": np.dtype(draw(st.sampled_from(DTYPES)))}


def list_attr_case(draw: Draw) -> Case:
    count = draw(st.integers(1, 3))
    shapes = tuple(_shape(draw) for _ in range(count))
    types = tuple(np.dtype(draw(st.sampled_from(DTYPES))) for _ in range(count))
    return [_array(draw, (2, 2))], {"out_shapes": shapes, "out_types": types, "string_list": ("a", "b")}


def list_attr_ref(x: np.ndarray, out_shapes: Any, out_types: Any, string_list: Any) -> tuple[np.ndarray, ...]:
    return tuple(np.zeros(shape, dtype) for shape, dtype in zip(out_shapes, out_types))


def auto_type_case(draw: Draw) -> Case:
    return [_array(draw, _shape(draw))], {"int1": draw(st.integers(-5, 5)), "int2": draw(st.integers(-5, 5))}


def relu_case(draw: Draw) -> Case:
    return [_away_from_zero(draw)], {}


def relu_grad_case(draw: Draw) -> Case:
    y = np.maximum(_away_from_zero(draw), 0.0)
    return [y, _array(draw, y.shape)], {}


CASES = [
    OpCase("test_source", no_input_case, reference=lambda: np.arange(5, dtype=np.float32), wrt=()),
    OpCase("test_dynamic_source", no_input_case, reference=lambda: np.arange(3, dtype=np.float32), wrt=()),
    OpCase("test_source_multi_gpu_fixed_out_num", fixed_out_num_case,
           reference=lambda out_num: np.arange(out_num, dtype=np.float32), wrt=()),
    OpCase("test_random_source", random_source_case, reference=lambda seed: mt19937_uniform(seed, 5), wrt=()),
    OpCase("test_reshape", reshape_case, reference=lambda x, shape: x.reshape(shape), wrt=()),
    OpCase("test_multi_output_order", one_input_case, reference=multi_output_ref, wrt=()),
    OpCase("test_multi_input", two_inputs_case, reference=lambda x1, x2: x1, wrt=()),
    OpCase("test_multi_input_grad", multi_input_grad_case,
           reference=lambda x1, x2, dy: (np.ones_like(x1), np.full_like(x2, 2)), wrt=()),
    OpCase("test_data_type_attr", data_type_case, reference=lambda x, output_type: x.astype(output_type), wrt=()),
    OpCase("test_list_data_type_and_list_shape_and_list_string_attr", list_attr_case, reference=list_attr_ref,
           wrt=()),
    OpCase("test_user_op_attr_auto_type", auto_type_case, reference=lambda x, int1, int2: x, wrt=()),
    OpCase("ccrelu", relu_case, reference=lambda x: np.maximum(x, 0)),
    OpCase("ccrelu_grad", relu_grad_case, reference=lambda y, dy: np.where(y > 0, dy, 0), wrt=()),
    OpCase("cpu_only_relu_test", relu_case, reference=lambda x: np.maximum(x, 0), wrt=()),
]
