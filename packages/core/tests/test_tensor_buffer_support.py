"""What core gives tensor buffers (dtype object arrays of arrays) and tensor lists read whole: the dtype, the
output check of a ``TensorList`` value, and the testing kit's contract checks on tensor buffer inputs."""
from __future__ import annotations

import types
from typing import Any, Sequence

import numpy as np
import pytest

from flowjob_core import OpDef, Session, hookimpl, make_plugin_manager
from flowjob_core.ir import dtypes
from flowjob_core.ir.job import BlobSpec
from flowjob_core.ir.opdef import KernelContext
from flowjob_core.plan.kernel_outputs import problems
from flowjob_core.plan.mirrored import TensorList
from flowjob_core.testing import run_op
from flowjob_core.testing.kinds import Sync
from flowjob_core.testing.kernel_probe import KernelContractError


def test_the_tensor_buffer_dtype():
    assert dtypes.as_dtype("tensor_buffer") == dtypes.tensor_buffer == np.dtype(object)
    assert dtypes.tensor_buffer in dtypes.dtypes() and dtypes.tensor_buffer not in dtypes.NUMERIC
    with pytest.raises(NotImplementedError, match="not a flow dtype of numbers"):
        dtypes.convert_oneflow_dtype_to_numpy_dtype(dtypes.tensor_buffer)


def test_a_variable_cannot_be_a_tensor_buffer(toy):
    from flowjob_core import JobFunction, VariableError, get_variable

    def job() -> Sync:
        return get_variable("buffers", shape=(2,), dtype=dtypes.tensor_buffer)

    session = Session(make_plugin_manager(plugins=[toy], autoload=False))
    try:
        with pytest.raises(VariableError, match="'buffers'.*a variable holds numbers"):
            JobFunction(job, "predict", None, session)()
    finally:
        session.close()


def test_a_tensor_list_value_is_checked_item_by_item():
    spec = BlobSpec((3, 4, 4), np.float32)
    good = TensorList([np.zeros((1, 2, 3), np.float32), np.zeros((1, 4, 1), np.float32)])
    assert problems([good], [spec], flexible_extent=True) == []
    bad = TensorList([np.zeros((1, 2, 3), np.float32), np.zeros((1, 5, 1), np.float32)])
    assert problems([bad], [spec], flexible_extent=True) == [
        "output 0 item 1 is (1, 5, 1):float32, inference says (3, 4, 4):float32"]


def _first_element_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    return [BlobSpec((2,), np.float64)]


def _sneaky_kernel(ctx: KernelContext) -> Any:
    def run(buffer: Any) -> Any:
        first = buffer.reshape(-1)[0]
        first[...] = 7.0  # an element of the input, written: the container's read-only flag does not stop it
        return np.array(first, copy=True)

    return run


def _add_ops(registry: Any) -> None:
    registry.add(OpDef("k_buffer_sneaky", _first_element_infer, kernel=_sneaky_kernel, not_differentiable=True))


PLUGIN = types.ModuleType("tensor-buffer-test-ops")
PLUGIN.flowjob_add_ops = hookimpl(_add_ops)


def test_the_kit_catches_a_kernel_writing_into_a_tensor_buffer_element():
    session = Session(make_plugin_manager(plugins=[PLUGIN], autoload=False))
    try:
        buffer = np.empty(2, dtype=object)
        buffer[0], buffer[1] = np.zeros(2), np.ones(3)
        with pytest.raises(KernelContractError, match="the kernel changed its input 0"):
            run_op("k_buffer_sneaky", [buffer], session=session)
    finally:
        session.close()
