import pytest

from flowjob_gpu import available_cupy


def pytest_collection_modifyitems(config, items):
    if available_cupy() is not None:
        return
    skip = pytest.mark.skip(reason="no CUDA device: CuPy is missing or sees no GPU")
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(skip)
