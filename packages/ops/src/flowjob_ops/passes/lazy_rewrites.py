"""What the rewrites legacy ran only on lazy jobs (quantization-aware training, stale-synchronous stages) do in
eager mode: nothing, with a warning naming the job and its option, as legacy's eager jobs skipped them (the
body's ops have run already when the job's passes would)."""
from __future__ import annotations

import warnings

from flowjob_core.ir.job import Job
from flowjob_core.trace import eager_mode


def skipped_in_eager_mode(job: Job, option: str) -> bool:
    """True (after warning) where ``job`` runs in eager mode, so its lazy-only rewrite ``option`` does nothing."""
    if not eager_mode.enabled():
        return False
    warnings.warn(f"job {job.name!r}: {option}(True) has no effect in eager mode, as in legacy OneFlow",
                  stacklevel=3)
    return True
