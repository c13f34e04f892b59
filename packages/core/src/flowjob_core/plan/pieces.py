"""A plan's straight-line step as data, and its split into pieces for a backend that records steps.

A backend that records a step once and replays it (the gpu backend's CUDA graphs) cannot record a node whose
kernel works on the host each call: a learning rate evaluated in Python, a random stream drawn on the host, a
value read back from the device, a side effect. ``StepProgram`` lists the step's kernel calls in order, each
marked live or not (``flowjob_core.ir.kernel.runs_live``); ``split`` cuts the program at the live calls into
``Piece``s, each
a generated function ``piece(env)`` that reads the values it needs from the dict ``env`` (feeds and values
of earlier pieces, by variable name) and writes there the values later pieces or the step's results read.
A recorder records the pieces that are not live and runs the live ones every step.

The pieces' source is registered with ``linecache`` and each line's node is in ``Piece.lines``, so a failing
kernel is named (``Plan`` reads ``Plan.piece_lines`` when it reports a step error).
"""
from __future__ import annotations

import linecache
from dataclasses import dataclass, field
from typing import Any, Callable

from flowjob_core.ir.job import Node


@dataclass(frozen=True)
class StepCall:
    """One kernel call of the step: ``outputs = kernel(inputs)`` with values by variable name."""

    node: Node
    kernel: str  # its name in the plan's namespace (the output check rebinds it after the first call)
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    live: bool  # runs on the host each step: never recorded

    def statement(self) -> str:
        call = f"{self.kernel}({', '.join(self.inputs)})"
        return f"{', '.join(self.outputs)} = {call}" if self.outputs else call


@dataclass
class StepProgram:
    """The step of a plan whose nodes run one at a time: its calls in order, what it is fed and what it returns."""

    job_name: str
    namespace: dict[str, Any]  # the kernels by name, shared with the plan's generated step
    calls: list[StepCall]
    feeds: tuple[str, ...]
    returns: tuple[str, ...]
    sides: tuple[str, ...]
    piece_lines: dict[str, dict[int, Node]] = field(default_factory=dict)  # filename -> line -> node, all splits


@dataclass(frozen=True)
class Piece:
    """Consecutive calls of one kind: ``run(env)`` makes them, reading and writing values in ``env``."""

    live: bool
    start: int  # the position of its first call in the program
    calls: tuple[StepCall, ...]
    run: Callable[[dict[str, Any]], None]
    reads: tuple[str, ...]  # values it takes from env (made before it, or fed)
    writes: tuple[str, ...]  # values it puts in env (read after it, or results)


def split(program: StepProgram, live: set[int] | None = None, label: str = "pieces",
          cuts: set[int] | None = None) -> list[Piece]:
    """The program cut into pieces at its live calls; ``live`` adds call positions to run live (found so by a
    recorder that failed to record them), ``cuts`` positions where a piece must start. Consecutive live calls
    form one piece, as do consecutive others."""
    live, cuts = live or set(), cuts or set()
    runs: list[tuple[bool, int, list[StepCall]]] = []
    for position, call in enumerate(program.calls):
        is_live = call.live or position in live
        if runs and runs[-1][0] == is_live and position not in cuts:
            runs[-1][2].append(call)
        else:
            runs.append((is_live, position, [call]))
    later_reads: list[set[str]] = []  # per run: what the runs after it and the results read
    needed = set(program.returns) | set(program.sides)
    for _, _, calls in reversed(runs):
        later_reads.append(set(needed))
        for call in calls:
            needed.update(call.inputs)
    later_reads.reverse()
    filename = f"<flowjob {label} {program.job_name} {id(program):x} {len(program.piece_lines)}>"
    lines: list[str] = []
    line_nodes: dict[int, Node] = {}
    shapes: list[tuple[bool, int, tuple[StepCall, ...], tuple[str, ...], tuple[str, ...]]] = []
    for number, ((is_live, start, calls), after) in enumerate(zip(runs, later_reads)):
        made: set[str] = set()
        reads: list[str] = []
        for call in calls:
            reads.extend(v for v in call.inputs if v not in made and v not in reads)
            made.update(call.outputs)
        writes = tuple(sorted(made & after))
        lines.append(f"def piece{number}(env):")
        lines.extend(f"    {v} = env[{v!r}]" for v in reads)
        for call in calls:
            lines.append(f"    {call.statement()}")
            line_nodes[len(lines)] = call.node
        lines.extend(f"    env[{v!r}] = {v}" for v in writes)
        lines.append("    return None")
        shapes.append((is_live, start, tuple(calls), tuple(reads), writes))
    source = "\n".join(lines) + "\n"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = program.namespace
    exec(compile(source, filename, "exec"), namespace)
    program.piece_lines[filename] = line_nodes
    return [Piece(is_live, start, calls, namespace.pop(f"piece{number}"), reads, writes)
            for number, (is_live, start, calls, reads, writes) in enumerate(shapes)]


def failing_node(program: StepProgram, exc: BaseException) -> Node | None:
    """The node whose kernel raised ``exc`` inside a piece of ``program`` (the innermost piece frame), if any."""
    node = None
    tb = exc.__traceback__
    while tb is not None:
        lines = program.piece_lines.get(tb.tb_frame.f_code.co_filename)
        if lines is not None:
            node = lines.get(tb.tb_lineno, node)
        tb = tb.tb_next
    return node
