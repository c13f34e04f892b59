"""The gpu backend's random streams draw numpy's values for a seed (on any machine), and a seeded random
op gives the same values on the GPU as on the CPU (marked ``gpu``)."""
from __future__ import annotations

import numpy as np
import pytest

from flowjob_gpu.random import HostSeededGenerator


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_seed_fills_out_with_numpys_draws(dtype):
    copies: list[np.ndarray] = []

    def to_device(a: np.ndarray) -> np.ndarray:
        copies.append(a)
        return a.copy()

    out = np.zeros((3, 4), dtype)
    stream = HostSeededGenerator(7, to_device)
    want = np.random.default_rng(7)
    assert stream.random(out=out, dtype=dtype) is out
    np.testing.assert_array_equal(out, want.random((3, 4), dtype=dtype))
    stream.standard_normal(out=out, dtype=dtype)
    np.testing.assert_array_equal(out, want.standard_normal((3, 4), dtype=dtype))
    assert len(copies) == 2  # each draw crosses to the device once


@pytest.mark.gpu
def test_seeded_random_ops_agree_between_cpu_and_gpu(monkeypatch):
    import oneflow as flow
    import oneflow.typing as tp

    results = {}
    for device in ("cpu", "gpu"):
        monkeypatch.setenv("FLOWJOB_DEVICE", device)
        flow.clear_default_session()

        @flow.global_function()
        def draw(x: tp.Numpy.Placeholder((64, 32))) -> tp.Numpy:
            noise = flow.random_uniform((64, 32), minval=-1.0, maxval=1.0, seed=3)
            return noise + flow.random_normal((64, 32), seed=5) * flow.random.bernoulli(x * 0.5, seed=4)

        x = np.ones((64, 32), np.float32)
        results[device] = [draw(x) for _ in range(2)]
    flow.clear_default_session()
    for got, want in zip(results["gpu"], results["cpu"]):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    assert not np.array_equal(results["gpu"][0], results["gpu"][1])  # fresh draws every step
