"""The numpy backend (device tag ``cpu``), registered like any plugin's backend."""
from __future__ import annotations

import os
from typing import Any

import numpy as np

from flowjob_core.plugin import hookimpl
from flowjob_core.registry import Backend, BackendRegistry


def _cpu_count() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def make_backend() -> Backend:
    return Backend(
        tag="cpu",
        name="numpy",
        xp=np,
        device_count=_cpu_count,
        to_host=lambda a: a,
        from_host=lambda a: a,
        make_rng=lambda seed: np.random.default_rng(seed),
        description=f"numpy {np.__version__}",
    )


@hookimpl
def flowjob_add_backends(registry: BackendRegistry) -> None:
    registry.add(make_backend())


@hookimpl(trylast=True)
def flowjob_select_backend(device_tag: str, backends: BackendRegistry) -> Any:
    """Core's default: the backend of that tag, else the CPU (the session warns once)."""
    return backends.get(device_tag) or backends.get("cpu")
