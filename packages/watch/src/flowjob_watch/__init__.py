"""flowjob-watch: flow.watch, flow.watch_diff, flow.watch_scope and pluggable watch sinks."""
from flowjob_watch import sinks
from flowjob_watch.api import watch, watch_diff
from flowjob_watch.scope import watch_scope
from flowjob_watch.sinks import Recorder, Sink, Stats, read_records

__version__ = "0.1.0"
__all__ = ["Recorder", "Sink", "Stats", "read_records", "sinks", "watch", "watch_diff", "watch_scope"]
