"""``python -m oneflow launch -n N script.py [args]``: the script on N ranks through the ``mpiexec``
installed beside this interpreter (the mpich wheel puts it in the environment's ``bin/``)."""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys

from flowjob_mpi.errors import MpiError

USAGE = "python -m oneflow launch [-n N] [--hosts H1,H2 | --hostfile FILE] script.py [args ...]"


def find_mpiexec() -> str:
    """``mpiexec`` of this environment first (the mpich wheel's, matching mpi4py), else one on PATH."""
    beside = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if os.access(beside, os.X_OK):
        return beside
    found = shutil.which("mpiexec")
    if found is None:
        raise MpiError("no mpiexec found beside this Python or on PATH; pip install \"flowjob[mpi]\" installs "
                       "MPICH's with mpi4py")
    return found


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m oneflow launch", usage=USAGE,
                                     description="run a legacy program on N MPI ranks (see docs/distributed.md)")
    parser.add_argument("-n", "--np", dest="ranks", type=int, default=2, help="ranks to start (default 2)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--hosts", default=None, help="comma-separated machines, one rank each in turn (MPICH -hosts)")
    where.add_argument("--hostfile", default=None, help="an MPICH host file (host:slots per line)")
    parser.add_argument("script", help="the program every rank runs")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="its arguments")
    args = parser.parse_args(argv)
    if args.ranks < 1:
        parser.error(f"-n needs at least 1 rank, got {args.ranks}")
    return args


def command(argv: list[str]) -> list[str]:
    """The mpiexec command line for ``launch`` arguments ``argv``."""
    args = _parse(argv)
    line = [find_mpiexec(), "-n", str(args.ranks)]
    if args.hosts:
        line += ["-hosts", args.hosts]
    if args.hostfile:
        line += ["-f", args.hostfile]
    return line + [sys.executable, args.script, *args.args]


THREAD_VARIABLES = ("FLOWJOB_HOST_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def environment(argv: list[str], environ: dict[str, str] | None = None) -> dict[str, str]:
    """The ranks' environment. All ranks on this machine (no ``--hosts`` / ``--hostfile``) share its CPUs:
    each gets ``FLOWJOB_HOST_THREADS`` = its share (at least one), unless a thread count is set already, so
    the ranks' threads together never outnumber the CPUs."""
    env = dict(os.environ if environ is None else environ)
    args = _parse(argv)
    if args.hosts or args.hostfile or any(env.get(v, "").strip() for v in THREAD_VARIABLES):
        return env
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    env["FLOWJOB_HOST_THREADS"] = str(max(1, cpus // args.ranks))
    return env


def main(argv: list[str]) -> int:
    try:
        line = command(argv)
    except MpiError as exc:
        print(f"python -m oneflow launch: {exc}", file=sys.stderr)
        return 2
    return subprocess.call(line, env=environment(argv))
