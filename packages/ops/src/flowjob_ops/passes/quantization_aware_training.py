"""The ``quantization-aware-training`` pass: legacy ``function_config.enable_qat(True)``.

Legacy's ``QuantAwareTraining`` rewrite, on this IR (phase ``differentiate``, before ``autodiff``, so the
fake quantizations are differentiated: their gradient passes straight through). Which ops are int8-able
depends on ``qat.target_backend``:

=============  ======================================================  ===========  ==================
backend        int8 ops                                                transparent  quantize
=============  ======================================================  ===========  ==================
``""``         ``add_n``, ``matmul`` (batched too), ``conv2d``,        ``reshape``  their inputs and
               ``avg_pool2d``, ``max_pool2d``                                       outputs
``tensorrt7``  ``conv2d``                                              ``reshape``  inputs and outputs
``cambricon``  ``conv2d``, ``matmul`` of two matrices                  none         their inputs only
=============  ======================================================  ===========  ==================

1. The *white set*: every int8 op, and after a ``conv2d`` read by one node the chain ``bias_add`` ->
   batch normalization -> ``relu`` as far as it goes (each link read by one node), and every transparent
   op reading a white one.
2. The *quantized values*: for each white op, the values it reads from outside the set; for each int8 op,
   the values its chain's last op hands on (``""``, ``tensorrt7``) or the values it reads (``cambricon``).
   An op traced inside ``flow.experimental.scope.config(quantization_aware_training=False)`` keeps its
   own inputs (and, ending a chain, its outputs) unquantized. Only float32 values are quantized, never the
   inputs of a batch normalization.
3. Each quantized value ``v`` gets one ``fake_quantization`` node ``<v>-fake-quant`` (``/`` written
   ``-``), read instead of ``v`` by the ops step 2 chose, with its scale and zero point from:

   - a variable (a weight): ``min_max_observer`` ``<v>-fake-quant-observer``, per layer or, with
     ``qat.per_channel_weight_quantization(True)``, one scale per slice of axis 0;
   - the bias of a convolution (a ``bias_add`` after a ``conv2d``): the input's scale times the weight's
     (``<v>-fake-quant-mul-bias``) and a zero zero-point variable ``<v>-fake-quant-zp``;
   - any other value (an activation): ``moving_average_min_max_observer`` ``<v>-fake-quant-observer``
     with state variables ``<observer>-fake-quant-moving-max`` / ``-moving-min``; in a train job it moves
     by ``qat.moving_min_max_momentum`` (0.95) until step ``qat.moving_min_max_stop_update_after_iters``
     of the job's step counter, in a predict job it reads its state (step variable
     ``<observer>-fake-train-step``, always 0).

``qat.symmetric`` (True) picks the symmetric or affine scheme; ``cambricon`` uses its power-of-two formula,
the others Google's. In eager mode the option does nothing, with a warning, as legacy's eager jobs skipped
the rewrite.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from flowjob_core import ConfigError, FlowjobError
from flowjob_core.config.scope_config import scope_value
from flowjob_core.ir.analysis import value_producers, value_readers
from flowjob_core.ir.job import BlobSpec, Job, Node
from flowjob_core.ir.naming import train_step_name
from flowjob_core.trace.blob import Blob
from flowjob_core.trace.builder import JobBuilder

from flowjob_ops.passes.lazy_rewrites import skipped_in_eager_mode
from flowjob_ops.passes.node_placement import place_before_readers

OPTION = "function_config.enable_qat"
STOP_OPTION = "function_config.qat.moving_min_max_stop_update_after_iters"
NORMALIZATION = ("batch_norm", "batch_norm_train")  # legacy's "normalization"
_F32 = np.dtype(np.float32)


@dataclass(frozen=True)
class Backend:
    """What a ``qat.target_backend`` quantizes."""

    int8_ops: frozenset[str]
    transparent_ops: frozenset[str]
    quantize_outputs: bool  # after the int8 ops (else before them)
    formula: str
    matrices_only: bool = False  # its matmul is legacy's 2-D "matmul", not "batch_matmul"


BACKENDS = {
    "": Backend(frozenset({"add_n", "matmul", "conv2d", "avg_pool2d", "max_pool2d"}), frozenset({"reshape"}),
                True, "google"),
    "tensorrt7": Backend(frozenset({"conv2d"}), frozenset({"reshape"}), True, "google"),
    "cambricon": Backend(frozenset({"conv2d", "matmul"}), frozenset(), False, "cambricon", matrices_only=True),
}


@dataclass(frozen=True)
class Settings:
    """``function_config.qat.*`` with legacy's defaults."""

    per_channel: bool
    symmetric: bool
    momentum: float
    stop_after: int | None
    backend: Backend

    @property
    def scheme(self) -> str:
        return "symmetric" if self.symmetric else "affine"


