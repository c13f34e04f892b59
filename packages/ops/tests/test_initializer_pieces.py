"""An initializer's ``piece`` (what a variable split over ranks draws) is exactly the rows one process draws of the
whole, for every initializer kind legacy programs use, without drawing the whole."""
from __future__ import annotations

import numpy as np
import pytest

from flowjob_ops.api import _initializers as initializers

KINDS = [
    initializers.Constant(value=3.0),
    initializers.RandomUniform(minval=-1.0, maxval=2.0),
    initializers.RandomNormal(mean=1.0, stddev=2.0),
    initializers.TruncatedNormal(stddev=0.5),
    initializers.variance_scaling(1.0, "fan_avg", "random_uniform", ""),  # glorot / xavier uniform
    initializers.variance_scaling(1.0, "fan_avg", "random_normal", ""),  # glorot / xavier normal
    initializers.variance_scaling(2.0, "fan_in", "truncated_normal", ""),
    initializers.kaiming("random_uniform", "fan_in", "relu", 0.0, "NCHW", None),
    initializers.kaiming("random_normal", "fan_out", "leaky_relu", 0.1, "NCHW", None),
    initializers.Range(start=1.0, stride=2.0, axis=1),
    initializers.RandomUniform(minval=0.0, maxval=9.0, seed=4),  # its own seed
]


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(initializers, "_CHUNK", 7)  # chunks shorter and longer than a line of the shapes below


@pytest.mark.parametrize("init", KINDS, ids=lambda init: type(init).__name__)
@pytest.mark.parametrize("shape", [(12, 5), (6, 4, 3), (4, 20)])
def test_each_piece_is_the_rows_of_the_whole(init: initializers.Initializer, shape: tuple[int, ...]) -> None:
    whole = init(shape, "float32", np.random.default_rng([1, 2]))
    for axis, size in enumerate(shape):
        for parts in (2, size):
            rows = size // parts
            for rank in range(parts):
                piece = init.piece(shape, "float32", np.random.default_rng([1, 2]), axis, rank * rows,
                                   (rank + 1) * rows)
                index = (slice(None),) * axis + (slice(rank * rows, (rank + 1) * rows),)
                assert piece.dtype == np.float32
                np.testing.assert_array_equal(piece, whole[index])


def test_integer_uniform_pieces_follow_the_whole() -> None:
    init = initializers.RandomUniform(minval=0.0, maxval=100.0)
    whole = init((10, 3), "int32", np.random.default_rng(5))
    np.testing.assert_array_equal(init.piece((10, 3), "int32", np.random.default_rng(5), 0, 5, 10), whole[5:])


class CountingGenerator:
    """A generator that records the size of each draw."""

    def __init__(self, seed: int) -> None:
        self.generator, self.sizes = np.random.default_rng(seed), []  # type: ignore[var-annotated]

    def standard_normal(self, size: int) -> np.ndarray:
        self.sizes.append(int(size))
        return self.generator.standard_normal(size=size)

    def uniform(self, low: float, high: float, size: int) -> np.ndarray:
        self.sizes.append(int(size))
        return self.generator.uniform(low, high, size=size)


@pytest.mark.parametrize("init", [initializers.TruncatedNormal(), initializers.RandomUniform()],
                         ids=lambda init: type(init).__name__)
def test_a_piece_is_drawn_in_chunks_never_whole(init: initializers.Initializer) -> None:
    whole = init((40, 6), "float64", np.random.default_rng(3))
    generator = CountingGenerator(3)
    piece = init.piece((40, 6), "float64", generator, 0, 20, 40)  # type: ignore[arg-type]
    np.testing.assert_array_equal(piece, whole[20:])
    assert generator.sizes and max(generator.sizes) < 40 * 6 // 4  # chunks of 7 (and the ~5% redrawn)


def test_a_piece_outside_the_shape_is_refused() -> None:
    with pytest.raises(ValueError, match=r"rows \[2, 9\) of axis 0 are outside shape \(4, 3\)"):
        initializers.RandomNormal().piece((4, 3), "float32", None, 0, 2, 9)


def test_a_split_variable_from_flow_s_initializers_starts_as_the_rows_of_one_process_s() -> None:
    from flowjob_core import BlobSpec
    from flowjob_core.backends.numpy_backend import make_backend
    from flowjob_core.ir.layout import Shard, split
    from flowjob_core.runtime.variables import VariableStore

    spec = BlobSpec((8, 5), np.dtype(np.float32))
    for init in KINDS:
        whole = VariableStore(make_backend(), seed=3).declare("v", spec, init)
        for shard in (Shard(0, 4, 8), Shard(1, 0, 1)):
            piece = VariableStore(make_backend(), seed=3).declare("v", spec, init, layout=split(shard.axis),
                                                                  shard=shard)
            np.testing.assert_array_equal(piece.array, whole.array[shard.index()])
