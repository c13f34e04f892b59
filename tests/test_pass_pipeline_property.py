"""Property test of the pass pipeline: random small jobs give the same results fused and unfused.

A strategy draws a program as plain data (what each step reads and computes, with the shapes
followed while drawing), and one interpreter traces it as a job body: elementwise ops with
fan-out (any earlier value may be read again), scalar ops, binary ops whose other operand is a
smaller one broadcast in (or the same value twice), reductions with and without keepdims,
``flow.layers.dense`` (matmul -> bias_add (-> relu)), a conv2d -> bias (-> relu) (-> max_pool2d)
block, watched and returned intermediates, and sums of scaled reductions (weight penalties).
Predict jobs run once; train jobs reduce a loss to a scalar or a vector and take SGD steps.

Each program runs twice, each time in a fresh session: with the fusion passes and with
``FLOWJOB_FUSION=0``. The fused job must verify (``verify-final``) and give the same returned
values, watched values and (train) updated variables: bitwise, as elementwise chains and
``matmul_bias`` promise, or within float32 tolerance when a convolution is fused (its bias and
ReLU run as the GEMM's epilogue, its pooling in the GEMM's layout).

Each program also runs with the step's nodes side by side on the host threads (the planner's lanes,
``flowjob_core.plan.lanes``, with its cost constants set so that every node is worth a lane and waking one
costs nothing: as many sections and cross-lane waits as the graph allows) and must give the one-thread
step's values bitwise.

The explicit ``@example`` is the program that once failed verification (two scaled reductions
added to a running sum put one ``add`` into two elementwise chains); the drawn programs reach
the same shape on their own (``terms`` >= 2 with scalar reductions).
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from hypothesis import event, example, given
from hypothesis import strategies as st

import oneflow as flow
import oneflow.typing as tp
from flowjob_core import get_default_session
from flowjob_core.plan import lanes

UNARY = ("relu", "tanh", "negative", "square", "abs", "exp")
SCALAR = ("mul", "add", "rsub", "div")
BINARY = ("add", "subtract", "multiply", "maximum", "minimum")
CONSTANTS = (0.5, 2.0, -0.75, 1.5)
PLACEHOLDERS = 3  # x (batch, features), row (features,), col (batch, 1): the first pool values
TRAIN_STEPS = 2


@dataclass(frozen=True)
class Conv:
    """conv2d (SAME or VALID) -> bias (-> relu) (-> 2x2 max pool) on an image input, flattened into the pool."""

    channels: int
    size: int
    filters: int
    kernel: int
    padding: str
    relu: bool
    pool: bool
    watch: bool


@dataclass(frozen=True)
class Program:
    train: bool
    batch: int
    features: int
    conv: Conv | None
    steps: tuple[tuple, ...]  # ("unary", op, i) | ("scalar", op, c, i) | ("binary", op, i, j)
    #                           | ("reduce", op, axis, keepdims, i) | ("dense", i, units, relu)
    returned: tuple[int, ...]  # pool indices
    watched: tuple[int, ...]
    head: int  # train: the pool value (2-d) the final dense reads
    vector_loss: bool  # train: the loss per row instead of a scalar
    keepdims_total: bool  # predict: the summed reductions keep their dims
    terms: tuple[tuple, ...]  # (source, constant): source a pool index or ("weight", k) of the k-th dense
    seed: int
    shapes: tuple[tuple[int, ...], ...] = field(compare=False, default=())  # of the pool values; shown on failure


def _conv_shape(conv: Conv, batch: int) -> tuple[int, int]:
    side = conv.size if conv.padding == "SAME" else conv.size - conv.kernel + 1
    if conv.pool:
        side //= 2
    return (batch, conv.filters * side * side)


def _broadcasts(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    try:
        np.broadcast_shapes(a, b)
    except ValueError:
        return False
    return True


@st.composite
def programs(draw: Any) -> Program:
    train = draw(st.booleans())
    batch, features = draw(st.integers(1, 3)), draw(st.integers(1, 4))
    shapes: list[tuple[int, ...]] = [(batch, features), (features,), (batch, 1)]
    conv = None
    if draw(st.booleans()):
        size = draw(st.integers(4, 5))
        conv = Conv(draw(st.integers(1, 2)), size, draw(st.integers(1, 2)), draw(st.sampled_from((1, 3))),
                    draw(st.sampled_from(("SAME", "VALID"))), draw(st.booleans()), draw(st.booleans()),
                    draw(st.booleans()))
        shapes.append(_conv_shape(conv, batch))
    steps: list[tuple] = []
    dense_count = 0
    for _ in range(draw(st.integers(1, 7))):
        kind = draw(st.sampled_from(("unary", "scalar", "binary", "binary", "reduce", "dense")))
        i = draw(st.integers(0, len(shapes) - 1))
        a = shapes[i]
        if kind == "unary":
            steps.append(("unary", draw(st.sampled_from(UNARY)), i))
        elif kind == "scalar":
            steps.append(("scalar", draw(st.sampled_from(SCALAR)), draw(st.sampled_from(CONSTANTS)), i))
        elif kind == "binary":
            partners = [j for j, b in enumerate(shapes) if _broadcasts(a, b)]
            j = draw(st.sampled_from(partners))  # i itself is always one: a node reading a value twice
            if draw(st.booleans()):
                i, j = j, i
            steps.append(("binary", draw(st.sampled_from(BINARY)), i, j))
            a = tuple(np.broadcast_shapes(shapes[i], shapes[j]))
        elif kind == "reduce" and a:
            axis = draw(st.none() | st.integers(0, len(a) - 1))
            keepdims = draw(st.booleans())
            steps.append(("reduce", draw(st.sampled_from(("sum", "mean"))), axis, keepdims, i))
            axes = range(len(a)) if axis is None else (axis,)
            a = tuple(1 if k in axes else d for k, d in enumerate(a) if keepdims or k not in axes)
        elif kind == "dense" and len(a) == 2:
            units = draw(st.integers(1, 3))
            steps.append(("dense", i, units, draw(st.booleans())))
            a = (a[0], units)
            dense_count += 1
        else:
            steps.append(("unary", draw(st.sampled_from(UNARY)), i))
        shapes.append(a)
    own = st.integers(PLACEHOLDERS, len(shapes) - 1)  # the values the program made (not its placeholders)
    returned = tuple(draw(st.lists(own, min_size=1, max_size=3, unique=True)))
    watched = tuple(draw(st.lists(own, max_size=2, unique=True)))
    head = draw(st.sampled_from([k for k, s in enumerate(shapes) if len(s) == 2]))
    sources: Any = own
    if train:
        dense_count += 1  # the head
        sources = sources | st.tuples(st.just("weight"), st.integers(0, dense_count - 1))
    terms = tuple(draw(st.lists(st.tuples(sources, st.sampled_from((1e-3, 2.0, 0.5))), max_size=3)))
    return Program(train, batch, features, conv, tuple(steps), returned, watched, head, draw(st.booleans()),
                   draw(st.booleans()), terms, draw(st.integers(0, 2**16)), tuple(shapes))


# the shape of tests/test_fusion_regressions.py's first program, as data: m(x) + sum(row) * 2 + sum(x) * 2, all
# scalars, so both scaled sums are single-reader chain candidates feeding one add (the node two chains once shared)
REGRESSION = Program(
    train=False, batch=1, features=3, conv=None,
    steps=(("reduce", "mean", None, False, 0), ("reduce", "sum", None, False, 1), ("scalar", "mul", 2.0, 4),
           ("binary", "add", 3, 5), ("reduce", "sum", None, False, 0), ("scalar", "mul", 2.0, 7),
           ("binary", "add", 6, 8)),
    returned=(9,), watched=(), head=0, vector_loss=False, keepdims_total=False, terms=(), seed=0)
# a train job through a conv2d -> bias -> relu -> max_pool2d block (conv2d_bias and the pooling-ReLU gradient
# fuse), a watched flattened activation, a dense -> relu -> add -> tanh chain, and two weight penalties
CONV_TRAIN = Program(
    train=True, batch=2, features=3, conv=Conv(2, 5, 2, 3, "SAME", relu=True, pool=True, watch=False),
    steps=(("dense", 3, 3, True), ("binary", "add", 4, 1), ("unary", "tanh", 5)),
    returned=(6,), watched=(3,), head=6, vector_loss=True, keepdims_total=False,
    terms=((("weight", 0), 1e-3), (("weight", 1), 1e-3)), seed=3)


class _Interpreter:
    """Traces one program as a job body and records what the job hands out."""

    def __init__(self, program: Program) -> None:
        self.program = program
        self.watched: dict[int, list[np.ndarray]] = {i: [] for i in program.watched}
        self.conv_watched: list[np.ndarray] = []
        self.weights: list[tuple[str, tuple[int, ...]]] = []  # (variable name, shape), in creation order

    def _init(self) -> Any:
        return flow.random_normal_initializer(stddev=0.5, seed=len(self.weights) + 1)

    def _dense(self, x: Any, units: int, relu: bool) -> Any:
        name = f"d{len(self.weights)}"
        init = self._init()
        self.weights.append((f"{name}-weight", (units, x.shape[-1])))
        return flow.layers.dense(x, units, activation=flow.nn.relu if relu else None, kernel_initializer=init,
                                 bias_initializer=init, name=name)

    def _step(self, pool: list[Any], step: tuple) -> Any:
        kind = step[0]
        if kind == "unary":
            return getattr(flow.math, step[1])(pool[step[2]]) if step[1] != "relu" else flow.nn.relu(pool[step[2]])
        if kind == "scalar":
            _, op, c, i = step
            v = pool[i]
            return {"mul": lambda: v * c, "add": lambda: v + c, "rsub": lambda: c - v, "div": lambda: v / c}[op]()
        if kind == "binary":
            _, op, i, j = step
            return getattr(flow.math, op)(pool[i], pool[j])
        if kind == "reduce":
            _, op, axis, keepdims, i = step
            return getattr(flow.math, f"reduce_{op}")(pool[i], axis=axis, keepdims=keepdims)
        _, i, units, relu = step
        return self._dense(pool[i], units, relu)

    def _conv(self, image: Any) -> Any:
        conv = self.program.conv
        assert conv is not None
        init = self._init()
        self.weights.append(("c-weight", (conv.filters, conv.channels, conv.kernel, conv.kernel)))
        y = flow.layers.conv2d(image, conv.filters, conv.kernel, padding=conv.padding,
                               activation=flow.nn.relu if conv.relu else None, kernel_initializer=init,
                               bias_initializer=init, name="c")
        if conv.pool:
            y = flow.nn.max_pool2d(y, 2, 2, "VALID")
        if conv.watch:
            flow.watch(y, self._recorder(self.conv_watched))
        return flow.reshape(y, [self.program.batch, -1])

    @staticmethod
    def _recorder(into: list[np.ndarray]) -> Any:
        def record(value: tp.Numpy) -> None:
            into.append(np.array(value, copy=True))
        return record

    def _term(self, source: Any, constant: float, pool: list[Any], keepdims: bool) -> Any:
        value = flow.get_variable(*self.weights[source[1]]) if isinstance(source, tuple) else pool[source]
        return flow.math.reduce_sum(value, keepdims=keepdims) * constant

    def body(self, x: Any, row: Any, col: Any, image: Any = None) -> tuple[Any, ...]:
        p = self.program
        pool = [x, row, col] + ([self._conv(image)] if p.conv else [])
        for step in p.steps:
            pool.append(self._step(pool, step))
        for i in p.watched:
            flow.watch(pool[i], self._recorder(self.watched[i]))
        results = [pool[i] for i in p.returned]
        if p.train:
            head = self._dense(pool[p.head], 2, False)
            loss = flow.math.reduce_sum(head, axis=1) if p.vector_loss else flow.math.reduce_mean(head)
            for source, constant in p.terms:
                loss = loss + self._term(source, constant, pool, False)
            flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1])).minimize(loss)
            results.append(loss)
        elif p.terms:
            total = flow.math.reduce_sum(pool[-1], keepdims=p.keepdims_total)
            for source, constant in p.terms:
                total = total + self._term(source, constant, pool, p.keepdims_total)
            results.append(total)
        return tuple(results)


def _feeds(p: Program) -> list[np.ndarray]:
    rng = np.random.default_rng(p.seed)
    shapes = [(p.batch, p.features), (p.features,), (p.batch, 1)]
    if p.conv:
        shapes.append((p.batch, p.conv.channels, p.conv.size, p.conv.size))
    return [rng.standard_normal(s).astype(np.float32) for s in shapes]


def _run(p: Program, plans: list[Any] | None = None) -> tuple[dict[str, list[np.ndarray]], list[str]]:
    """Everything the job hands out, by name (a list per name), and the planned ops. Fresh session.
    ``plans``: the plan is appended to it."""
    flow.clear_default_session()
    interpreter = _Interpreter(p)
    feeds = _feeds(p)
    names = ["x", "row", "col", "image"][: len(feeds)]
    params = [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=tp.Numpy.Placeholder(a.shape))
              for n, a in zip(names, feeds)]
    count = len(p.returned) + (p.train or bool(p.terms))

    def job(*blobs: Any) -> Any:
        return interpreter.body(*blobs)

    job.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        params, return_annotation=tuple.__class_getitem__((tp.Numpy,) * count))
    function = flow.global_function(type="train" if p.train else "predict")(job)
    seen: dict[str, list[np.ndarray]] = {f"return {k}": [] for k in range(count)}
    for _ in range(TRAIN_STEPS if p.train else 1):
        for k, value in enumerate(function(*feeds)):
            seen[f"return {k}"].append(np.array(value, copy=True))
    flow.sync_default_session()  # watchers have seen every step
    for i, values in interpreter.watched.items():
        seen[f"watched {i}"] = values
    seen["watched conv"] = interpreter.conv_watched
    if p.train:
        variables = get_default_session().variables
        for name in sorted(variables.names()):  # weights, biases and the optimizer's own (its step count)
            seen[f"variable {name}"] = [np.array(variables.get(name), copy=True)]
    if plans is not None:
        plans.append(function.plan())
    return seen, [n.op for n in function.plan().order]


def _compare(got: dict[str, list[np.ndarray]], want: dict[str, list[np.ndarray]], exact: bool) -> None:
    assert got.keys() == want.keys()
    for key, values in want.items():
        assert len(got[key]) == len(values), key
        for g, w in zip(got[key], values):
            assert g.shape == w.shape and g.dtype == w.dtype, key
            if exact:
                np.testing.assert_array_equal(g, w, err_msg=key)
            else:
                np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5, err_msg=key)


@example(REGRESSION)
@example(CONV_TRAIN)
@given(programs())
def test_fused_pipeline_gives_the_unfused_results(program: Program) -> None:
    with pytest.MonkeyPatch.context() as env:
        env.setenv("FLOWJOB_FUSION", "0")
        want, ref_ops = _run(program)
        env.setenv("FLOWJOB_FUSION", "1")
        got, ops = _run(program)
    flow.clear_default_session()
    fused = sorted({op for op in ops if op not in ref_ops})
    event(f"fused ops: {', '.join(fused) or 'none'}")
    assert not {"elementwise_chain", "matmul_bias", "conv2d_bias", "conv2d_bias_pool"} & set(ref_ops)
    # chains, matmul_bias and the pooling-ReLU gradient are bitwise the unfused ops; a fused convolution is
    # not (its bias and ReLU run as the GEMM's epilogue, its pooling in the GEMM's layout)
    _compare(got, want, exact=not any(op.startswith("conv2d_bias") for op in ops))


@example(CONV_TRAIN)
@given(programs())
def test_nodes_side_by_side_give_the_one_thread_results(program: Program) -> None:
    plans: list[Any] = []
    with pytest.MonkeyPatch.context() as env:
        env.setenv("FLOWJOB_HOST_THREADS", "1")
        want, _ = _run(program)
        env.setenv("FLOWJOB_HOST_THREADS", "3")
        # every node worth a lane, lanes free to start and to wait on: the widest schedule the graph has
        env.setattr(lanes, "CALL_US", 1000.0)
        env.setattr(lanes, "SECTION_US", 0.0)
        env.setattr(lanes, "WAIT_US", 0.0)
        got, _ = _run(program, plans)
    flow.clear_default_session()
    lane_plan = plans[0].lanes
    widest = max((len(s.lanes) for s in lane_plan.sections), default=1) if lane_plan is not None else 1
    event(f"lanes in the widest section: {widest}")
    event(f"cross-lane waits: {'some' if lane_plan is not None and lane_plan.waits else 'none'}")
    _compare(got, want, exact=True)
