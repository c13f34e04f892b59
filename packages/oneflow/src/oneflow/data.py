"""``flow.data``: datasets (from flowjob-data)."""
from oneflow._lazy import require

require("flowjob_data", "flowjob-data", "flow.data")

from flowjob_data import load_mnist  # noqa: E402

__all__ = ["load_mnist"]
