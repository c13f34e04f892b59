import os

import pytest

from flowjob_gpu import available_cupy

# the device check sets it: there a missing CuPy or device must fail the gpu tests, not skip them (a run of
# skipped tests reads as green)
REQUIRE = "FLOWJOB_REQUIRE_GPU"


def pytest_collection_modifyitems(config, items):
    if available_cupy() is not None:
        return
    gpu = [item for item in items if item.get_closest_marker("gpu") is not None]
    if os.environ.get(REQUIRE) == "1":
        if gpu:
            raise pytest.UsageError(f"{REQUIRE}=1: {len(gpu)} gpu-marked tests need a CUDA device, and CuPy is "
                                    f"missing or sees none (python -c 'import cupy' says why)")
        return
    skip = pytest.mark.skip(reason="no CUDA device: CuPy is missing or sees no GPU")
    for item in gpu:
        item.add_marker(skip)
