"""The minimal distribution carries oneflow.core's messages (protobuf is a dependency of the face): a legacy
InitializerConf initializes a variable, and BERT's op_conf_pb2 / data_type_pb2 imports work."""
import numpy as np

import oneflow as flow
import oneflow.core.common.data_type_pb2 as data_type_util
import oneflow.core.job.initializer_conf_pb2 as initializer_conf_util
import oneflow.core.operator.op_conf_pb2 as op_conf_util
import oneflow.typing as tp


def test_an_initializer_conf_initializes_a_variable():
    flow.clear_default_session()
    init = initializer_conf_util.InitializerConf()
    init.constant_conf.value = 1.5

    @flow.global_function(type="predict")
    def job(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        return x + flow.get_variable("w", shape=(2,), initializer=init)

    np.testing.assert_array_equal(job(np.zeros(2, np.float32)), [1.5, 1.5])
    assert (op_conf_util.kNone, data_type_util.kInt32) == (0, 5)
    flow.clear_default_session()
