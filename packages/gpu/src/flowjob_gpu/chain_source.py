"""The CUDA source of an ``elementwise_chain`` node: one CuPy ``ElementwiseKernel`` for the whole chain.

The source comes from the steps' ``Elementwise`` descriptors (the records the numpy kernel and the
fusion pass run) and ``c_expressions``' template of each descriptor's ufunc. Each step is the call
the xp kernel makes, ``ufunc(operands..., out=out)``, written as one C assignment to the running
value ``v``, which has the output's element type: a float16 chain computes each step in float and
rounds to half after it, as numpy's float16 loops do. A number operand (``scalar_mul``'s scalar,
relu's fixed 0) is a kernel parameter ``c<step>`` of the blob operand's dtype, as the numpy kernel's
constant is, so chains that differ only in their numbers share one compiled kernel.

No CuPy and no device are needed here: ``python -m oneflow dump --cuda`` prints these sources on
any machine. A chain the templates do not cover (a ufunc without one, an integer or complex dtype)
gets a reason instead, and keeps the xp kernel.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from flowjob_gpu.c_expressions import C_TYPES, TEMPLATES

CHAIN_OP = "elementwise_chain"
RUNNING = -1  # in a step's args: the running value (flowjob_ops' elementwise_chain convention)
VALUE = "v"  # the running value's C name


@dataclass(frozen=True)
class ChainSource:
    """One ``cupy.ElementwiseKernel``'s arguments; equal sources are equal signatures (the cache key)."""

    name: str
    in_params: str
    out_params: str
    operation: str

    def text(self) -> str:
        """The source as ``dump --cuda`` prints it: the parameters, then the loop body CuPy compiles."""
        return (f"// cupy.ElementwiseKernel {self.name}\n// in:  {self.in_params}\n// out: {self.out_params}\n"
                f"{self.operation}")


@dataclass(frozen=True)
class ChainKernel:
    """What the gpu backend runs for one chain: ``source`` and the values of its number parameters
    (numpy scalars, in parameter order), or ``source`` None and the ``reason`` it keeps the xp kernel."""

    source: ChainSource | None
    constants: tuple[Any, ...] = ()
    reason: str = ""


def chain_kernel(steps: Sequence[tuple[str, dict, Sequence[int]]], inputs: Sequence[Any], output: Any,
                 records: Any) -> ChainKernel:
    """The kernel for a chain with attribute ``steps``, input dtypes ``inputs`` and output dtype
    ``output``; ``records`` finds each step op's record (``ops[name].elementwise``)."""
    in_dtypes = [np.dtype(d).name for d in inputs]
    out_dtype = np.dtype(output).name
    lines: list[str] = []
    constants: list[tuple[str, Any]] = []  # (parameter, value)
    summary: list[str] = []
    for k, (op, attrs, args) in enumerate(steps):
        descriptor = records[op].elementwise
        if descriptor is None:
            return ChainKernel(None, reason=f"step {k} ({op}) has no Elementwise descriptor")
        where = f"step {k} ({op}, ufunc {descriptor.ufunc})"
        template = TEMPLATES.get(descriptor.ufunc)
        if template is None:
            return ChainKernel(None, reason=f"{where}: no C template for ufunc {descriptor.ufunc!r}")
        blob_dtypes = {out_dtype if i == RUNNING else in_dtypes[i] for i in args}
        if len(blob_dtypes) != 1:
            return ChainKernel(None, reason=f"{where}: operands of dtypes {sorted(blob_dtypes)}")
        (dtype,) = blob_dtypes
        ctype = C_TYPES.get(dtype)
        if ctype is None or ctype.kind not in template.kinds:
            return ChainKernel(None, reason=f"{where}: {dtype} operands (generated kernels compute in float16, "
                                            f"float32 and float64, and compare bools)")
        result = "bool" if template.predicate else dtype
        if result != out_dtype:
            return ChainKernel(None, reason=f"{where}: a {result} result in a {out_dtype} chain")
        names = [VALUE if i == RUNNING else f"x{i}" for i in args]
        constant = descriptor.constant(attrs, dtype)
        if constant is not None:
            names = descriptor.operands(names, f"c{k}")
            constants.append((f"c{k}", constant))
        operands = [n if ctype.storage == ctype.compute else f"{ctype.compute}({n})" for n in names]
        value = template.expression(ctype, operands)
        if not template.predicate and ctype.storage != ctype.compute:
            value = f"{ctype.storage}({value})"  # float16: rounds to half once per step, as numpy's half loops do
        lines.append(f"{C_TYPES[out_dtype].storage} {VALUE} = {value};" if k == 0 else f"{VALUE} = {value};")
        summary.append(f"{descriptor.ufunc}({', '.join(names)})")
    lines.append(f"out = {VALUE};")
    in_params = [f"{dtype} x{i}" for i, dtype in enumerate(in_dtypes)]
    in_params += [f"{number.dtype.name} {name}" for name, number in constants]
    operation = "\n".join([f"// {' -> '.join(summary)}", *lines])
    signature = "|".join([", ".join(in_params), out_dtype, operation])
    name = "flowjob_chain_" + hashlib.sha256(signature.encode()).hexdigest()[:16]
    source = ChainSource(name, ", ".join(in_params), f"{out_dtype} out", operation)
    return ChainKernel(source, tuple(number for _, number in constants))


def job_chain_kernels(job: Any, records: Any) -> list[tuple[str, ChainKernel]]:
    """(node name, kernel) of each ``elementwise_chain`` node of ``job`` (a ``flowjob_core`` Job), in job
    order: what the gpu backend would launch for it, found without CuPy."""
    return [(node.name, chain_kernel(node.attrs["steps"], [job.specs[i].dtype for i in node.inputs],
                                     job.specs[node.outputs[0]].dtype, records))
            for node in job.nodes if node.op == CHAIN_OP]
