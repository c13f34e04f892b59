"""The session's variables: one array per name, shared by every job, updated in place."""
from __future__ import annotations

import threading
import zlib
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from flowjob_core.errors import VariableError
from flowjob_core.ir.dtypes import unfit_value
from flowjob_core.ir.job import BlobSpec

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
            lost = unfit_value(host, var.spec.dtype)
            if lost is not None:
                raise VariableError(f"variable {name!r} ({var.spec.dtype}): the {host.dtype} value's {lost}; "
                                    f"nothing was assigned")
            host = host.astype(var.spec.dtype)
        self.backend.xp.copyto(var.array, self.backend.from_host(host))