def enabled(job: Job) -> bool:
    get = getattr(job.config, "get", None)
    return bool(get("enable_quantization_aware_training")) if get is not None else False


def settings(job: Job) -> Settings:
    qat = job.config.section("qat")
    target = qat.get("target_backend", "")
    per_channel = bool(qat.get("per_channel_weight_quantization", False))
    if per_channel and target == "cambricon":
        # legacy's cambricon formula has one power-of-two shift per blob
        raise ConfigError(f"job {job.name!r}: function_config.qat.per_channel_weight_quantization(True) does not "
                          f"go with qat.target_backend('cambricon'), whose formula quantizes per layer")
    return Settings(per_channel, bool(qat.get("symmetric", True)), float(qat.get("moving_min_max_momentum", 0.95)),
                    qat.get("moving_min_max_stop_update_after_iters"), BACKENDS[target])


class _Graph:
    """Producers and readers, with a batch normalization's statistics left out (the moving-average updates
    read them, which legacy's op did inside itself)."""

    def __init__(self, job: Job) -> None:
        self.job = job
        self.producers = value_producers(job)
        self.readers = value_readers(job)

    def data_outputs(self, node: Node) -> tuple[str, ...]:
        return node.outputs[:1] if node.op in NORMALIZATION else node.outputs

    def out_edges(self, node: Node) -> list[tuple[str, Node]]:
        edges: list[tuple[str, Node]] = []
        for lbn in self.data_outputs(node):
            seen: set[str] = set()
            for reader in self.readers.get(lbn, []):
                if reader.name not in seen:
                    seen.add(reader.name)
                    edges.append((lbn, reader))
        return edges

    def sole_reader(self, node: Node) -> Node | None:
        readers = {reader.name: reader for _, reader in self.out_edges(node)}
        return next(iter(readers.values())) if len(readers) == 1 else None

    def fathers(self, node: Node) -> list[Node]:
        return [self.producers[lbn] for lbn in node.inputs if lbn in self.producers]


def _is_int8(node: Node, backend: Backend, job: Job) -> bool:
    if node.op not in backend.int8_ops:
        return False
    return not (backend.matrices_only and node.op == "matmul" and len(job.specs[node.inputs[0]].shape) != 2)


def _conv_chain(graph: _Graph, conv: Node) -> list[Node]:
    """The ``bias_add`` -> normalization -> ``relu`` after a ``conv2d``, each link read by one node (legacy's
    pattern: a link with several readers stays the one looked at next)."""
    chain: list[Node] = []
    if conv.op != "conv2d":
        return chain
    nxt = graph.sole_reader(conv)
    if nxt is None:
        return chain
    for op in ("bias_add", "normalization", "relu"):
        if nxt.op == op or (op == "normalization" and nxt.op in NORMALIZATION):
            chain.append(nxt)
            if op != "relu":
                nxt = graph.sole_reader(nxt) or nxt
    return chain


def white_set(graph: _Graph, backend: Backend) -> dict[str, Node]:
    """Legacy's white set, by name, in job order."""
    white: dict[str, Node] = {}
    for node in graph.job.nodes:
        if _is_int8(node, backend, graph.job):
            white.setdefault(node.name, node)
            for link in _conv_chain(graph, node):
                white.setdefault(link.name, link)
        elif node.op in backend.transparent_ops and any(f.name in white for f in graph.fathers(node)):
            white.setdefault(node.name, node)
    return {n.name: n for n in graph.job.nodes if n.name in white}


