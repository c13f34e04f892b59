"""python gpu_boxing.py OUT_DIR ACCOUNTED STEPS: the documentation's hybrid-parallel MLP (hybrid_parallel_mlp.py,
STEPS steps, its results in OUT_DIR) on emulated GPU ranks (flowjob-gpu's emulated CuPy), with fake_nccl's NCCL
where it runs on several ranks (GPU_BOXING=mpi: none, the world boxes with MPI on host copies; GPU_BOXING=device:
real CuPy and NCCL on the machine's devices, no emulation, no double); then ACCOUNTED more
steps counted by flowjob_gpu.step_accounting (recorded or not, graphs, live nodes, host synchronizations and
copies per step), then one step unrecorded counting the host traffic of each boxing node's kernel. Each rank
writes account<rank>.json: the counts, the boxing nodes of the plan and the double's call log.
"""
import json
import os
import runpy
import sys

import numpy as np

import fake_nccl

out_dir, accounted, steps = sys.argv[1], int(sys.argv[2]), sys.argv[3]
mode = os.environ.get("GPU_BOXING", "double")
if mode != "device":
    os.environ["FLOWJOB_GPU_EMULATION"] = "1"
if mode == "double":
    fake_nccl.install_emulated(device_count=2)
here = os.path.dirname(os.path.abspath(__file__))
sys.argv = [os.path.join(here, "hybrid_parallel_mlp.py"), steps, out_dir]
program = runpy.run_path(sys.argv[0], run_name="__main__")

from flowjob_core.api.function import JobFunction  # noqa: E402
from flowjob_gpu.emulation import host_traffic  # noqa: E402
from flowjob_gpu.step_accounting import account  # noqa: E402
from flowjob_mpi import world  # noqa: E402

train_job: JobFunction = program["train_job"]
rng = np.random.default_rng(3)
images = rng.standard_normal((program["BATCH_SIZE"], 1, 4, 4)).astype(np.float32)
labels = rng.integers(0, 10, program["BATCH_SIZE"]).astype(np.int32)
counted = account(train_job, lambda: train_job(images, labels), steps=accounted, warm=0)
plan = train_job.plan()
# the boxing ops, and the softmax over the split class axis, whose three reductions are collectives too
BOXING = ("mpi_allgather", "mpi_reduce_scatter", "mpi_allreduce", "mpi_all_to_all",
          "mpi_sparse_softmax_cross_entropy_class_split")
boxing = [f"{n.name} ({n.op})" for n in plan.job.nodes if n.op in BOXING]

# one more step through the plan's generated step (each kernel called from Python, none replayed), with the host
# traffic of each boxing node's kernel counted by the emulated device's gates
traffic: dict[str, list[int]] = {}


def counting(fn, name):
    def run(*args):
        with host_traffic.counting() as seen:
            out = fn(*args)
        traffic[name] = [seen.syncs, seen.copies]
        return out
    return run


namespace = plan.program.namespace
for call in plan.program.calls:
    if f"{call.node.name} ({call.node.op})" in boxing:
        namespace[call.kernel] = counting(namespace[call.kernel], call.node.name)
recorded_step, plan.step = plan.step, plan.step.generated
train_job(images, labels)
plan.step = recorded_step
with open(os.path.join(out_dir, f"account{world().rank}.json"), "w") as f:
    json.dump({"account": counted.as_dict(), "backend": plan.backend.name, "boxing": boxing, "traffic": traffic,
               "log": fake_nccl.LOG}, f)
