"""Where a step's time goes: per-node wall time of one benchmark workload's planned step.

    python bench/profile_plan.py lenet_train --steps 20 [--top 25]

Wraps every kernel of the workload's plan with a timer (so it adds ~1 µs per op), runs warm-up
steps, then prints the nodes by median time per step, with the op, the share of the step and the
thread that ran it (``step``: the step's own thread; ``host-N``: a lane on a host thread; the plan's
lanes run independent nodes side by side when ``FLOWJOB_HOST_THREADS`` is above 1). Then the step's
critical path: the longest chain of dependent nodes by their medians, the least a step can take
however many threads run it, and how the plan's sections split the nodes.
Ranges a program marks with ``flow.profiler.nvtx_start`` / ``nvtx_end`` are listed too: each range's nodes
(from its start mark through its end mark, in step order) and the sum of their medians.
On a device the kernels run asynchronously: ``--sync`` waits for each kernel's work, so a node's time is
its device time (the step then runs without overlap); without it a node's time is its launch cost.
Every kernel is timed as launched: on the gpu backend the step is not recorded as CUDA graphs (the script sets
``FLOWJOB_CUDA_GRAPHS=0``: a replayed graph calls no timer, and a wait inside a capture fails it), so the times are
those of the ``flowjob-nographs`` row of ``bench/gpu.py``. ``--emulated`` runs it on the emulated CuPy.
"""
from __future__ import annotations

import argparse
import os
import statistics
import threading
import time
from collections import defaultdict



def profiler_ranges(order: list) -> dict[str, list]:
    """The nodes of each range a program marked (``nvtx_start`` .. ``nvtx_end`` with one ``mark_prefix``), in step
    order; a range still open at the end of the step runs to its end."""
    ranges: dict[str, list] = {}
    open_marks: list[str] = []
    for node in order:
        if node.op == "nvtx_start":
            open_marks.append(node.attrs["mark_prefix"])
            ranges.setdefault(node.attrs["mark_prefix"], [])
        for mark in open_marks:
            ranges[mark].append(node)
        if node.op == "nvtx_end" and node.attrs["mark_prefix"] in open_marks:
            open_marks.remove(node.attrs["mark_prefix"])
    return ranges


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("workload", choices=["mlp_train", "mlp_infer", "lenet_train", "lenet_infer",
                                                     "resnet50_train", "bert_train"])
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--by-op", action="store_true", help="also sum the medians per op type")
    parser.add_argument("--sync", action="store_true", help="wait for each kernel's device work (GPU)")
    parser.add_argument("--big-batch", type=int, default=None, help="ResNet-50's batch (default 16)")
    parser.add_argument("--emulated", action="store_true", help="the gpu backend on the emulated CuPy")
    args = parser.parse_args()
    os.environ["FLOWJOB_CUDA_GRAPHS"] = "0"  # every kernel launched, each through its timer
    if args.emulated:
        os.environ.update(FLOWJOB_GPU_EMULATION="1", FLOWJOB_DEVICE="gpu")
    import models_flowjob
    from flowjob_core.runtime.session import get_default_session

    first_call, step = models_flowjob.build(args.workload, args.batch, big_batch=args.big_batch)
    first_call()
    synchronize = get_default_session().backend.synchronize if args.sync else (lambda: None)
    (function,) = get_default_session().functions.values()
    plan = function.plan()
    # the generated step's namespace, where its kernels are looked up by name (a recorded step keeps it)
    globals_ = getattr(plan.step, "generated", plan.step).__globals__
    samples: dict[str, list[float]] = defaultdict(list)
    labels: dict[str, str] = {}
    ops: dict[str, str] = {}
    ran_on: dict[str, set[str]] = defaultdict(set)
    position: dict[str, int] = {}  # kernel name -> order position
    kernel_nodes = [(p, n) for p, n in enumerate(plan.order) if n.op != "input"]
    step_thread = threading.current_thread().name
    for k, (p, node) in enumerate(kernel_nodes):
        name = f"k{k}"
        labels[name] = f"{node.name} ({node.op})"
        ops[name] = node.op
        position[name] = p

        def timed(*inputs, _fn=globals_[name], _name=name):
            start = time.perf_counter()
            out = _fn(*inputs)
            synchronize()
            samples[_name].append(time.perf_counter() - start)
            thread = threading.current_thread().name
            ran_on[_name].add("step" if thread == step_thread else thread.replace("flowjob-host_", "host-"))
            return out

        globals_[name] = timed
    for _ in range(args.warmup):
        step()
    samples.clear()
    totals = []
    for _ in range(args.steps):
        start = time.perf_counter()
        step()
        totals.append(time.perf_counter() - start)
    step_ms = 1e3 * statistics.median(totals)
    medians = {k: 1e3 * statistics.median(v) for k, v in samples.items()}
    rows = sorted(((ms, labels[k], ",".join(sorted(ran_on[k]))) for k, ms in medians.items()), reverse=True)
    threads = plan.lanes is not None and max(len(s.lanes) for s in plan.lanes.sections)
    print(f"{args.workload}: {step_ms:.2f} ms per step (median of {args.steps}), {len(rows)} kernels, "
          + (f"lanes: up to {threads} side by side" if threads else "one node at a time"))
    for ms, label, thread in rows[: args.top]:
        print(f"{ms:8.2f} ms  {100 * ms / step_ms:5.1f}%  {thread:>8s}  {label}")
    print(f"{sum(ms for ms, _, _ in rows):8.2f} ms  sum of the medians")
    critical_path(plan, medians, position, labels, step_ms)
    by_label = {labels[k]: ms for k, ms in medians.items()}
    ranges = profiler_ranges([node for _, node in kernel_nodes])
    if ranges:
        print("profiler ranges (flow.profiler.nvtx_start .. nvtx_end): total ms, nodes")
        for mark, nodes in ranges.items():
            total = sum(by_label[f"{n.name} ({n.op})"] for n in nodes)
            print(f"{total:8.2f} ms  {100 * total / step_ms:5.1f}%  {len(nodes):4d}  {mark}")
    if args.by_op:
        per_op: dict[str, list[float]] = defaultdict(list)
        for k, v in samples.items():
            per_op[ops[k]].append(1e3 * statistics.median(v))
        print("per op type: total ms, nodes")
        for op, times in sorted(per_op.items(), key=lambda item: -sum(item[1])):
            print(f"{sum(times):8.2f} ms  {100 * sum(times) / step_ms:5.1f}%  {len(times):4d}  {op}")


