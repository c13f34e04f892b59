"""One benchmark run in its own process: ``python bench/worker.py SYSTEM WORKLOAD [--steps N] [--device gpu]``.

Prints one JSON line: the first call's time, per-step median and p10/p90 in ms after
warm-up, the process's peak resident memory and, on a GPU, its peak device memory over every pool and,
for flowjob, how its step ran (``step``: recorded or not, graphs and live pieces a step, the live nodes, host
synchronizations and copies a step where counted: flowjob_gpu.step_accounting). ``FLOWJOB_GPU_EMULATION=1``
runs flowjob's ``--device gpu`` on the emulated CuPy (to try the script; its times mean nothing).
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import pathlib
import resource
import statistics
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).parent))

STEPS = {"mlp_train": 300, "mlp_infer": 300, "lenet_train": 40, "lenet_infer": 60, "lenet_epoch": 600,
         "resnet50_train": 3, "bert_train": 10}
WARMUP = {"resnet50_train": 2}


def peak_device_mb(system: str) -> float:
    """Device memory at its peak: torch's allocator's high-water mark; for flowjob (CuPy) the bytes its
    memory pools hold, which they keep at the high-water mark of what the steps asked for: the default pool
    and every recorded step's graph pool (flowjob_gpu.step_accounting.peak_pool_bytes)."""
    if system == "torch":
        import torch
        return torch.cuda.max_memory_allocated() / 2**20
    from flowjob_core.runtime.session import get_default_session
    from flowjob_gpu.step_accounting import peak_pool_bytes
    session = get_default_session()
    steps = [function.plan().step for function in session.functions.values()]
    return peak_pool_bytes(session.backend.xp, steps) / 2**20


def step_account(step) -> dict:
    """How the gpu backend ran the timed job's step: recorded or not, graphs and live pieces a call, the live
    nodes, and (on the emulated device, counted over two more calls) host synchronizations and copies a call."""
    from flowjob_core.runtime.session import get_default_session
    from flowjob_gpu.step_accounting import account
    (function,) = get_default_session().functions.values()
    return account(function, step, steps=2, warm=0).as_dict()


def convolution_paths() -> dict:
    """Which path the timed job's convolution nodes took on the gpu backend (flowjob_gpu.cudnn_convolution):
    how many ran on cuDNN, how many on im2col + cuBLAS, and why the first of those did."""
    from flowjob_core.runtime.session import get_default_session
    from flowjob_gpu.cudnn_convolution import CUDNN, KINDS, paths
    (function,) = get_default_session().functions.values()
    plan = function.plan()
    chosen = paths(plan.shared)
    unchosen = "the record's kernel: no cuDNN override is registered (the emulated device has none)"
    ran = [chosen.get(node.name, unchosen) for node in plan.order if node.op in KINDS]
    fallbacks = [path for path in ran if path != CUDNN]
    return {"nodes": len(ran), "cudnn": len(ran) - len(fallbacks), "im2col": len(fallbacks),
            "why": fallbacks[0].split(": ", 1)[-1] if fallbacks else None}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("system", choices=["flowjob", "torch"])
    parser.add_argument("workload", choices=sorted(STEPS))
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--warmup", type=int, default=None)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--big-batch", type=int, default=None, help="ResNet-50's batch (default 16)")
    parser.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    args = parser.parse_args()
    if args.system == "flowjob" and args.device == "gpu":
        os.environ["FLOWJOB_DEVICE"] = "gpu"  # an unknown tag is an error: never a silent CPU run
    module = importlib.import_module(f"models_{args.system}")
    options: dict = {} if args.big_batch is None else {"big_batch": args.big_batch}
    if args.system == "torch":
        options["device"] = "cuda" if args.device == "gpu" else "cpu"

    t0 = time.perf_counter()
    first_call, step = module.build(args.workload, args.batch, **options)
    first_call()
    first = time.perf_counter() - t0
    for _ in range(WARMUP.get(args.workload, 5) if args.warmup is None else args.warmup):
        step()
    steps = args.steps or STEPS[args.workload]
    times = []
    for _ in range(steps):
        t = time.perf_counter()
        step()
        times.append(time.perf_counter() - t)
    times.sort()
    result = {
        "system": args.system, "workload": args.workload, "steps": steps,
        "first_call_s": first,
        "median_ms": 1e3 * statistics.median(times),
        "p10_ms": 1e3 * times[len(times) // 10], "p90_ms": 1e3 * times[(9 * len(times)) // 10],
        "total_s": sum(times),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
    if args.system == "flowjob":
        import oneflow as flow
        flow.sync_default_session()
    if args.device == "gpu":
        result["peak_device_mb"] = peak_device_mb(args.system)
        if args.system == "flowjob":
            result["step"] = step_account(step)
            result["convolutions"] = convolution_paths()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
