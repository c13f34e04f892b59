"""Executor overhead: a job chaining 200 cheap elementwise ops on a small array.

Reports, per op per step, the time flowjob takes, the time the same numpy calls take in a
bare Python loop, and the difference (flowjob's overhead); plus the first call's trace and
plan time. Run: python bench/bench_overhead.py [--ops 200] [--steps 2000]
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import oneflow as flow
import oneflow.typing as tp


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=200)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--size", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    shape = (args.size,)

    @flow.global_function()
    def chain(x: tp.Numpy.Placeholder(shape)) -> tp.Numpy:
        for _ in range(args.ops):
            x = flow.nn.relu(x)
        return x

    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    t0 = time.perf_counter()
    chain(x)
    first_call = time.perf_counter() - t0

    def flowjob_round() -> float:
        t = time.perf_counter()
        for _ in range(args.steps):
            chain(x)
        return (time.perf_counter() - t) / args.steps

    bufs = [np.empty(shape, np.float32) for _ in range(2)]

    def numpy_round() -> float:
        t = time.perf_counter()
        for _ in range(args.steps):
            y = np.array(x, copy=True)  # the input copy flowjob makes at call time
            for i in range(args.ops):
                y = np.maximum(y, 0, out=bufs[i % 2])
            y = y.copy()  # the result copy
        return (time.perf_counter() - t) / args.steps

    flow_times, numpy_times = [], []
    for _ in range(args.rounds):  # interleaved rounds: drift affects both alike
        flow_times.append(flowjob_round())
        numpy_times.append(numpy_round())
    f, n = statistics.median(flow_times), statistics.median(numpy_times)
    per = 1e6 / args.ops
    print(f"{args.ops} relu ops on {shape} float32, {args.steps} steps x {args.rounds} rounds (medians)")
    print(f"  flowjob step         {f * 1e6:9.1f} us   {f * per:6.2f} us/op")
    print(f"  bare numpy loop      {n * 1e6:9.1f} us   {n * per:6.2f} us/op")
    print(f"  executor overhead    {(f - n) * 1e6:9.1f} us   {(f - n) * per:6.2f} us/op")
    print(f"  first call (trace + passes + plan + step): {first_call * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
