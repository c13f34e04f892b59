"""Each rank's piece of a split variable written into and read from the whole ``out`` file in place
(``flowjob_core.checkpoint.row_files``): the file is the bytes one process writes, on any axis."""
import numpy as np
import pytest

from flowjob_core import BlobSpec
from flowjob_core.checkpoint import row_files
from flowjob_core.ir.layout import Shard


def _pieces(shape, axis, ranks):
    step = shape[axis] // ranks
    return [Shard(axis, r * step, (r + 1) * step) for r in range(ranks)]


@pytest.mark.parametrize("shape,axis,ranks", [((8, 3), 0, 2), ((8, 6), 1, 2), ((4, 6, 5), 1, 3), ((2, 3, 8), 2, 4),
                                              ((12,), 0, 4), ((8, 0), 0, 2)])
def test_pieces_written_in_any_order_make_the_file_one_process_writes(tmp_path, shape, axis, ranks):
    whole = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape) * 1.5
    spec, path = BlobSpec(shape, whole.dtype), str(tmp_path / "out")
    row_files.create(path, spec.nbytes)
    for shard in reversed(_pieces(shape, axis, ranks)):
        row_files.write_piece(path, spec, shard, whole[shard.index()])
    assert open(path, "rb").read() == whole.tobytes()
    for shard in _pieces(shape, axis, ranks):
        np.testing.assert_array_equal(row_files.read_piece(path, spec, shard), whole[shard.index()])


def test_a_split_by_rows_is_one_run_and_by_columns_one_run_per_row():
    spec = BlobSpec((4, 6), np.dtype(np.float64))
    assert list(row_files.runs(spec, Shard(0, 2, 4))) == [(2 * 6 * 8, 0, 2 * 6 * 8)]
    assert list(row_files.runs(spec, Shard(1, 3, 6))) == [(k * 48 + 24, k * 24, 24) for k in range(4)]


def test_reading_a_piece_reads_only_its_bytes(tmp_path, monkeypatch):
    whole = np.arange(64, dtype=np.int32).reshape(16, 4)
    path = tmp_path / "out"
    whole.tofile(path)
    read = []
    real_open = open

    def spying_open(*args, **kwargs):
        f = real_open(*args, **kwargs)
        real_readinto = f.readinto

        class Spy:
            def __getattr__(self, name):
                return getattr(f, name)

            def readinto(self, view):
                read.append(len(view))
                return real_readinto(view)

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                f.close()

        return Spy()

    monkeypatch.setattr("builtins.open", spying_open)
    piece = row_files.read_piece(str(path), BlobSpec((16, 4), whole.dtype), Shard(0, 4, 8))
    np.testing.assert_array_equal(piece, whole[4:8])
    assert sum(read) == 4 * 4 * 4  # 4 rows of 4 int32, of the file's 256 bytes


def test_a_file_cut_short_is_named(tmp_path):
    path = tmp_path / "out"
    np.zeros(6, np.float32).tofile(path)
    with pytest.raises(EOFError, match="ended at byte 24"):
        row_files.read_piece(str(path), BlobSpec((4, 3), np.dtype(np.float32)), Shard(0, 2, 4))
