"""flow.categorical_ordinal_encode and flow.layers.categorical_ordinal_encoder (legacy v0.4's hash table)
against legacy's documented example."""
from __future__ import annotations


import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core import FlowjobError
from flowjob_core.testing.modules import sibling

RNG = np.random.default_rng(5)

_helpers = sibling(__file__, "op_surface_helpers")
fresh_session, value = _helpers.fresh_session, _helpers.value


def test_categorical_ordinal_encode_legacy_example():
    x = np.array([[7, 0, 2], [1, 7, 2], [0, 1, 7]], np.int32)

    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((3, 3), dtype=flow.int32)) -> tp.Numpy:
        with flow.scope.namespace("categorical_ordinal_encode"):
            table = flow.get_variable(name="Table", shape=(16,), dtype=flow.int32,
                                      initializer=flow.constant_initializer(0, dtype=flow.int32), trainable=False)
            size = flow.get_variable(name="Size", shape=(1,), dtype=flow.int32,
                                     initializer=flow.constant_initializer(0, dtype=flow.int32), trainable=False)
            return flow.categorical_ordinal_encode(table=table, size=size, input_tensor=x, name="Encode")

    np.testing.assert_array_equal(job(x), [[1, 0, 2], [3, 1, 2], [0, 3, 1]])


def test_categorical_ordinal_encoder_keeps_its_table_across_steps():
    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((4,), dtype=flow.int64)) -> tp.Numpy:
        return flow.layers.categorical_ordinal_encoder(x, capacity=4)

    np.testing.assert_array_equal(job(np.array([9, 5, 9, 13], np.int64)), [1, 2, 1, 3])
    # 5 and 13 probe past the slots 9 (9 % 4 = 1) took; the ordinals stay, new values continue the count
    np.testing.assert_array_equal(job(np.array([13, 4, 5, 9], np.int64)), [3, 4, 2, 1])
    assert value("CategoricalOrdinalEncoder-Size").tolist() == [4]
    table = value("CategoricalOrdinalEncoder-Table").reshape(4, 2)
    assert sorted(map(tuple, table.tolist())) == [(4, 4), (5, 2), (9, 1), (13, 3)]
    with pytest.raises(FlowjobError, match=r"CategoricalOrdinalEncoder-Encode.*the table is full \(4 keys\)"):
        job(np.array([21, 0, 0, 0], np.int64))
    # the session stays usable: known values still encode
    np.testing.assert_array_equal(job(np.array([4, 5, 9, 13], np.int64)), [4, 2, 1, 3])


def test_categorical_ordinal_encode_refuses_hash_precomputed_false():
    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((2,), dtype=flow.int32)) -> tp.Numpy:
        return flow.layers.categorical_ordinal_encoder(x, 4, hash_precomputed=False)

    with pytest.raises(FlowjobError, match="hash_precomputed must be True"):
        job(np.zeros(2, np.int32))