def _quantized(node: Node) -> bool:
    return bool(scope_value(node, "quantization_aware_training"))


def quantized_edges(graph: _Graph, white: dict[str, Node], backend: Backend) -> tuple[dict[str, list[Node]],
                                                                                      dict[str, str]]:
    """The values to quantize with the nodes reading them through the quantization (value -> readers), and
    legacy's scale map (value -> the value whose observer gives its scale)."""
    edges: dict[str, list[Node]] = {}
    scale_of: dict[str, str] = {}

    def add(lbn: str, reader: Node) -> None:
        scale_of[lbn] = lbn
        readers = edges.setdefault(lbn, [])
        if all(r.name != reader.name for r in readers):
            readers.append(reader)

    def in_edges(node: Node) -> list[tuple[str, Node | None]]:
        return [(lbn, graph.producers.get(lbn)) for lbn in dict.fromkeys(node.inputs)]

    for node in white.values():
        for lbn, src in in_edges(node):
            if (src is None or src.name not in white) and _quantized(node):
                add(lbn, node)
        if _is_int8(node, backend, graph.job):
            if backend.quantize_outputs:
                chain = _conv_chain(graph, node)
                last = chain[-1] if chain else node
                if _quantized(last):
                    for lbn, reader in graph.out_edges(last):
                        add(lbn, reader)
            elif _quantized(node):
                for lbn, _ in in_edges(node):
                    add(lbn, node)
        elif node.op in backend.transparent_ops:
            (source,) = dict.fromkeys(node.inputs)
            for lbn in node.outputs:
                if source in scale_of:
                    scale_of[lbn] = scale_of[source]
    return edges, scale_of


def _conv_of_bias(graph: _Graph, lbn: str, reader: Node) -> Node | None:
    """The ``conv2d`` whose bias ``lbn`` is, read by ``reader`` (a ``bias_add`` after it)."""
    if reader.op != "bias_add" or reader.inputs[0] == lbn:
        return None
    src = graph.producers.get(reader.inputs[0])
    return src if src is not None and src.op == "conv2d" else None


