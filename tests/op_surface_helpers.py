"""Helpers shared by the tests of the legacy op surface (loaded with ``sibling(__file__, "op_surface_helpers")``)."""
from __future__ import annotations

import inspect
from typing import Any, Callable, Iterator

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core import get_default_session, hookimpl
from flowjob_core.runtime.world import OneProcess


@pytest.fixture(autouse=True)
def fresh_session() -> Iterator[None]:
    """Each test starts and ends without a default session (jobs and variables of others gone)."""
    flow.clear_default_session()
    yield
    flow.clear_default_session()


def value(name: str) -> np.ndarray:
    """A variable's value once every launched step has run."""
    flow.sync_default_session()
    return get_default_session().variables.get(name)


def sgd(loss: Any) -> None:
    """Plain SGD at learning rate 0.1 (no momentum), as a legacy program writes it."""
    flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)


class RankOf(OneProcess):
    """A ``flowjob_world`` plugin answering rank ``rank`` of ``size``, as flowjob-mpi answers on an MPI rank."""

    def __init__(self, rank: int, size: int) -> None:
        self.rank, self.size = rank, size

    @hookimpl
    def flowjob_world(self) -> "RankOf":
        return self


def as_rank(rank: int, size: int) -> None:
    """Make the default session's world rank ``rank`` of ``size``: readers traced from now on read that shard."""
    get_default_session().pm.register(RankOf(rank, size))


def train_grad(shape: tuple[int, ...], body: Callable[..., Any], *feeds: np.ndarray) -> tuple[Any, np.ndarray]:
    """Run one train step of ``body(x_plus_zero_variable, *feeds)``; return (its result, d loss / d x)."""
    got: dict[str, np.ndarray] = {}
    placeholders = [tp.Numpy.Placeholder(f.shape, dtype=flow.float32 if f.dtype.kind == "f" else flow.int32)
                    for f in feeds]

    def job_fn(x: Any, *rest: Any) -> Any:
        v = flow.get_variable("v", shape=shape, initializer=flow.zeros_initializer())
        xv = x + v
        flow.watch_diff(xv, lambda d: got.setdefault("dx", d.numpy()))
        y = body(xv, *rest)
        sgd(flow.math.reduce_sum(y))
        return y

    def job(*args: Any) -> Any:
        return job_fn(*args)

    # one annotated parameter per feed, as a global function's signature declares its placeholders
    job.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(f"a{i}", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=p)
         for i, p in enumerate(placeholders)], return_annotation=tp.Numpy)
    result = flow.global_function(type="train")(job)(*feeds)
    flow.sync_default_session()
    return result, got["dx"]


def job_of(body: Callable[..., Any], feeds: list[np.ndarray], train: bool = False) -> Any:
    """A global function of one placeholder per array of ``feeds`` (its signature built, not written)."""
    def job(*blobs: Any) -> Any:
        return body(*blobs)

    params = [inspect.Parameter(f"a{i}", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                annotation=tp.Numpy.Placeholder(a.shape, dtype=flow.int32 if a.dtype == np.int32
                                                                else flow.float32))
              for i, a in enumerate(feeds)]
    job.__signature__ = inspect.Signature(params, return_annotation=tp.Numpy)  # type: ignore[attr-defined]
    return flow.global_function(type="train" if train else "predict")(job)


def run_job(fn: Callable[..., Any], *arrays: np.ndarray) -> Any:
    """fn(*blobs) in a predict job fed ``arrays``."""
    flow.clear_default_session()
    return job_of(fn, list(arrays))(*arrays)


def mirrored_config() -> Any:
    """A function config in the mirrored view (mirrored placeholders are legacy's dynamic blobs), float data
    as legacy's tensor-list tests set it."""
    config = flow.FunctionConfig()
    config.default_data_type(flow.float)
    config.default_logical_view(flow.scope.mirrored_view())
    return config


def list_static_shape(arrays: list[np.ndarray]) -> tuple[int, ...]:
    """Legacy's _get_*_static_shape: the list's length, then the largest of each axis of its arrays."""
    return (len(arrays), *np.amax([a.shape for a in arrays], axis=0).tolist())
