"""``flow.deprecated.nn``: v0.3's call-counting ``Module`` of the job-function API (from flowjob-core)."""
from oneflow._exports import Source, export

SOURCES = (Source("flowjob_core.api.call_counted_module", "flowjob-core"),)

__all__ = export(globals(), "flow.deprecated.nn", *SOURCES)