class _Inserter:
    """Adds the observers and fake quantizations, one per value."""

    def __init__(self, job: Job, ctx: Any, graph: _Graph, qat: Settings, scale_of: dict[str, str]) -> None:
        self.job, self.graph, self.qat, self.scale_of = job, graph, qat, scale_of
        self.builder = JobBuilder(job, ctx.session, bindings=ctx.bindings)
        self.observers: dict[str, tuple[Blob, Blob]] = {}
        self.step: Blob | None = None
        self.ctx = ctx

    def _add(self, op: str, inputs: list[Blob], attrs: dict[str, Any], name: str, near: Node) -> tuple[Blob, ...]:
        return self.builder.add_op(op, inputs, attrs, scoped_name=name, source=near.source, device=near.device)

    def _attrs(self) -> dict[str, Any]:
        return {"quantization_formula": self.qat.backend.formula, "quantization_scheme": self.qat.scheme}

    def _zeros(self, name: str, length: int, dtype: Any) -> Blob:
        return self.builder.add_variable(name, BlobSpec((length,), dtype), None, trainable=False)

    def _train_step(self) -> Blob:
        """The job's step counter (the optimizer's ``train_step_lbn``, else legacy's counter variable, which
        the optimizer pass then advances)."""
        if self.step is None:
            chosen = [i.payload["optimizer"] for i in self.job.intents if i.kind == "minimize"]
            lbn = getattr(self.ctx.bindings[chosen[0]], "train_step_lbn", None) if chosen else None
            if lbn is not None and lbn in self.job.specs:
                self.step = self.builder.blob(lbn)
            else:
                self.step = self._zeros(train_step_name(self.job.name), 1, np.int64)
        return self.step

    def observer(self, lbn: str) -> tuple[Blob, Blob]:
        """Scale and zero point of ``lbn``, from its observer (made once)."""
        if lbn in self.observers:
            return self.observers[lbn]
        src = self.graph.producers[lbn]
        name = lbn.replace("/", "-") + "-fake-quant-observer"
        value = self.builder.blob(lbn)
        if src.op == "variable":
            outs = self._add("min_max_observer", [value],
                             {**self._attrs(), "per_layer_quantization": not self.qat.per_channel}, name, src)
        else:
            if self.qat.stop_after is None:
                raise ConfigError(f"job {self.job.name!r}: {OPTION}(True) quantizes the activation {lbn!r}, whose "
                                  f"moving range needs {STOP_OPTION}(n) (legacy had no default)")
            train = self.job.type == "train"
            step = self._train_step() if train else self._zeros(f"{name}-fake-train-step", 1, np.int64)
            moving_max = self._zeros(f"{name}-fake-quant-moving-max", 1, _F32)
            moving_min = self._zeros(f"{name}-fake-quant-moving-min", 1, _F32)
            attrs = {**self._attrs(), "training": train, "stop_update_after_iters": int(self.qat.stop_after),
                     "momentum": self.qat.momentum}
            outs = self._add("moving_average_min_max_observer", [value, step, moving_max, moving_min], attrs, name,
                             src)
        self.observers[lbn] = (outs[0], outs[1])
        return self.observers[lbn]

    def bias_scale(self, lbn: str, conv: Node) -> tuple[Blob, Blob]:
        """A convolution bias's scale (input scale times weight scale) and zero zero-point."""
        dashed = lbn.replace("/", "-")
        scales = []
        for what, source in (("input", conv.inputs[0]), ("weight", conv.inputs[1])):
            observed = self.scale_of.get(source)
            if observed is None:
                raise FlowjobError(f"job {self.job.name!r}: {OPTION}(True) quantizes the bias {lbn!r} of conv2d "
                                   f"{conv.name!r}, whose {what} {source!r} is not quantized")
            scales.append(self.observer(observed)[0])
        (scale,) = self._add("multiply", scales, {}, f"{dashed}-fake-quant-mul-bias", conv)
        zero = self._zeros(f"{dashed}-fake-quant-zp", scale.shape[0], _F32)
        return scale, zero

    def quantize(self, lbn: str, readers: list[Node]) -> str:
        conv = _conv_of_bias(self.graph, lbn, readers[0])
        scale, zero = self.bias_scale(lbn, conv) if conv is not None else self.observer(lbn)
        near = self.graph.producers[lbn]
        (out,) = self._add("fake_quantization", [self.builder.blob(lbn), scale, zero], self._attrs(),
                           lbn.replace("/", "-") + "-fake-quant", near)
        return out.lbn


def run(job: Job, ctx: Any) -> None:
    if not enabled(job) or skipped_in_eager_mode(job, OPTION):
        return
    qat = settings(job)
    graph = _Graph(job)
    white = white_set(graph, qat.backend)
    edges, scale_of = quantized_edges(graph, white, qat.backend)
    edges = {lbn: [r for r in readers if r.op not in NORMALIZATION] for lbn, readers in edges.items()
             if job.specs[lbn].dtype == _F32}
    edges = {lbn: readers for lbn, readers in edges.items() if readers}
    if not edges:
        return
    before = len(job.nodes)
    inserter = _Inserter(job, ctx, graph, qat, scale_of)
    replaced: dict[str, dict[str, str]] = {}  # reader name -> {value: its fake quantization}
    for lbn, readers in edges.items():
        quantized = inserter.quantize(lbn, readers)
        for reader in readers:
            replaced.setdefault(reader.name, {})[lbn] = quantized
    for node in job.nodes:
        swap = replaced.get(node.name)
        if swap:
            node.inputs = tuple(swap.get(lbn, lbn) for lbn in node.inputs)
    place_before_readers(job, len(job.nodes) - before)
