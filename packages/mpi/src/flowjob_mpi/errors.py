"""The error flowjob-mpi raises, in a module of its own so the world and its NCCL setup both import it."""
from __future__ import annotations

from flowjob_core.errors import FlowjobError


class MpiError(FlowjobError, RuntimeError):
    """The MPI world cannot run what was asked (missing mpi4py, machines that do not match the world)."""
