"""python gpu_all_to_all.py OUT_DIR: layout_cases.py's all-to-all program (a row-split table whose square is
annotated split by columns, 3 steps trained, its results in OUT_DIR) on emulated GPU ranks (flowjob-gpu's emulated
CuPy) with fake_nccl's NCCL; then one step unrecorded counting the host traffic of each all-to-all node's kernel.
Each rank writes account<rank>.json: the backend, the all-to-all nodes of the plan, their host traffic and the
double's call log."""
import json
import os
import runpy
import sys

import fake_nccl

out_dir = sys.argv[1]
fake_nccl.install_emulated(device_count=2)
here = os.path.dirname(os.path.abspath(__file__))
sys.argv = [os.path.join(here, "layout_cases.py"), "alltoall", out_dir]
program = runpy.run_path(sys.argv[0], run_name="__main__")

from flowjob_core.api.function import JobFunction  # noqa: E402
from flowjob_gpu.emulation import host_traffic  # noqa: E402
from flowjob_mpi import world  # noqa: E402

job: JobFunction = program["alltoall_job"]
plan = job.plan()
moved = [n.name for n in plan.job.nodes if n.op == "mpi_all_to_all"]
traffic: dict[str, list[int]] = {}


def counting(fn, name):
    def run(*args):
        with host_traffic.counting() as seen:
            out = fn(*args)
        traffic[name] = [seen.syncs, seen.copies]
        return out
    return run


# the plan's generated step (each kernel called from Python, none replayed), the all-to-all kernels counted
namespace = plan.program.namespace
for call in plan.program.calls:
    if call.node.name in moved:
        namespace[call.kernel] = counting(namespace[call.kernel], call.node.name)
recorded_step, plan.step = plan.step, plan.step.generated
job(program["x"])
plan.step = recorded_step
with open(os.path.join(out_dir, f"account{world().rank}.json"), "w") as f:
    json.dump({"backend": plan.backend.name, "all_to_all": moved, "traffic": traffic, "log": fake_nccl.LOG}, f)
