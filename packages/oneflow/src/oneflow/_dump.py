"""``python -m oneflow dump SCRIPT.py``: print the jobs a program defines, without running a step.

Each job is printed by ``flowjob_core.ir.printing`` with its session's op records (effects are
marked) and its function's bindings (what the keys the job names stand for).

The script is run as a module named ``__flowjob_dump__``, not ``__main__``: a seed-style
program defines its jobs at module level and keeps its work (``check_point.init()``, loading
data, the training loop, saving) under ``if __name__ == "__main__":``, so none of that runs.
Any job call that still happens (a script without that guard, or ``--run-main``) stops the
script at once, before a step is planned. Every job defined is then traced from its
placeholders' annotations and printed. What the script prints goes to stderr, so stdout
holds only the jobs.

``--cuda`` (which implies ``--after all`` unless another pass is named) adds, after each job, the
CUDA source the gpu backend generates for each of its ``elementwise_chain`` nodes, or why a chain
keeps the xp kernel (``flowjob_gpu.chain_source``): no GPU and no CuPy are needed.
"""
from __future__ import annotations

import contextlib
import runpy
import sys
from pathlib import Path
from types import ModuleType
from typing import TextIO

from flowjob_core import FlowjobError, MissingPackageError
from flowjob_core.api.dry_run import ALL_PASSES, JobCalled, dry_run, job_after, pass_names
from flowjob_core.ir.job import Job
from flowjob_core.ir.printing import format_job

from oneflow._lazy import require

MODULE_NAME = "__flowjob_dump__"


class DumpError(Exception):
    """The script or the request cannot be dumped; the message says why (exit status 2)."""


def dump(script: str, job: str | None = None, after: str | None = None, run_main: bool = False,
         out: TextIO | None = None, cuda: bool = False) -> None:
    """Print the jobs ``script`` defines (only ``job`` if given), traced or after the pass ``after``;
    with ``cuda``, each job's generated chain kernels too (after all passes unless ``after`` is given)."""
    out = out if out is not None else sys.stdout
    sources = _chain_source_module() if cuda else None
    if cuda and after is None:
        after = ALL_PASSES  # chains are made by the fusion pass
    functions = _defined_functions(Path(script), run_main)
    if job is not None:
        chosen = [fn for fn in functions if fn.name == job]
        if not chosen:
            raise DumpError(f"{script} defines no job {job!r}; its jobs: {', '.join(fn.name for fn in functions)}")
        functions = chosen
    if after is not None and after != ALL_PASSES:
        known = pass_names(functions[0])
        if after not in known:
            raise DumpError(f"unknown pass {after!r}; the passes, in order: {', '.join(known)} "
                            f"(or {ALL_PASSES!r} for the job as planned)")
    for i, fn in enumerate(functions):
        try:
            planned = job_after(fn, after)
            text = format_job(planned, fn.session.registries.ops, fn.bindings)
            if sources is not None:
                text += "\n" + _chain_sources(sources, planned, fn.session.registries.ops)
        except FlowjobError as exc:
            raise DumpError(f"job {fn.name!r}: {exc}") from None
        if i:
            print(file=out)
        if after is not None:
            print(f"# {fn.name} after {'all passes' if after == ALL_PASSES else f'pass {after!r}'}", file=out)
        print(text, file=out)


def _chain_source_module() -> ModuleType:
    try:
        return require("flowjob_gpu.chain_source", "flowjob-gpu", "python -m oneflow dump --cuda")
    except MissingPackageError as exc:
        raise DumpError(str(exc)) from None


def _chain_sources(sources: ModuleType, job: Job, ops: object) -> str:
    """The CUDA the gpu backend generates for each elementwise_chain node of ``job``, or why it has none."""
    chains = sources.job_chain_kernels(job, ops)
    if not chains:
        return f"# cuda: no elementwise_chain nodes in job {job.name!r}"
    parts = []
    for name, kernel in chains:
        if kernel.source is None:
            parts.append(f"# cuda: elementwise_chain {name!r} keeps the xp kernel: {kernel.reason}")
        else:
            parts.append(f"# cuda: elementwise_chain {name!r}\n{kernel.source.text()}")
    return "\n".join(parts)


def _defined_functions(script: Path, run_main: bool) -> list:
    if not script.is_file():
        raise DumpError(f"no such script: {script}")
    argv, path = sys.argv[:], sys.path[:]
    sys.argv = [str(script)]
    sys.path.insert(0, str(script.resolve().parent))  # as `python SCRIPT.py` would: its neighbours import
    try:
        with dry_run() as run, contextlib.redirect_stdout(sys.stderr):
            try:
                runpy.run_path(str(script), run_name="__main__" if run_main else MODULE_NAME)
            except JobCalled:
                pass  # the script reached a job call: everything it defines before that is known
            except SystemExit as exc:
                if exc.code not in (None, 0):
                    raise DumpError(f"{script} exited with status {exc.code!r} before defining its jobs") from None
            except Exception as exc:
                raise DumpError(f"{script} failed before its first job call: {type(exc).__name__}: {exc}") from exc
    finally:
        sys.argv, sys.path[:] = argv, path
    functions = run.latest()
    if not functions:
        hint = "" if run_main else " (if it defines them inside main(), add --run-main)"
        raise DumpError(f"{script} defines no @flow.global_function{hint}")
    return functions
