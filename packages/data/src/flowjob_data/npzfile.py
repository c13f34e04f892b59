"""Reading (with validation) and atomic, reproducible writing of ``mnist.npz``."""

import contextlib
import os
import tempfile
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from flowjob_data.errors import CorruptDataError

NPZ_NAME = "mnist.npz"
KEYS = ("x_train", "y_train", "x_test", "y_test")
IMAGE_HW = (28, 28)

# A fixed zip timestamp makes the written npz byte-identical from run to run, so its
# sha256 can be compared between machines.
_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)


@dataclass(frozen=True)
class MnistArrays:
    """The four arrays of an MNIST npz: uint8 images (N, 28, 28), integer labels (N,)."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray


def _bad(path: Path, why: str) -> CorruptDataError:
    return CorruptDataError(
        f"{path} is not a valid MNIST npz ({why}); delete {path} and try again"
    )


def _check_split(path: Path, x: np.ndarray, y: np.ndarray, split: str) -> None:
    if x.dtype != np.uint8 or x.ndim != 3 or x.shape[1:] != IMAGE_HW or x.shape[0] == 0:
        raise _bad(path, f"x_{split} is {x.dtype} {x.shape}, expected uint8 (N, 28, 28)")
    if not np.issubdtype(y.dtype, np.integer) or y.shape != (x.shape[0],):
        raise _bad(path, f"y_{split} is {y.dtype} {y.shape}, expected integer ({x.shape[0]},)")
    if y.min() < 0 or y.max() > 9:
        raise _bad(path, f"y_{split} has labels outside 0..9")


def read_mnist_npz(path: str | os.PathLike[str]) -> MnistArrays:
    """Load and validate an MNIST npz; raise CorruptDataError naming *path* if it is bad."""
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as npz:
            missing = [k for k in KEYS if k not in npz.files]
            if missing:
                raise _bad(path, f"missing keys {missing}")
            arrays = {k: npz[k] for k in KEYS}
    except CorruptDataError:
        raise
    except Exception as exc:
        # A truncated or foreign file fails in many ways (BadZipFile, EOFError,
        # ValueError, zlib.error, OSError...): all mean the same thing to the user.
        raise _bad(path, f"{type(exc).__name__}: {exc}") from exc
    _check_split(path, arrays["x_train"], arrays["y_train"], "train")
    _check_split(path, arrays["x_test"], arrays["y_test"], "test")
    return MnistArrays(**arrays)


def write_npz_atomic(path: str | os.PathLike[str], arrays: Mapping[str, np.ndarray]) -> None:
    """Write a compressed npz to *path* via a temp file in the same folder + os.replace.

    Readers never see a half-written file, and an interrupted write leaves nothing.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            with zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_DEFLATED) as zf:
                for name, array in arrays.items():
                    info = zipfile.ZipInfo(f"{name}.npy", date_time=_ZIP_EPOCH)
                    info.compress_type = zipfile.ZIP_DEFLATED
                    info.external_attr = 0o644 << 16
                    with zf.open(info, "w", force_zip64=True) as member:
                        np.lib.format.write_array(
                            member, np.ascontiguousarray(array), allow_pickle=False
                        )
            fh.flush()
            os.fsync(fh.fileno())
        # mkstemp creates 0600; the cache is meant to be shared like any downloaded file.
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
