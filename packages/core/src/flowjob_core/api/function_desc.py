"""``flow.current_global_function_desc()``: what the global function being traced was declared with.

Legacy's ops asked it ``IsTrainable()`` (a train job?) and read the job's config flags from it; here those are
the job's type and its frozen function config (``job.config``), so a legacy helper that branches on them
while building a job keeps working.
"""
from __future__ import annotations

from flowjob_core.config.function_desc import FunctionDesc
from flowjob_core.trace.builder import current_builder


def current_global_function_desc() -> FunctionDesc:
    """The description of the global function whose body is being traced (an error outside one)."""
    job = current_builder("flow.current_global_function_desc()").job
    return FunctionDesc(job.name, job.type, job.config)


__all__ = ["FunctionDesc", "current_global_function_desc"]
