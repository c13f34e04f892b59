"""Per-op cost of a recorded step on the GPU: a job chaining cheap unfused ops on a small device array, its step
time per op with the step replayed as CUDA graphs and with every kernel launched, in one process.

Run on a GPU machine: ``python bench/graph_overhead.py [--ops 200] [--steps 300]`` (``--emulated`` runs it on
flowjob-gpu's emulated CuPy, to try the script without a device; its figures mean nothing). The aim: a recorded
step costs under 2 µs an op.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=200)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--emulated", action="store_true")
    args = parser.parse_args()
    os.environ["FLOWJOB_FUSION"] = "0"  # one kernel an op: the chain would otherwise be one fused kernel
    os.environ["FLOWJOB_DEVICE"] = "gpu"
    if args.emulated:
        os.environ["FLOWJOB_GPU_EMULATION"] = "1"
    import numpy as np

    import oneflow as flow
    import oneflow.typing as tp
    from flowjob_gpu.step_graphs import GraphedStep

    shape = (args.size,)
    x = np.linspace(0, 1, args.size, dtype=np.float32)
    per_op: dict[str, float] = {}
    for label, graphs in (("graphs", "1"), ("launches", "0")):
        os.environ["FLOWJOB_CUDA_GRAPHS"] = graphs
        flow.clear_default_session()

        @flow.global_function()
        def chain(x: tp.Numpy.Placeholder(shape)) -> tp.Numpy:
            for _ in range(args.ops // 2):
                x = flow.math.sqrt(x * 0.5 + 0.25)
            return x

        for _ in range(3):  # warm-up and recording
            chain(x)
        if (graphs == "1") != isinstance(chain.plan().step, GraphedStep):
            sys.exit(f"{label}: the plan's step is {type(chain.plan().step).__name__}")
        times = []
        for _ in range(args.steps):
            start = time.perf_counter()
            chain(x)
            times.append(time.perf_counter() - start)
        ops = len(chain.plan().order)
        per_op[label] = statistics.median(times) / ops * 1e6
        print(f"{label:9s}: {ops} ops, median step {statistics.median(times) * 1e3:8.3f} ms, "
              f"{per_op[label]:6.2f} us an op", flush=True)
    print(f"recorded / launched per op: {per_op['graphs'] / per_op['launches']:.2f}x (aim: under 2 us an op recorded)")


if __name__ == "__main__":
    main()
