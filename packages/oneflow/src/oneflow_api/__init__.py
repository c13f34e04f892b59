"""``import oneflow_api``: legacy v0.3's top-level home of the blob types and distributions (its C++
binding, which OneFlow's own tests and programs imported beside ``oneflow``). Served by flowjob's face:
every blob a job body computes with is one type here, ``BlobDesc``.
"""
from __future__ import annotations

from flowjob_core import Blob, FlowjobError
from flowjob_core.api.flow_config import eager_execution_enabled
from flowjob_core.trace.builder import maybe_builder

from oneflow.distributed import current_machine_id
from oneflow_api import distribute

BlobDesc = Blob
"""The type of the blobs a job body computes with (legacy annotated op arguments with it)."""


def EagerExecutionEnabled() -> bool:  # noqa: N802 - legacy's binding name
    """Whether ``flow.enable_eager_execution(True)`` is in force."""
    return eager_execution_enabled()


def CurrentMachineId() -> int:  # noqa: N802 - legacy's binding name
    """The number of the machine this process runs on (``flow.current_machine_id()``)."""
    return current_machine_id()


def JobBuildAndInferCtx_GetCurrentJobName() -> str:  # noqa: N802 - legacy's binding name
    """The name of the job being traced; outside a global function body, an error."""
    builder = maybe_builder()
    if builder is None:
        raise FlowjobError("oneflow_api.JobBuildAndInferCtx_GetCurrentJobName: no job is being traced (call it "
                           "inside a @flow.global_function body)")
    return builder.job.name


__all__ = ["BlobDesc", "CurrentMachineId", "EagerExecutionEnabled", "JobBuildAndInferCtx_GetCurrentJobName",
           "distribute"]
