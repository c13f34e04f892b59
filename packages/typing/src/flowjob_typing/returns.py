"""Return kinds: how fetched values reach the caller, chosen by the return annotation."""
from __future__ import annotations

import asyncio
import inspect
import typing
from typing import Any, Callable, Iterator

from flowjob_core import Blob, JobReturnError

from flowjob_typing.annotations import Bundle, Callback, Future, ListListNumpy, ListNumpy, Numpy
from flowjob_typing.values import FutureResult, LocalBlob

Builder = Callable[[Iterator[Any]], Any]


class Tree:
    """A compiled annotation: checks a traced return value and rebuilds it from fetched arrays."""

    def flatten(self, value: Any, where: str, blobs: list[Blob]) -> Builder:
        raise NotImplementedError  # every subclass below implements it


class Leaf(Tree):
    def __init__(self, name: str, wrap: Callable[[Any, Blob], Any]) -> None:
        self.name = name
        self.wrap = wrap

    def flatten(self, value: Any, where: str, blobs: list[Blob]) -> Builder:
        if not isinstance(value, Blob):
            raise JobReturnError(f"{where}: expected a blob for {self.name}, found {type(value).__name__} {value!r}")
        blobs.append(value)
        wrap = self.wrap
        return lambda it: wrap(next(it), value)


NUMPY = Leaf("tp.Numpy", lambda a, b: a)
LIST_NUMPY = Leaf("tp.ListNumpy", lambda a, b: [a])
LIST_LIST_NUMPY = Leaf("tp.ListListNumpy", lambda a, b: [[a]])
LOCAL = Leaf("a blob", lambda a, b: LocalBlob(a, b))
LEAVES = {Numpy: NUMPY, ListNumpy: LIST_NUMPY, ListListNumpy: LIST_LIST_NUMPY}


class TupleTree(Tree):
    def __init__(self, items: list[Tree] | None, rest: Tree | None = None) -> None:
        self.items, self.rest = items, rest

    def flatten(self, value: Any, where: str, blobs: list[Blob]) -> Builder:
        if not isinstance(value, tuple):
            raise JobReturnError(f"{where}: expected a tuple, found {type(value).__name__}")
        trees = self.items if self.rest is None else [self.rest] * len(value)
        if len(value) != len(trees):
            raise JobReturnError(f"{where}: expected a tuple of {len(trees)}, found one of {len(value)}")
        builders = [t.flatten(v, f"{where}[{i}]", blobs) for i, (t, v) in enumerate(zip(trees, value))]
        return lambda it: tuple(b(it) for b in builders)


class ListTree(Tree):
    def __init__(self, item: Tree) -> None:
        self.item = item

    def flatten(self, value: Any, where: str, blobs: list[Blob]) -> Builder:
        if not isinstance(value, list):
            raise JobReturnError(f"{where}: expected a list, found {type(value).__name__}")
        builders = [self.item.flatten(v, f"{where}[{i}]", blobs) for i, v in enumerate(value)]
        return lambda it: [b(it) for b in builders]


class DictTree(Tree):
    def __init__(self, key_type: Any, item: Tree) -> None:
        self.key_type, self.item = key_type, item

    def flatten(self, value: Any, where: str, blobs: list[Blob]) -> Builder:
        if not isinstance(value, dict):
            raise JobReturnError(f"{where}: expected a dict, found {type(value).__name__}")
        builders = {}
        for key, v in value.items():
            if self.key_type is not Any and type(key) is not self.key_type:
                raise JobReturnError(f"{where}: dict key {key!r} is {type(key).__name__}, "
                                     f"the annotation says {getattr(self.key_type, '__name__', self.key_type)}")
            builders[key] = self.item.flatten(v, f"{where}[{key!r}]", blobs)
        return lambda it: {k: b(it) for k, b in builders.items()}


class AnyNesting(Tree):
    """Tuples, lists and dicts of any depth, leaves converted by ``leaf`` (Bundle, legacy futures)."""

    def __init__(self, leaf: Leaf) -> None:
        self.leaf = leaf

    def flatten(self, value: Any, where: str, blobs: list[Blob]) -> Builder:
        if isinstance(value, (tuple, list)):
            builders = [self.flatten(v, f"{where}[{i}]", blobs) for i, v in enumerate(value)]
            kind = type(value)
            return lambda it: kind(b(it) for b in builders)
        if isinstance(value, dict):
            named = {k: self.flatten(v, f"{where}[{k!r}]", blobs) for k, v in value.items()}
            return lambda it: {k: b(it) for k, b in named.items()}
        return self.leaf.flatten(value, where, blobs)


