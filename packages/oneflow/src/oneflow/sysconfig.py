"""``flow.sysconfig``: what this installation was built with, as legacy's answered for its C++ build.

flowjob is pure Python: it has no C++ headers or library to compile an op against (``get_include``,
``get_compile_flags`` and ``get_link_flags`` are refused with the way to add an op), ``get_lib`` is the
face package's folder (where legacy's answer pointed too), ``with_cuda`` says whether a CUDA backend is
usable in this process (flowjob-gpu registered with a device), ``with_xla`` is False, and of legacy's RPC
backends this build has the local one (one process, or MPI ranks) and no gRPC.
"""
from __future__ import annotations

import os
from typing import NoReturn

from flowjob_core.api.flow_config_options import PLUGIN_HINT
from flowjob_core.runtime.session import get_default_session

import oneflow

__all__ = ["get_compile_flags", "get_include", "get_lib", "get_link_flags", "has_rpc_backend_grpc",
           "has_rpc_backend_local", "with_cuda", "with_xla"]


def _no_cxx(name: str) -> NoReturn:
    raise NotImplementedError(f"flow.sysconfig.{name}: flowjob has no C++ headers or library to build an op "
                              f"against; {PLUGIN_HINT}")


def get_include() -> str:
    """Refused: there are no C++ headers (ops are Python plugins)."""
    _no_cxx("get_include")


def get_compile_flags() -> list[str]:
    """Refused: there is nothing to compile against (ops are Python plugins)."""
    _no_cxx("get_compile_flags")


def get_link_flags() -> list[str]:
    """Refused: there is no library to link against (ops are Python plugins)."""
    _no_cxx("get_link_flags")


def get_lib() -> str:
    """The folder of the installed ``oneflow`` face package (legacy: the folder of its shared library)."""
    return os.path.dirname(os.path.abspath(oneflow.__file__))


def with_cuda() -> bool:
    """Whether jobs can run on a CUDA device here: flowjob-gpu is installed and registered its backend (it does
    only where CuPy finds a device)."""
    return get_default_session().registries.backends.get("gpu") is not None


def with_xla() -> bool:
    """False: flowjob has no XLA backend (``function_config().use_xla_jit`` is recorded and changes nothing)."""
    return False


def has_rpc_backend_grpc() -> bool:
    """False: flowjob's processes talk through MPI (flowjob-mpi), not legacy's gRPC control plane."""
    return False


def has_rpc_backend_local() -> bool:
    """True: a run needs no RPC service (one process, or MPI ranks started by ``python -m oneflow launch``)."""
    return True
