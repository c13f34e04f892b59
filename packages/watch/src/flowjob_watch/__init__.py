"""flowjob-watch: flow.watch and flow.watch_diff."""
from flowjob_watch.api import watch, watch_diff

__all__ = ["watch", "watch_diff"]
