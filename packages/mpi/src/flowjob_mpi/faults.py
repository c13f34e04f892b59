"""A rank that fails stops every rank: an uncaught exception is printed with the rank's number, then
``MPI_Abort`` ends the whole job (the other ranks may be blocked in a collective that would never end).

A rank that leaves otherwise (``sys.exit``, the end of a script whose ranks diverged) tells the others
as it exits; a rank then found waiting in a collective for more than ``GRACE_S`` after a peer left
can never finish it (every collective needs every rank), so it aborts the job naming both. The
grace lets the last collective a leaving rank took part in finish on the slower ranks. A rank killed
outright is the launcher's business: MPICH's hydra ends the other ranks and reports the signal.

A rank whose launcher is gone (mpiexec killed outright: its rank processes are handed to another
parent) ends itself: nobody is left to end it, ``MPI_Abort`` has no process manager to reach, and a
rank blocked in a collective would spin on its core for ever (seen: a test run's time limit killed
mpiexec, and rank 0 spun for twenty minutes).
"""
from __future__ import annotations

import atexit
import os
import sys
import threading
import time
import traceback
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from flowjob_mpi.world import World

ABORT_STATUS = 1
POLL_S = 0.05  # how often the watchdog looks for peers' notices of leaving
GRACE_S = 3.0
# MPI_Abort tears down the launcher's output forwarding: text written just before can be lost (seen once on a
# loaded machine: an aborted run with empty stderr), so the message gets this long to reach mpiexec first
FORWARD_S = 0.5
LEFT_TAG = 7301  # on the world's private duplicate: never matches a user's message


class Collectives:
    """Which collective this rank is waiting in, and since when (read by the watchdog thread)."""

    def __init__(self) -> None:
        self.what: str | None = None
        self.since = 0.0

    def enter(self, what: str) -> None:
        self.since = time.monotonic()
        self.what = what

    def leave(self) -> None:
        self.what = None


WAITING = Collectives()


def install(world: "World") -> None:
    """Hooks for uncaught exceptions (main and other threads) that abort every rank, and, on ranks
    other than 0, a quiet standard output (legacy ran the script body on the master only)."""
    previous = sys.excepthook

    def excepthook(kind: type[BaseException], exc: BaseException, tb: Any) -> None:
        if issubclass(kind, KeyboardInterrupt):  # the launcher forwarded Ctrl-C to every rank: no abort storm
            previous(kind, exc, tb)
            return
        abort(world, kind, exc, tb)

    def thread_hook(args: threading.ExceptHookArgs) -> None:
        if args.exc_type is SystemExit:
            return
        abort(world, args.exc_type, args.exc_value or args.exc_type(), args.exc_traceback,
              f" in thread {args.thread.name if args.thread else '?'}")

    sys.excepthook = excepthook
    threading.excepthook = thread_hook
    control = world.comm.Dup()  # collective: every rank installs at the same point
    watchdog = threading.Thread(target=_watch, args=(world, control), name="flowjob-mpi-watchdog", daemon=True)
    threading.Thread(target=_watch_launcher, args=(world, os.getppid()), name="flowjob-mpi-launcher-watch",
                     daemon=True).start()
    watchdog.start()
    atexit.register(_leave, world, control, watchdog)  # after mpi4py's own (registered earlier): runs first
    if world.rank != 0:
        sys.stdout = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 (lives as long as the process)


def abort(world: "World", kind: type[BaseException], exc: BaseException, tb: Any, where: str = "") -> None:
    """Print the error naming the rank, then end every rank of the job."""
    text = "".join(traceback.format_exception(kind, exc, tb))
    message = (f"flowjob-mpi: rank {world.rank} of {world.size}{where} raised {kind.__name__}: {exc}\n"
               f"{text}flowjob-mpi: aborting all {world.size} ranks\n")
    try:
        sys.stderr.write(message)
        sys.stderr.flush()
        time.sleep(FORWARD_S)
    finally:
        world.comm.Abort(ABORT_STATUS)


LAUNCHER_POLL_S = 0.2  # how often a rank looks whether the process that started it is still its parent


def _watch_launcher(world: "World", launcher: int) -> None:
    """End this rank at once when ``launcher``, the process that started it, is no longer its parent (see the module
    notes). Its own thread, which touches no MPI: a rank whose launcher died can hang in any MPI call."""
    while os.getppid() == launcher:
        time.sleep(LAUNCHER_POLL_S)
    try:  # standard error may be a pipe to the dead launcher
        sys.stderr.write(f"flowjob-mpi: rank {world.rank} of {world.size}: its launcher (process {launcher}) is "
                         f"gone; ending this rank\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    finally:
        os._exit(ABORT_STATUS)


def _watch(world: "World", control: Any) -> None:
    """Wait for peers' notices of leaving; abort when this rank then waits in a collective too long."""
    from mpi4py import MPI

    left: list[int] = []
    while True:
        # polled, not a blocking recv: MPICH's progress engine spins a blocked receive on a whole core,
        # which took a core from every rank's compute for the life of the job (2 ranks on 2 cores: 3x slower)
        while not control.iprobe(source=MPI.ANY_SOURCE, tag=LEFT_TAG):
            time.sleep(POLL_S)
        peer = control.recv(source=MPI.ANY_SOURCE, tag=LEFT_TAG)
        if peer == world.rank:
            return  # this rank is exiting
        left.append(peer)
        while not control.iprobe(source=MPI.ANY_SOURCE, tag=LEFT_TAG):
            what, since = WAITING.what, WAITING.since
            if what is not None and time.monotonic() - since > GRACE_S:
                message = (f"flowjob-mpi: rank {world.rank} of {world.size} has waited in {what} for more than "
                           f"{GRACE_S:g} s after rank(s) {sorted(left)} ended; it can never finish (the ranks ran "
                           f"different steps, or one exited early)\nflowjob-mpi: aborting all {world.size} ranks\n")
                sys.stderr.write(message)
                sys.stderr.flush()
                time.sleep(FORWARD_S)
                world.comm.Abort(ABORT_STATUS)
            time.sleep(0.2)


def _leave(world: "World", control: Any, watchdog: threading.Thread) -> None:
    """At exit: tell every other rank, then stop this rank's watchdog (before MPI is finalized)."""
    for peer in range(world.size):
        if peer != world.rank:
            control.send(world.rank, dest=peer, tag=LEFT_TAG)
    control.send(world.rank, dest=world.rank, tag=LEFT_TAG)
    watchdog.join(timeout=5)
