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
from flowjob_core.ir.layout import Shard

Initializer = Callable[[tuple[int, ...], np.dtype, np.random.Generator], np.ndarray]
"""``initializer(shape, dtype, rng) -> host ndarray``; ``None`` means zeros (legacy dense default).

An initializer may also have ``piece(shape, dtype, rng, axis, start, stop)``, giving rows ``[start, stop)`` along
``axis`` of the same values without drawing the whole (flowjob-ops' initializers do): a variable split over ranks
then never holds more than its piece. Without it a split variable's initializer draws the whole and keeps its piece.
"""


@dataclass
class StoredVariable:
    name: str
    spec: BlobSpec
    initializer: Any
    trainable: bool
    array: Any  # a backend array; plans hold references to it, so it is only ever written in place
    regularizer: Any = None
    model_name: str | None = None
    # on several ranks, a variable split over them (flowjob_core.ir.layout): its layout, and the piece of the
    # logical value ``spec`` this rank holds in ``array``; None: the whole
    layout: Any = None
    shard: Shard | None = None

    @property
    def local_spec(self) -> BlobSpec:
        """The spec of what this process holds: the shard's, or ``spec``."""
        return self.spec if self.shard is None else BlobSpec(self.shard.local_shape(self.spec.shape), self.spec.dtype)


class VariableStore:
    def __init__(self, backend: Any, seed: int = 0) -> None:
        self.backend = backend
        self.seed = seed
        self._vars: dict[str, StoredVariable] = {}
        self._lock = threading.Lock()

    def declare(self, name: str, spec: BlobSpec, initializer: Any = None, trainable: bool = True,
                regularizer: Any = None, model_name: str | None = None, layout: Any = None,
                shard: Shard | None = None) -> StoredVariable:
        """The variable ``name``, created and initialized on first declaration. With a ``shard`` it holds only
        that piece of the logical value (a variable split over ranks); its initializer gives that piece of the
        whole value one process draws, so every rank count starts from the same model."""
        with self._lock:
            known = self._vars.get(name)
            if known is not None:
                return known
            local = spec.shape if shard is None else shard.local_shape(spec.shape)
            var = StoredVariable(name, spec, initializer, trainable, self.backend.xp.empty(local, dtype=spec.dtype),
                                 regularizer, model_name, layout, shard)
            self._vars[name] = var
        self.initialize(name)
        return var

    def hold_as_shard(self, name: str, layout: Any, spec: BlobSpec, shard: Shard) -> None:
        """A variable declared in the shape of a shard (an optimizer's slot of a split variable) held from now on as
        that ``shard`` of the logical ``spec``: its value is kept, checkpoints see the whole."""
        var = self[name]
        if var.shard is not None or var.spec != BlobSpec(shard.local_shape(spec.shape), spec.dtype):
            raise VariableError(f"variable {name!r} ({var.local_spec}) is not the shard {shard} of {spec}")
        var.spec, var.layout, var.shard = spec, layout, shard

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
        rng = self._rng(name)
        if var.initializer is None:
            value = np.zeros(var.spec.shape, dtype=var.spec.dtype)
        else:
            value = np.asarray(var.initializer(var.spec.shape, var.spec.dtype, rng))
        if value.shape != var.spec.shape:
            raise VariableError(f"initializer of variable {name!r} gave shape {value.shape}, expected {var.spec.shape}")
        return value.astype(var.spec.dtype, copy=False)

    def initial_piece(self, name: str) -> np.ndarray:
        """What this process holds of ``initial_value(name)``: a split variable's piece, drawn alone where its
        initializer can (``piece``, see ``Initializer``), else the whole value."""
        var = self[name]
        if var.shard is None:
            return self.initial_value(name)
        local = var.local_spec.shape
        if var.initializer is None:
            return np.zeros(local, dtype=var.spec.dtype)
        piece = getattr(var.initializer, "piece", None)
        if piece is None:
            return np.ascontiguousarray(self.initial_value(name)[var.shard.index()])
        shard = var.shard
        value = np.asarray(piece(var.spec.shape, var.spec.dtype, self._rng(name), shard.axis, shard.start, shard.stop))
        if value.shape != local:
            raise VariableError(f"initializer of variable {name!r} gave a piece of shape {value.shape} for rows "
                                f"[{shard.start}, {shard.stop}) of axis {shard.axis}, expected {local}")
        return value.astype(var.spec.dtype, copy=False)

    def _rng(self, name: str) -> np.random.Generator:
        return np.random.default_rng([self.seed, zlib.crc32(name.encode())])

    def initialize(self, name: str) -> None:
        self.assign_local(name, self.initial_piece(name))

    def get(self, name: str) -> np.ndarray:
        """A host copy of the current value: of this rank's piece, for a split variable (``local_spec``)."""
        array = self[name].array
        host = self.backend.to_host(array)
        if host is array or (isinstance(array, np.ndarray) and np.may_share_memory(host, array)):  # the host's own
            return np.array(host, copy=True)
        return np.asarray(host)  # a device backend's host copy is new already: a second copy would double the peak

    def assign(self, name: str, value: Any) -> None:
        """Write ``value`` into the variable in place, after checking shape and dtype. ``value`` is the logical
        (whole) value; a split variable keeps its piece of it (``assign_local`` writes the piece itself)."""
        var = self[name]
        host = np.asarray(value)
        if host.shape != var.spec.shape:
            raise VariableError(f"variable {name!r} has shape {var.spec.shape}, the value has {host.shape}")
        self._write(var, host if var.shard is None else host[var.shard.index()])

    def assign_local(self, name: str, value: Any) -> None:
        """Write what this process holds of the variable: its piece of a split variable (``local_spec``)."""
        var = self[name]
        host = np.asarray(value)
        if host.shape != var.local_spec.shape:
            raise VariableError(f"variable {name!r} holds shape {var.local_spec.shape} on this rank, the value has "
                                f"{host.shape}")
        self._write(var, host)

    def _write(self, var: StoredVariable, host: np.ndarray) -> None:
        name = var.name
        if host.dtype != var.spec.dtype:
            if not np.can_cast(host.dtype, var.spec.dtype, casting="same_kind"):
                raise VariableError(f"variable {name!r} has dtype {var.spec.dtype}, the value has {host.dtype}")
            lost = unfit_value(host, var.spec.dtype)
            if lost is not None:
                raise VariableError(f"variable {name!r} ({var.spec.dtype}): the {host.dtype} value's {lost}; "
                                    f"nothing was assigned")
            host = host.astype(var.spec.dtype)
        self.backend.xp.copyto(var.array, self.backend.from_host(host))
