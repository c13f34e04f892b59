"""Public functions that only restate an op take their docstring's first line from the op's record, so
what an op computes is written once, in the record."""
from __future__ import annotations

import pathlib

import pytest

from flowjob_ops.api import activations, comparisons, math, reduce
from flowjob_ops.api._common import restated
import flowjob_ops.records as records
from flowjob_ops.records import catalog

# (public function, the op it restates): the functions built by the api's restating factories
RESTATING = [(getattr(math, name), name) for name in (
    "negative", "square", "sqrt", "exp", "log", "abs", "reciprocal", "sign", "sigmoid", "tanh", "gelu", "sin",
    "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "erf", "erfc", "lgamma",
    "rint", "round", "floor", "ceil", "rsqrt", "softplus", "log1p", "expm1", "reciprocal_no_nan", "log_sigmoid",
    "relu", "logical_and", "logical_or", "logical_xor")]
RESTATING += [(math.sigmoid_v2, "sigmoid"), (math.tanh_v2, "tanh")]
RESTATING += [(getattr(activations, name), name) for name in (
    "relu", "sigmoid", "tanh", "gelu", "relu6", "hardsigmoid", "hardswish", "mish")]
RESTATING += [(getattr(comparisons, name), name) for name in comparisons.__all__]
RESTATING += [(getattr(reduce, name), name) for name in (
    "reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod", "reduce_any", "reduce_all",
    "reduce_logsumexp")]


@pytest.mark.parametrize("fn, op", RESTATING, ids=[f"{fn.__name__}" for fn, _ in RESTATING])
def test_the_first_line_is_the_records_doc(fn: object, op: str) -> None:
    doc = catalog.record(op).doc
    first = (fn.__doc__ or "").splitlines()[0]
    assert doc, f"op {op} has no doc"
    assert first.lower().startswith(doc.lower())
    assert first == restated(op, first[len(doc):])


def test_a_formula_keeps_its_case_and_a_sentence_is_capitalized() -> None:
    assert math.sin.__doc__.startswith("sin(x), elementwise.")
    assert math.sqrt.__doc__.startswith("The square root of x, elementwise.")


def test_a_unary_function_names_its_default_node_name_and_module() -> None:
    assert "default ``Relu_<n>``" in activations.relu.__doc__
    assert activations.relu.__module__ == "flowjob_ops.api.activations"
    assert math.relu.__module__ == "flowjob_ops.api.math"


def test_an_unknown_op_is_named() -> None:
    with pytest.raises(KeyError, match="no op 'no_such_op'"):
        restated("no_such_op")


def test_every_record_module_is_in_the_catalog() -> None:
    files = {p.stem for p in pathlib.Path(records.__file__).parent.glob("*.py")} - {"__init__", "common", "catalog"}
    assert files == {m.__name__.rsplit(".", 1)[1] for m in catalog.RECORD_MODULES}
