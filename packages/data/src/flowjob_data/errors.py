"""Exceptions raised when MNIST data cannot be found or trusted."""


class CorruptDataError(RuntimeError):
    """A data file exists but is unreadable or has the wrong content."""


class ChecksumError(CorruptDataError):
    """A file's sha256 differs from the expected one."""


class DataUnavailableError(RuntimeError):
    """No source (local file, cache, URL, PyPI wheel) could provide the data."""
