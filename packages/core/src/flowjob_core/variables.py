"""The session's variables: one array per name, shared by every job, updated in place."""
from __future__ import annotations

import threading
import zlib
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from flowjob_core.errors import FlowjobError, VariableError
from flowjob_core.ir import BlobSpec

Initializer = Callable[[tuple[int, ...], np.dtype, np.random.Generator], np.ndarray]
"""``initializer(shape, dtype, rng) -> host ndarray``; ``None`` means zeros (legacy dense default)."""


@dataclass
class StoredVariable:
    name: str
    spec: BlobSpec
    initializer: Any
    trainable: bool
    array: Any  # a backend array; plans hold references to it, so it is only ever written in place
    regularizer: Any = None
    model_name: str | None = None


class VariableStore:
    def __init__(self, backend: Any, seed: int = 0) -> None:
        self.backend = backend
        self.seed = seed
        self._vars: dict[str, StoredVariable] = {}
        self._lock = threading.Lock()

    def declare(self, name: str, spec: BlobSpec, initializer: Any = None, trainable: bool = True,
                regularizer: Any = None, model_name: str | None = None) -> StoredVariable:
        """The variable ``name``, created and initialized on first declaration."""
        with self._lock:
            known = self._vars.get(name)
            if known is not None:
                return known
            var = StoredVariable(name, spec, initializer, trainable,
                                 self.backend.xp.empty(spec.shape, dtype=spec.dtype), regularizer, model_name)
            self._vars[name] = var
        self.initialize(name)
        return var

    def __contains__(self, name: str) -> bool:
        return name in self._vars

    def __getitem__(self, name: str) -> StoredVariable:
        try:
            return self._vars[name]
        except KeyError:
            raise VariableError(f"no variable named {name!r}; known: {sorted(self._vars)}") from None

    def names(self) -> list[str]:
        return list(self._vars)

    def array(self, name: str) -> Any:
        return self[name].array

    def initial_value(self, name: str) -> np.ndarray:
        var = self[name]
        rng = np.random.default_rng([self.seed, zlib.crc32(name.encode())])
        if var.initializer is None:
            value = np.zeros(var.spec.shape, dtype=var.spec.dtype)
        else:
            value = np.asarray(var.initializer(var.spec.shape, var.spec.dtype, rng))
        if value.shape != var.spec.shape:
            raise VariableError(f"initializer of variable {name!r} gave shape {value.shape}, expected {var.spec.shape}")
        return value.astype(var.spec.dtype, copy=False)

    def initialize(self, name: str) -> None:
        self.assign(name, self.initial_value(name))

    def get(self, name: str) -> np.ndarray:
        """A host copy of the current value."""
        return np.array(self.backend.to_host(self[name].array), copy=True)

    def assign(self, name: str, value: Any) -> None:
        """Write ``value`` into the variable in place, after checking shape and dtype."""
        var = self[name]
        host = np.asarray(value)
        if host.shape != var.spec.shape:
            raise VariableError(f"variable {name!r} has shape {var.spec.shape}, the value has {host.shape}")
        if host.dtype != var.spec.dtype:
            if not np.can_cast(host.dtype, var.spec.dtype, casting="same_kind"):
                raise VariableError(f"variable {name!r} has dtype {var.spec.dtype}, the value has {host.dtype}")
            host = host.astype(var.spec.dtype)
        self.backend.xp.copyto(var.array, self.backend.from_host(host))


def get_variable(name: str, shape: tuple[int, ...] | list[int] | None = None, dtype: Any = None,
                 initializer: Any = None, regularizer: Any = None, trainable: bool | None = None,
                 model_name: str | None = None, random_seed: int | None = None, distribute: Any = None,
                 reuse: bool = True) -> Any:
    """``flow.get_variable``: the same name gives the same variable, within a job and across jobs."""
    from flowjob_core import dtypes, scope
    from flowjob_core.tracing import current_builder

    builder = current_builder("flow.get_variable")
    if shape is None:
        raise VariableError(f"flow.get_variable({name!r}): shape is required")
    if any(not isinstance(d, (int, np.integer)) or d <= 0 for d in shape):
        raise VariableError(f"flow.get_variable({name!r}): shape must hold positive ints, got {shape!r}")
    dt = dtypes.as_dtype(dtype) if dtype is not None else dtypes.float32
    if initializer is not None and not callable(initializer):
        initializer = _read_initializer(builder.session, initializer, scope.scoped_name(name))
    if random_seed is not None and initializer is not None and hasattr(initializer, "with_seed"):
        initializer = initializer.with_seed(random_seed)
    full = scope.scoped_name(name)
    return builder.add_variable(full, BlobSpec(tuple(shape), dt), initializer,
                                True if trainable is None else bool(trainable), reuse=reuse,
                                regularizer=regularizer, model_name=model_name)


def _read_initializer(session: Any, value: Any, variable: str) -> Any:
    """A plugin's reading of a non-callable initializer (flowjob-ops reads legacy InitializerConf messages)."""
    try:
        init = session.pm.hook.flowjob_read_initializer(value=value, owner=f"variable {variable!r}")
    except ValueError as exc:
        raise VariableError(f"flow.get_variable: {exc}") from None
    if init is None:
        raise VariableError(f"flow.get_variable({variable!r}): the initializer must be callable as "
                            f"init(shape, dtype, rng) or a legacy InitializerConf, got {type(value).__name__}")
    return init


def add_loss(loss: Any) -> None:
    """``flow.losses.add_loss``: mark a blob as a loss of the train job being traced."""
    from flowjob_core.blob import Blob
    from flowjob_core.tracing import current_builder

    builder = current_builder("flow.losses.add_loss")
    if builder.job.type != "train":
        raise FlowjobError(
            f"job {builder.job.name!r}: add_loss/minimize needs type='train', this job is {builder.job.type!r}")
    for blob in loss if isinstance(loss, (list, tuple)) else [loss]:
        if not isinstance(blob, Blob):
            raise FlowjobError(f"job {builder.job.name!r}: a loss must be a blob, got {type(blob).__name__}")
        if not blob.dtype.kind == "f":
            raise FlowjobError(f"job {builder.job.name!r}: loss {blob.lbn!r} must be floating, is {blob.dtype}")
        if blob.lbn not in builder.job.losses:
            builder.job.losses.append(blob.lbn)
