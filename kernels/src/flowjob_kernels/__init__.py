"""flowjob-kernels: the hand-written kernel sources (``cuda/<family>.cu``) and the loader that finds them."""
from flowjob_kernels.loader import entry_points, families, source, source_dir

__version__ = "0.1.0"

__all__ = ["entry_points", "families", "source", "source_dir"]
