"""python orphan.py DIR: each rank writes its process id and its parent's to DIR/rank<N>.pid; rank 0 then waits in
a collective that rank 1, asleep, never joins (until its launcher is killed under them)."""
import os
import sys
import time
from pathlib import Path

from flowjob_mpi import world

w = world()
pid_file = Path(sys.argv[1]) / f"rank{w.rank}.pid"
pid_file.with_suffix(".tmp").write_text(f"{os.getpid()} {os.getppid()}")
pid_file.with_suffix(".tmp").rename(pid_file)
if w.rank == 0:
    w.comm.barrier()
else:
    time.sleep(120)
