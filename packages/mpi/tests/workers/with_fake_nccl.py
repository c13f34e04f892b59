"""python with_fake_nccl.py WORKER ARGS...: WORKER (a script beside this one) run with fake_nccl standing
for CuPy and NCCL (FAKE_NCCL_EMULATED=1: for NCCL only, on flowjob-gpu's emulated CuPy); at the end each
rank writes the double's call log to $FAKE_NCCL_LOG/nccl<rank>.json."""
import json
import os
import runpy
import sys

import fake_nccl

if os.environ.get("FAKE_NCCL_EMULATED") == "1":  # GPU ranks on flowjob-gpu's emulated CuPy
    fake_nccl.install_emulated(device_count=int(os.environ.get("FAKE_NCCL_DEVICES", "2")))
else:
    fake_nccl.install(device_count=int(os.environ.get("FAKE_NCCL_DEVICES", "2")))
worker = os.path.join(os.path.dirname(os.path.abspath(__file__)), sys.argv[1])
sys.argv = [worker, *sys.argv[2:]]
runpy.run_path(worker, run_name="__main__")

from flowjob_mpi import world  # noqa: E402 (after the run: its session set the world up)

with open(os.path.join(os.environ["FAKE_NCCL_LOG"], f"nccl{world().rank}.json"), "w") as f:
    json.dump({"log": fake_nccl.LOG}, f)
