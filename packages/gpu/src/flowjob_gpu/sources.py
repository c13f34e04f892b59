"""Finding the CUDA sources of ``kernels/``: env var, the wheel's copy, then the repository."""
from __future__ import annotations

import os
import pathlib


def kernel_dir() -> pathlib.Path:
    env = os.environ.get("FLOWJOB_KERNEL_DIR")
    if env:
        return pathlib.Path(env)
    here = pathlib.Path(__file__).resolve().parent
    packed = here / "kernels"
    if packed.is_dir():
        return packed
    for parent in here.parents:  # an editable install: the repository's kernels/
        if (parent / "kernels" / "cuda").is_dir():
            return parent / "kernels"
    raise FileNotFoundError("flowjob-gpu: no kernels/ folder found; set FLOWJOB_KERNEL_DIR")


def kernel_source(family: str) -> str:
    return (kernel_dir() / "cuda" / f"{family}.cu").read_text()