def critical_path(plan, medians: dict[str, float], position: dict[str, int], labels: dict[str, str],
                  step_ms: float) -> None:
    """The longest chain of dependent nodes by their medians, and the plan's sections."""
    from flowjob_core.plan.planner import order_dependencies
    from flowjob_core.runtime.session import get_default_session
    deps = order_dependencies(plan.job, plan.order, get_default_session().registries)
    cost = [0.0] * len(plan.order)
    label = [""] * len(plan.order)
    for name, p in position.items():
        cost[p], label[p] = medians.get(name, 0.0), labels[name]
    finish = [0.0] * len(plan.order)
    before: list[int | None] = [None] * len(plan.order)
    for p in range(len(plan.order)):  # the order is topological
        start = 0.0
        for d in deps[p]:
            if finish[d] > start:
                start, before[p] = finish[d], d
        finish[p] = start + cost[p]
    end = max(range(len(plan.order)), key=finish.__getitem__)
    path = []
    at: int | None = end
    while at is not None:
        path.append(at)
        at = before[at]
    print(f"critical path: {finish[end]:.2f} ms over {len(path)} nodes ({100 * finish[end] / step_ms:.0f}% of the "
          f"step); its longest nodes:")
    for p in sorted(path, key=lambda q: -cost[q])[:8]:
        print(f"{cost[p]:8.2f} ms  {label[p]}")
    if plan.lanes is not None:
        sections = plan.lanes.sections
        wide = [s for s in sections if s.parallel]
        print(f"sections: {len(sections)}, {len(wide)} with lanes holding "
              f"{sum(s.stop - s.start for s in wide)} of {len(plan.order)} nodes")


if __name__ == "__main__":
    main()
