"""sha256 helpers shared by the download and wheel-conversion steps."""

import hashlib


def sha256_bytes(data: bytes) -> str:
    """Hex sha256 of an in-memory payload."""
    return hashlib.sha256(data).hexdigest()


def normalize_sha256(value: str) -> str:
    """Accept both ``"<hex>"`` and pooch-style ``"sha256:<hex>"``; return lower hex."""
    value = value.strip()
    if value.lower().startswith("sha256:"):
        value = value[len("sha256:"):]
    return value.lower()
