"""train.py (same arguments) on the NCCL path, with fake_nccl standing for CuPy and NCCL.

FAKE_NCCL_DEVICES: the devices the double reports (2); FAKE_NCCL_CPU=0: the cpu backend is not
taken for a device one (NCCL then serves no job). Each rank then broadcasts three arrays of its own
(float, int, bool) through the world and writes nccl<rank>.json: the double's call log and the arrays
it ended with.
"""
import json
import os
import runpy
import sys
import threading

import numpy as np

import fake_nccl

fake_nccl.install(device_count=int(os.environ.get("FAKE_NCCL_DEVICES", "2")),
                  cpu=os.environ.get("FAKE_NCCL_CPU", "1") == "1")
here = os.path.dirname(os.path.abspath(__file__))
out_dir = sys.argv[4]
sys.argv = [os.path.join(here, "train.py"), *sys.argv[1:]]
runpy.run_path(sys.argv[0], run_name="__main__")

from flowjob_mpi import nccl, world  # noqa: E402 (after the run: the world was set up by its session)

w = world()
nccl.BCAST_CHUNK_BYTES = 16  # the 40 bytes of the int64 array go in three pieces
probe = threading.Thread(target=lambda: None, name="probe")  # started after the world: takes the rank's device
probe.start()
probe.join()
mine = [np.full((3,), w.rank + 0.5, np.float32), np.arange(5, dtype=np.int64) * (w.rank + 1), np.array([w.rank == 0])]
w.broadcast_arrays(mine)
with open(os.path.join(out_dir, f"nccl{w.rank}.json"), "w") as f:
    json.dump({"log": fake_nccl.LOG, "arrays": [a.tolist() for a in mine], "device": w.nccl and w.nccl.device}, f)
