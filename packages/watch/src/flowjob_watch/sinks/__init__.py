"""Watch sinks: where watched values go. Built-ins are registered by the watch plugin by name
(``callback``, ``dict``, ``recorder``, ``stats`` from here, and ``tensorboard`` from ``flowjob_watch.summary``)
exactly as a third party's would be."""
from flowjob_watch.sinks.base import Sink, label, logical
from flowjob_watch.sinks.callback import CallbackSink, PrintSink
from flowjob_watch.sinks.dict_sink import DictSink
from flowjob_watch.sinks.recorder import Recorder, RecorderFull, read_records
from flowjob_watch.sinks.stats import NonFiniteError, Stats, StatsRow

__all__ = [
    "CallbackSink", "DictSink", "NonFiniteError", "PrintSink", "Recorder", "RecorderFull", "Sink", "Stats",
    "StatsRow", "label", "logical", "read_records",
]
