"""Legacy v0.4's ``flow.autograd.backward`` and ``flow.autograd.grad`` on eager tensors.

Both run ``flowjob_core.imperative.backprop.gradients``. A tensor here is anything with the eager tensor's
protocol (``_value``, ``_segment``, ``_lbn``, ``requires_grad``, ``_retains_grad``, ``_accumulate_grad``,
``_result``): ``flowjob_core.imperative.tensor.Tensor``, which imports this module for its ``backward``.
"""
from __future__ import annotations

from typing import Any

from flowjob_core.errors import FlowjobError, ShapeError
from flowjob_core.imperative import backprop
from flowjob_core.runtime.session import get_default_session


def _tensors(value: Any, what: str, allow_none: bool = False) -> list[Any]:
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    for i, item in enumerate(items):
        if item is None and allow_none:
            continue
        if not hasattr(item, "_segment"):
            raise TypeError(f"{what}[{i}] is {type(item).__name__}, expected a flow.Tensor")
    return items


def _seeds(outputs: list[Any], out_grads: Any, what: str) -> list[Any]:
    """One seed array per output: the given gradient, or None (ones) for a one-element output."""
    given = [None] * len(outputs) if out_grads is None else _tensors(out_grads, f"{what} out_grads", True)
    if len(given) != len(outputs):
        raise FlowjobError(f"{what}: {len(given)} out_grads for {len(outputs)} outputs")
    seeds: list[Any] = []
    for i, (out, grad) in enumerate(zip(outputs, given)):
        if grad is None:
            if out.numel() != 1:
                raise ShapeError(f"{what}: output {i} has shape {tuple(out.shape)}; a gradient is implied only "
                                 f"for a one-element output: pass the output's gradient (out_grads, or "
                                 f"tensor.backward(gradient))")
            seeds.append(None)
            continue
        if tuple(grad.shape) != tuple(out.shape) or grad.dtype != out.dtype:
            raise ShapeError(f"{what}: the gradient of output {i} is {tuple(grad.shape)} {grad.dtype}, the output "
                             f"is {tuple(out.shape)} {out.dtype}")
        seeds.append(grad._value)
    return seeds


def _check(outputs: list[Any], create_graph: bool, what: str) -> None:
    if create_graph:
        raise NotImplementedError(f"{what}(create_graph=True): gradients of gradients are not supported by "
                                  f"flowjob's eager tensors (a @flow.global_function job differentiates once too)")
    for i, out in enumerate(outputs):
        if not out.requires_grad:
            raise FlowjobError(f"{what}: output {i} (shape {tuple(out.shape)}) does not require a gradient: no "
                               f"tensor it was computed from has requires_grad=True")


def backward(outputs: Any, out_grads: Any = None, retain_graph: bool = False, create_graph: bool = False) -> None:
    """Legacy ``flow.autograd.backward``: add the gradient of ``outputs`` (weighted by ``out_grads``; implied
    ones for a one-element output) to the ``.grad`` of every leaf that requires one and of every tensor that
    called ``retain_grad()``. Without ``retain_graph`` the values kept for the pass are freed, and a second
    pass through the same operations is an error."""
    outs = _tensors(outputs, "autograd.backward outputs")
    _check(outs, create_graph, "autograd.backward")
    seeds = _seeds(outs, out_grads, "autograd.backward")
    targets = backprop.sources(outs)
    grads = backprop.gradients(get_default_session(), outs, seeds, targets, retain_graph)
    for tensor, grad in zip(targets, grads):
        if grad is not None:
            tensor._accumulate_grad(grad)


def grad(outputs: Any, inputs: Any, out_grads: Any = None, retain_graph: bool = False,
         create_graph: bool = False) -> tuple[Any, ...]:
    """Legacy ``flow.autograd.grad``: the gradients of ``outputs`` with respect to ``inputs`` (a tuple of
    tensors, one per input), leaving every ``.grad`` as it is."""
    outs = _tensors(outputs, "autograd.grad outputs")
    wanted = _tensors(inputs, "autograd.grad inputs")
    _check(outs, create_graph, "autograd.grad")
    for i, tensor in enumerate(wanted):
        if not tensor.requires_grad:
            raise FlowjobError(f"autograd.grad: input {i} (shape {tuple(tensor.shape)}) does not require a gradient")
    seeds = _seeds(outs, out_grads, "autograd.grad")
    grads = backprop.gradients(get_default_session(), outs, seeds, wanted, retain_graph)
    missing = [i for i, g in enumerate(grads) if g is None]
    if missing:
        raise FlowjobError(f"autograd.grad: inputs {missing} are not used to compute the outputs (no gradient "
                           f"reaches them)")
    return tuple(tensor._result(g) for tensor, g in zip(wanted, grads))


__all__ = ["backward", "grad"]
