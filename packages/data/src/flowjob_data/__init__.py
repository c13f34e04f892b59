"""flowjob_data: MNIST for flowjob, with the legacy OneFlow ``load_mnist`` API."""

from flowjob_data.errors import ChecksumError, CorruptDataError, DataUnavailableError
from flowjob_data.mnist import load_mnist
from flowjob_data.sources import cache_dir, fetch_mnist

__version__ = "0.1.0"
__all__ = [
    "ChecksumError",
    "CorruptDataError",
    "DataUnavailableError",
    "cache_dir",
    "fetch_mnist",
    "load_mnist",
]
