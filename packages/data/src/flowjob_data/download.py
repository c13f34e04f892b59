"""Step 3: download ``mnist.npz`` from a URL into the cache with pooch."""

import contextlib
from pathlib import Path
from typing import Any

import pooch

from flowjob_data.checksum import normalize_sha256
from flowjob_data.errors import ChecksumError
from flowjob_data.npzfile import NPZ_NAME

# (connect, read) seconds: an unreachable host must fail fast so the PyPI fallback
# starts quickly, while a slow but live server still gets time to stream.
TIMEOUT = (10, 60)


class DownloadFailed(Exception):
    """The URL could not be fetched (network, HTTP error); the caller may fall back."""


def make_downloader(url: str) -> Any:
    """The pooch downloader for *url*: HTTP(S) with a short timeout and a progress bar."""
    if url.startswith(("http://", "https://")):
        return pooch.HTTPDownloader(progressbar=True, timeout=TIMEOUT)
    # Other protocols (ftp, doi...): let pooch choose; it has no timeout knob for them.
    return pooch.downloaders.choose_downloader(url, progressbar=True)


def download_npz(url: str, hash_check: str | None, cache: Path) -> Path:
    """Download *url* to ``cache/mnist.npz``, verifying sha256 against *hash_check*.

    Raises DownloadFailed for network problems and ChecksumError on a hash mismatch.
    pooch streams into a temp file in *cache* and only moves it into place once the
    hash matches, so a failed attempt leaves nothing behind.
    """
    cache.mkdir(parents=True, exist_ok=True)
    target = cache / NPZ_NAME
    known_hash = f"sha256:{normalize_sha256(hash_check)}" if hash_check else None
    try:
        fetched = pooch.retrieve(
            url,
            known_hash=known_hash,
            fname=NPZ_NAME,
            path=cache,
            downloader=make_downloader(url),
            progressbar=True,
        )
    except OSError as exc:
        # requests' exceptions (connection, timeout, HTTP status) derive from OSError.
        raise DownloadFailed(f"{type(exc).__name__}: {exc}") from exc
    except ValueError as exc:
        if "hash" not in str(exc).lower():
            raise DownloadFailed(str(exc)) from exc
        # pooch already deleted its temp file; make sure no target is left either.
        with contextlib.suppress(FileNotFoundError):
            target.unlink()
        raise ChecksumError(
            f"sha256 verification failed for {target} (downloaded from {url}): {exc} "
            f"Remove {target} and try again."
        ) from exc
    return Path(fetched)
