"""The annotation vocabulary: placeholders, generics and their readable names."""
import typing
from typing import Any, Dict, List, Tuple

import numpy as np
import pytest

from flowjob_core import JobDefinitionError
from flowjob_core.ir import naming
from flowjob_typing import (
    Bundle, Callback, FixedTensorDef, Future, ListListNumpy, ListNumpy, MirroredTensorDef, Numpy, fixed_tensor_def,
    mirrored_tensor_def)
from flowjob_typing.annotations import describe


def test_placeholder_normalizes_and_validates():
    p = Numpy.Placeholder((2, np.int64(3)), dtype="int32", batch_axis=-1)
    assert (p.shape, p.dtype, p.batch_axis, p.family) == ((2, 3), np.dtype("int32"), 1, Numpy)
    assert repr(p) == "tp.Numpy.Placeholder((2, 3), dtype=int32, batch_axis=1)"
    assert ListListNumpy.Placeholder((1,)).family is ListListNumpy
    with pytest.raises(JobDefinitionError, match=r"tp.ListNumpy.Placeholder: shape should be a tuple"):
        ListNumpy.Placeholder(3)
    with pytest.raises(JobDefinitionError, match=r"batch_axis True"):
        Numpy.Placeholder((3,), batch_axis=True)


def test_generics_compare_and_describe():
    assert Callback[Numpy] == Callback[Numpy] and Callback[Numpy] != Future[Numpy]
    assert hash(Bundle[Numpy]) == hash(Bundle[Numpy])
    assert describe(Callback[Tuple[Numpy, ListNumpy]]) == "tp.Callback[Tuple[tp.Numpy, tp.ListNumpy]]"
    assert describe(Dict[str, List[Numpy]]) == "Dict[str, List[tp.Numpy]]"
    assert describe(Tuple[Numpy, ...]) == "Tuple[tp.Numpy, ...]"
    assert describe(Any) == "Any" and describe(int) == "int" and describe(Future) == "tp.Future"


def test_legacy_defs_take_a_name_id_and_accept_list_shapes():
    before = naming.next_id()
    fixed = fixed_tensor_def([4, 2], batch_axis=None)
    mirrored = mirrored_tensor_def((3,))
    assert naming.next_id() == before + 3
    assert isinstance(fixed, FixedTensorDef) and fixed.shape == (4, 2) and fixed.batch_axis is None
    assert isinstance(mirrored, MirroredTensorDef) and mirrored.family is ListNumpy
    with pytest.raises(JobDefinitionError, match=r"flow.FixedTensorDef: shape should be a tuple"):
        fixed_tensor_def("x")


def test_typing_tuple_accepts_placeholders():
    p = Numpy.Placeholder((2,))
    assert typing.get_args(Tuple[p, p]) == (p, p)
