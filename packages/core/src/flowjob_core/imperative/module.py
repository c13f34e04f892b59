"""Legacy v0.4's ``flow.nn.Module``: a tree of modules holding parameters and buffers, called eagerly.

Attributes that are parameters, buffers or modules are registered as they are assigned; ``state_dict`` maps
dotted names to their values and ``load_state_dict`` copies values back, checking names and shapes.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable, Iterator, NamedTuple, TypeVar

import numpy as np

from flowjob_core.imperative.parameter import Parameter
from flowjob_core.imperative.tensor import Tensor

M = TypeVar("M", bound="Module")


class IncompatibleKeys(NamedTuple):
    """What ``load_state_dict(strict=False)`` could not match."""

    missing_keys: list[str]
    unexpected_keys: list[str]


def _check_name(kind: str, name: Any, owner: "Module", table: dict[str, Any]) -> None:
    if not isinstance(name, str):
        raise TypeError(f"{kind} name should be a string, got {type(name).__name__}")
    if "." in name or not name:
        raise KeyError(f"{kind} name {name!r} may not be empty or contain '.'")
    if hasattr(owner, name) and name not in table:
        raise KeyError(f"attribute {name!r} already exists")


class Module:
    """Subclass it, assign parameters and submodules in ``__init__`` (after ``super().__init__()``) and
    write ``forward``; calling the module calls ``forward``."""

    def __init__(self) -> None:
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent_buffers", set())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "_forward_pre_hooks", OrderedDict())

    consistent = property(lambda self: False)

    def forward(self, *args: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} defines no forward()")

    def __call__(self, *args: Any) -> Any:
        for hook in self._forward_pre_hooks.values():
            changed = hook(self, args)
            if changed is not None:
                args = changed if isinstance(changed, tuple) else (changed,)
        return self.forward(*args)

    def register_forward_pre_hook(self, hook: Callable[..., Any]) -> None:
        """``hook(module, args)`` runs before ``forward``; a value it returns replaces the arguments."""
        self._forward_pre_hooks[len(self._forward_pre_hooks)] = hook

    # registration -------------------------------------------------------------------------------------------
    def _initialized(self, what: str) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"cannot assign {what} before Module.__init__() call")

    def add_module(self, name: str, module: "Module | None") -> None:
        self._initialized("a module")
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a flow.nn.Module subclass")
        _check_name("module", name, self, self._modules)
        self._modules[name] = module

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        self._initialized("parameters")
        _check_name("parameter", name, self, self._parameters)
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign {type(param).__name__} to parameter {name!r} (flow.nn.Parameter or "
                            f"None required)")
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        self._initialized("buffers")
        _check_name("buffer", name, self, self._buffers)
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign {type(tensor).__name__} to buffer {name!r} (flow.Tensor or None required)")
        self._buffers[name] = tensor
        (self._non_persistent_buffers.discard if persistent else self._non_persistent_buffers.add)(name)

    def __getattr__(self, name: str) -> Any:
        for table in ("_parameters", "_buffers", "_modules"):
            entries = self.__dict__.get(table)
            if entries is not None and name in entries:
                return entries[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __setattr__(self, name: str, value: Any) -> None:
        params, buffers, modules = (self.__dict__.get(t) for t in ("_parameters", "_buffers", "_modules"))
        if isinstance(value, Parameter):
            self._initialized("parameters")
            self._forget(name)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign {type(value).__name__} as parameter {name!r} (flow.nn.Parameter "
                                f"or None expected)")
            params[name] = None
        elif isinstance(value, Module):
            self._initialized("a module")
            self._forget(name)
            modules[name] = value  # type: ignore[index]
        elif modules is not None and name in modules:
            if value is not None:
                raise TypeError(f"cannot assign {type(value).__name__} as child module {name!r} (flow.nn.Module or "
                                f"None expected)")
            modules[name] = None
        elif buffers is not None and name in buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign {type(value).__name__} as buffer {name!r} (flow.Tensor or None "
                                f"expected)")
            buffers[name] = value
        else:
            object.__setattr__(self, name, value)

    def _forget(self, name: str) -> None:
        self.__dict__.pop(name, None)
        for table in (self._parameters, self._buffers, self._modules):
            table.pop(name, None)
        self._non_persistent_buffers.discard(name)

    def __delattr__(self, name: str) -> None:
        for table in (self._parameters, self._buffers, self._modules):
            if name in table:
                del table[name]
                self._non_persistent_buffers.discard(name)
                return
        object.__delattr__(self, name)

    # traversal ------------------------------------------------------------------------------------------------
    def named_modules(self, memo: set["Module"] | None = None, prefix: str = "") -> Iterator[tuple[str, "Module"]]:
        memo = set() if memo is None else memo
        if self in memo:
            return
        memo.add(self)
        yield prefix, self
        for name, module in self._modules.items():
            if module is not None:
                yield from module.named_modules(memo, f"{prefix}.{name}" if prefix else name)

    def modules(self) -> Iterator["Module"]:
        for _, module in self.named_modules():
            yield module

    def named_children(self) -> Iterator[tuple[str, "Module"]]:
        seen: set[Module] = set()
        for name, module in self._modules.items():
            if module is not None and module not in seen:
                seen.add(module)
                yield name, module

    def children(self) -> Iterator["Module"]:
        for _, module in self.named_children():
            yield module

    def _named_members(self, table: str, prefix: str, recurse: bool) -> Iterator[tuple[str, Any]]:
        seen: set[int] = set()
        owners = self.named_modules(prefix=prefix) if recurse else iter([(prefix, self)])
        for owner_prefix, owner in owners:
            for name, value in getattr(owner, table).items():
                if value is None or id(value) in seen:
                    continue
                seen.add(id(value))
                yield (f"{owner_prefix}.{name}" if owner_prefix else name), value

    def named_parameters(self, prefix: str = "", recurse: bool = True) -> Iterator[tuple[str, Parameter]]:
        yield from self._named_members("_parameters", prefix, recurse)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        for _, param in self.named_parameters(recurse=recurse):
            yield param

    def named_buffers(self, prefix: str = "", recurse: bool = True) -> Iterator[tuple[str, Tensor]]:
        yield from self._named_members("_buffers", prefix, recurse)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, buffer in self.named_buffers(recurse=recurse):
            yield buffer

    def train(self: M, mode: bool = True) -> M:
        object.__setattr__(self, "training", bool(mode))
        for module in self.children():
            module.train(mode)
        return self

    def eval(self: M) -> M:
        return self.train(False)

    def apply(self: M, fn: Callable[["Module"], Any]) -> M:
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    def _apply(self: M, fn: Callable[[Tensor], Tensor]) -> M:
        for module in self.children():
            module._apply(fn)
        for name, param in self._parameters.items():
            if param is not None:
                moved = Parameter(fn(param.detach()), param.requires_grad)
                if param.grad is not None:
                    moved.grad = fn(param.grad)
                self._parameters[name] = moved
        for name, buffer in self._buffers.items():
            if buffer is not None:
                self._buffers[name] = fn(buffer)
        return self

    def to(self: M, device: Any = None) -> M:
        """The module with every parameter and buffer on ``device`` (this session's backend only)."""
        return self._apply(lambda t: t.to(device))

    # state ------------------------------------------------------------------------------------------------------
    def _local_state(self) -> dict[str, Tensor]:
        state: dict[str, Tensor] = {k: v for k, v in self._parameters.items() if v is not None}
        state.update((k, v) for k, v in self._buffers.items()
                     if v is not None and k not in self._non_persistent_buffers)
        return state

    def state_dict(self, destination: "OrderedDict[str, Tensor] | None" = None, prefix: str = "",
                   keep_vars: bool = False) -> "OrderedDict[str, Tensor]":
        """Dotted name -> every parameter and persistent buffer, the tensors themselves as in legacy (so they
        show later updates; ``keep_vars`` is accepted for PyTorch-style calls and changes nothing)."""
        destination = OrderedDict() if destination is None else destination
        for name, value in self._local_state().items():
            destination[prefix + name] = value
        for name, module in self._modules.items():
            if module is not None:
                module.state_dict(destination, f"{prefix}{name}.", keep_vars)
        return destination

    def load_state_dict(self, state_dict: dict[str, Any], strict: bool = True) -> IncompatibleKeys:
        """Copy values (tensors or arrays) into the parameters and buffers of the same dotted names; names
        missing or unexpected are an error when ``strict``, as is a shape that differs."""
        mine: dict[str, Tensor] = {}
        for prefix, module in self.named_modules():
            dotted = f"{prefix}." if prefix else ""
            mine.update((dotted + name, value) for name, value in module._local_state().items())
        missing = [key for key in mine if key not in state_dict]
        unexpected = [key for key in state_dict if key not in mine]
        errors: list[str] = []
        if strict and unexpected:
            errors.append(f"unexpected key(s) in state_dict: {', '.join(map(repr, unexpected))}")
        if strict and missing:
            errors.append(f"missing key(s) in state_dict: {', '.join(map(repr, missing))}")
        for key, target in mine.items():
            if key not in state_dict:
                continue
            source = state_dict[key]
            shape = tuple(source.shape) if isinstance(source, (Tensor, np.ndarray)) else np.shape(source)
            if shape != target.shape:
                errors.append(f"size mismatch for {key}: the state_dict holds shape {shape}, the module {target.shape}")
                continue
            target.copy_(source)
        if errors:
            raise RuntimeError(f"error(s) in loading state_dict for {type(self).__name__}:\n\t" + "\n\t".join(errors))
        return IncompatibleKeys(missing, unexpected)

    def __repr__(self) -> str:
        lines = [f"({name}): " + repr(module).replace("\n", "\n  ") for name, module in self._modules.items()]
        extra = self.extra_repr()
        body = ([extra] if extra else []) + lines
        if not body:
            return f"{type(self).__name__}()"
        return f"{type(self).__name__}(\n  " + "\n  ".join(body) + "\n)"

    def extra_repr(self) -> str:
        return ""


NAMESPACES = {"flow.nn": ["Module"]}  # the face's flow.nn.Module
__all__ = ["IncompatibleKeys", "Module"]
