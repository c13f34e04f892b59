"""``flow.scope``: namespaces, placements and logical views."""
from flowjob_core.scope import consistent_view, mirrored_view, namespace, placement

__all__ = ["consistent_view", "mirrored_view", "namespace", "placement"]