def compile_tree(annotation: Any) -> Tree | None:
    """The tree for a value annotation, or None if it is not one."""
    if annotation in LEAVES:
        return LEAVES[annotation]
    if isinstance(annotation, Bundle):
        leaf = LEAVES.get(annotation.inner)
        return AnyNesting(leaf) if leaf is not None else None
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            inner = compile_tree(args[0])
            return TupleTree(None, inner) if inner is not None else None
        items = [compile_tree(a) for a in args]
        return TupleTree(items) if all(i is not None for i in items) else None  # type: ignore[arg-type]
    if origin is list and len(args) == 1:
        inner = compile_tree(args[0])
        return ListTree(inner) if inner is not None else None
    if origin is dict and len(args) == 2:
        inner = compile_tree(args[1])
        return DictTree(args[0], inner) if inner is not None else None
    return None


class _Kind:
    waits = False

    def __init__(self, tree: Tree | None, annotation: Any) -> None:
        self.tree = tree
        self.annotation = annotation
        self._build: Builder | None = None

    def flatten(self, value: Any, where: str) -> list[Blob]:
        blobs: list[Blob] = []
        assert self.tree is not None
        self._build = self.tree.flatten(value, f"{where}: return value {_short(value)} does not match "
                                               f"annotation {_ann(self.annotation)}", blobs)
        return blobs

    def build(self, values: list[Any]) -> Any:
        assert self._build is not None
        return self._build(iter(values))


def _short(value: Any) -> str:
    return value.lbn if isinstance(value, Blob) else type(value).__name__


def _ann(annotation: Any) -> str:
    return getattr(annotation, "__qualname__", None) or repr(annotation)


class SyncReturn(_Kind):
    """``-> tp.Numpy`` and structures of it: the call blocks and returns the values."""

    waits = True

    def launch(self, pending: Any, where: str) -> Any:
        return self.build(pending.wait())


class NoneReturn(_Kind):
    """``-> None``: the call returns at once; watch handlers may run later."""

    def flatten(self, value: Any, where: str) -> list[Blob]:
        if value is not None:
            raise JobReturnError(f"{where}: returns {_short(value)} but its annotation is None")
        return []

    def launch(self, pending: Any, where: str) -> None:
        pending.detach()
        return None


class CallbackReturn(_Kind):
    """``-> tp.Callback[T]``: the call returns ``f(cb)``; ``cb`` runs with the converted result."""

    def launch(self, pending: Any, where: str) -> Callable[[Callable[[Any], None]], None]:
        pending.detach()

        def register(callback: Callable[[Any], None]) -> None:
            if not callable(callback):
                raise TypeError(f"{where}: the callback must be callable, got {callback!r}")
            pending.add_done_callback(lambda values: callback(self.build(values)))

        return register


class FutureReturn(_Kind):
    """No annotation (legacy): a future with ``.get()`` / ``.async_get(cb)`` of local blobs."""

    def launch(self, pending: Any, where: str) -> FutureResult:
        return FutureResult(pending, self.build, where)


class AwaitableReturn(_Kind):
    """``-> tp.Future[T]``: an asyncio future of the converted result (``await job(x)``)."""

    def launch(self, pending: Any, where: str) -> "asyncio.Future[Any]":
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise RuntimeError(f"{where} returns tp.Future: call it from a coroutine (await job(...))") from None

        async def result() -> Any:
            return self.build(await loop.run_in_executor(None, pending.wait))

        return asyncio.ensure_future(result())


def match_return(annotation: Any) -> Any:
    if annotation is inspect.Signature.empty:
        return FutureReturn(AnyNesting(LOCAL), annotation)
    if annotation is None or annotation is type(None):
        return NoneReturn(None, annotation)
    if isinstance(annotation, Callback):
        tree = compile_tree(annotation.inner)
        return CallbackReturn(tree, annotation.inner) if tree is not None else None
    if isinstance(annotation, Future):
        tree = compile_tree(annotation.inner)
        return AwaitableReturn(tree, annotation.inner) if tree is not None else None
    tree = compile_tree(annotation)
    return SyncReturn(tree, annotation) if tree is not None else None
