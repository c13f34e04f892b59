"""Convolutions on cuDNN, through NVIDIA's Python frontend (``nvidia-cudnn-frontend``, import name ``cudnn``;
the extra ``flowjob-gpu[cudnn]``), with the records' im2col + cuBLAS kernels as the fallback.

Ops: ``conv2d`` and ``conv3d`` (cuDNN's convolution forward), their ``_grad_data`` (data gradient, "dgrad") and
``_grad_filter`` (filter gradient, "wgrad"), and the fusion pass's ``conv2d_bias`` (forward, bias and optional
ReLU in one cuDNN graph; where cuDNN refuses that graph, its convolution alone, the bias and ReLU then two CuPy
passes). Every padding, stride, dilation and group count the records accept, channels first and
channels last, float16, float32 and float64: the records' own geometry (``flowjob_ops.kernels.conv``) resolves the
attributes, and the graph gets each tensor's dims in cuDNN's channels-first order with the strides of flowjob's
layout (a channels-last x of shape (N, H, W, C) is dims [N, C, H, W] with strides [HWC, 1, WC, C]; a channels-last
filter (F, kh, kw, C/g) is [F, C/g, kh, kw] with strides [khkwC/g, 1, kwC/g, C/g]); cuDNN reads the group count
from the filter's C/g.

When the plan is built, each node's configuration (``Config``: the op's kind, shapes, layout, dtype, pads,
strides, dilations, groups, bias and ReLU) is looked up in the plan's cache (``ctx.shared[CACHE]``): the first node
of a configuration builds the cuDNN graph, lets the frontend's heuristics rank the engines, drops those whose
numerics differ from the records' (``REFUSED_NOTES``: TF32 and down-converting tensor cores for float32 and
float64, FFT engines, nondeterministic ones), builds the first plan that remains and keeps it, with its workspace
size; every later node of that configuration reuses it. A node takes the plan's workspace from the plan's scratch
pool (``ctx.scratch``, lent while the node runs) and runs ``execute`` on the current stream, the step's stream
inside a recorded step, so the launch is captured in the step's CUDA graph. Inputs that are not C-contiguous, or
whose address is not ``ALIGNMENT``-byte aligned (a view at an offset), are copied into a buffer of the node first.

The fallback: where the frontend is not installed, cuDNN does not load, no handle can be made (no device), the
dtype has no cuDNN type, or the frontend refuses the configuration (no engine supports it), the node runs the op
record's own kernel (im2col + cuBLAS), and an info log names the node, the op, the path and why, once per
configuration and plan (the path cuDNN took is logged once too). ``paths(plan.shared)`` says which path each
convolution node took.
"""
from __future__ import annotations

import logging
import weakref
from dataclasses import dataclass, replace
from typing import Any, Callable

import numpy as np

from flowjob_core import KernelContext
from flowjob_ops.kernels.conv import ConvGeometry
from flowjob_ops.kernels.window import FORMATS
from flowjob_ops.records.conv import (CONV2D, CONV2D_BIAS, CONV2D_GRAD_DATA, CONV2D_GRAD_FILTER, CONV3D,
                                      CONV3D_GRAD_DATA, CONV3D_GRAD_FILTER)

from flowjob_gpu.record_kernels import own_kernel

logger = logging.getLogger(__name__)

FORWARD, DATA, FILTER = "fprop", "dgrad", "wgrad"
KINDS = {CONV2D.name: FORWARD, CONV3D.name: FORWARD, CONV2D_BIAS.name: FORWARD,
         CONV2D_GRAD_DATA.name: DATA, CONV3D_GRAD_DATA.name: DATA,
         CONV2D_GRAD_FILTER.name: FILTER, CONV3D_GRAD_FILTER.name: FILTER}
DATA_TYPES = {"float16": "HALF", "float32": "FLOAT", "float64": "DOUBLE"}  # numpy dtype -> cudnn.data_type
COMPUTE_TYPES = {"float16": "FLOAT", "float32": "FLOAT", "float64": "DOUBLE"}
HEURISTICS = ("A", "FALLBACK")  # cudnn.heur_mode members, in the order the engines are ranked
REFUSED_NOTES = {"float16": ("FFT", "NONDETERMINISTIC"),
                 "float32": ("TENSOR_CORE", "DOWN_CONVERT_INPUTS", "REDUCED_PRECISION_REDUCTION", "FFT",
                             "NONDETERMINISTIC"),
                 "float64": ("TENSOR_CORE", "DOWN_CONVERT_INPUTS", "REDUCED_PRECISION_REDUCTION", "FFT",
                             "NONDETERMINISTIC")}
"""cudnn.numerical_note members whose engines are dropped, by dtype: the records compute float32 and float64 in
their own precision, deterministically (CuPy's cuBLAS runs without TF32 unless CUPY_TF32=1)."""

ALIGNMENT = 16  # bytes: what cuDNN's engines assume of every tensor's address (the frontend's default)
CACHE = "cudnn-convolution-plans"  # ctx.shared[CACHE]: _PlanCache of the plan
CUDNN, IM2COL = "cudnn", "im2col"
UNAVAILABLE = ("nvidia-cudnn-frontend is not installed", "cuDNN could not make a handle")  # no graph can run


def import_frontend() -> Any:
    """The ``cudnn`` module of nvidia-cudnn-frontend (ImportError where it is not installed)."""
    import cudnn
    return cudnn


@dataclass(frozen=True)
class Config:
    """What a cuDNN convolution graph is built for: one per distinct value in a plan."""

    kind: str  # FORWARD, DATA or FILTER
    x_shape: tuple[int, ...]  # flowjob's layout
    w_shape: tuple[int, ...]
    y_shape: tuple[int, ...]
    channels_last: bool
    dtype: str
    pads: tuple[tuple[int, int], ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    groups: int
    bias: bool = False
    relu: bool = False
    device: int = 0  # the CUDA device the plan runs on: a graph is built with that device's handle

    @classmethod
    def of(cls, ctx: KernelContext) -> "Config":
        """The configuration of a convolution node (its attributes are valid: the record's inference ran)."""
        kind = KINDS[ctx.op]
        attrs = ctx.attrs
        if kind == FORWARD:
            x_shape, w_shape = ctx.inputs[0].shape, ctx.inputs[1].shape
        elif kind == DATA:
            x_shape, w_shape = attrs["x_shape"], ctx.inputs[1].shape
        else:
            x_shape, w_shape = ctx.inputs[0].shape, attrs["w_shape"]
        rank = len(x_shape) - 2
        dilations = attrs.get("dilations")
        geom = ConvGeometry.create(x_shape, w_shape, attrs.get("strides", 1), attrs.get("padding", "VALID"),
                                   1 if dilations is None else dilations, attrs.get("groups", 1),
                                   attrs.get("data_format", FORMATS[rank][0]))
        win = geom.window
        bias = ctx.op == CONV2D_BIAS.name
        return cls(kind, tuple(geom.x_shape), tuple(geom.w_shape), tuple(geom.y_shape), geom.channels_last,
                   np.dtype(ctx.inputs[0].dtype).name, tuple(win.pads), tuple(win.strides), tuple(win.dilations),
                   geom.groups, bias, bias and attrs.get("activation") == "relu", int(ctx.xp.cuda.Device().id))


def cudnn_dims(shape: tuple[int, ...], channels_last: bool) -> tuple[list[int], list[int]]:
    """A tensor of flowjob's layout as cuDNN sees it: dims in channels-first order, strides (in elements) of the
    memory as laid out (row-major in flowjob's order). Filters too (F in front, C/groups where C is)."""
    order = [0, len(shape) - 1, *range(1, len(shape) - 1)] if channels_last else list(range(len(shape)))
    row_major = [1] * len(shape)
    for axis in range(len(shape) - 2, -1, -1):
        row_major[axis] = row_major[axis + 1] * int(shape[axis + 1])
    return [int(shape[a]) for a in order], [row_major[a] for a in order]


@dataclass
class Planned:
    """A configuration's built cuDNN graph, its tensors by role and the workspace its plan needs."""

    graph: Any
    tensors: dict[str, Any]  # "x", "w", "y" (and "b"): the graph's tensors, dy as "y" for the gradients
    workspace_bytes: int
    plan_name: str
    handle: Any = None  # the cuDNN handle of the configuration's device


class _PlanCache:
    """A plan's cuDNN state: the frontend, a handle per device, and each configuration's Planned graph or the
    reason cuDNN does not run it (so each is built, refused and logged once)."""

    def __init__(self) -> None:
        self.frontend: Any = None
        self.handles: dict[int, Any] = {}
        self.unavailable: str | None = None  # why no configuration can run on cuDNN in this plan
        self.entries: dict[Config, Planned | str] = {}
        self.paths: dict[str, str] = {}  # node name -> "cudnn" or "im2col: why"
        self.builds = 0

    def open(self, device: int) -> str | None:
        """Load the frontend and make the device's handle (on the current device, which is ``device``), once; the
        reason where that fails."""
        if self.unavailable is not None or device in self.handles:
            return self.unavailable
        if self.frontend is None:
            try:
                self.frontend = import_frontend()
            except ImportError as exc:
                self.unavailable = f"nvidia-cudnn-frontend is not installed (pip install 'flowjob-gpu[cudnn]'): {exc}"
                return self.unavailable
        try:
            handle = self.frontend.create_handle()
        except Exception as exc:  # no cuDNN library, no device, a driver too old: the frontend's words say which
            self.unavailable = f"cuDNN could not make a handle ({type(exc).__name__}: {exc})"
            return self.unavailable
        self.handles[device] = handle
        weakref.finalize(self, _destroy, self.frontend, handle)
        return None

    def planned(self, config: Config) -> Planned | str:
        """The configuration's Planned graph, built on its first request; or why cuDNN does not run it."""
        found = self.entries.get(config)
        if found is None:
            reason = self.open(config.device)
            if reason is None and config.dtype not in DATA_TYPES:
                reason = f"cuDNN has no {config.dtype} convolution here (only {', '.join(DATA_TYPES)})"
            if reason is None:
                self.builds += 1
                try:
                    found = plan_graph(self.frontend, self.handles[config.device], config)
                except Exception as exc:  # cudnnGraphNotSupportedError, or the backend's refusal in other words
                    reason = f"the frontend refused the configuration ({type(exc).__name__}: {exc})"
            self.entries[config] = found = reason if found is None else found
        return found


def _destroy(frontend: Any, handle: Any) -> None:
    try:
        frontend.destroy_handle(handle)
    except Exception:  # the process is ending, or the device is gone: nothing is left to free
        pass


def build_graph(cudnn: Any, handle: Any, config: Config) -> tuple[Any, dict[str, Any]]:
    """The cuDNN graph of a configuration and its tensors by role (not validated yet: that needs a device)."""
    io = getattr(cudnn.data_type, DATA_TYPES[config.dtype])
    compute = getattr(cudnn.data_type, COMPUTE_TYPES[config.dtype])
    graph = cudnn.pygraph(io_data_type=io, intermediate_data_type=compute, compute_data_type=compute, handle=handle)
    last = config.channels_last
    x_dims, x_strides = cudnn_dims(config.x_shape, last)
    w_dims, w_strides = cudnn_dims(config.w_shape, last)
    y_dims, y_strides = cudnn_dims(config.y_shape, last)
    window = dict(pre_padding=[p[0] for p in config.pads], post_padding=[p[1] for p in config.pads],
                  stride=list(config.strides), dilation=list(config.dilations), compute_data_type=compute)
    tensors: dict[str, Any] = {}
    if config.kind == FORWARD:
        x = tensors["x"] = graph.tensor(name="x", dim=x_dims, stride=x_strides, data_type=io)
        w = tensors["w"] = graph.tensor(name="w", dim=w_dims, stride=w_strides, data_type=io)
        out = graph.conv_fprop(image=x, weight=w, name="conv_fprop", **window)
        if config.bias:
            channels = config.w_shape[0]
            b = tensors["b"] = graph.tensor(name="b", dim=[1, channels] + [1] * (len(x_dims) - 2),
                                            stride=[channels] + [1] * (len(x_dims) - 1), data_type=io)
            out = graph.bias(input=out, bias=b, name="bias", compute_data_type=compute)
            if config.relu:
                out = graph.relu(input=out, name="relu", compute_data_type=compute)
        tensors["y"] = out.set_output(True).set_dim(y_dims).set_stride(y_strides).set_data_type(io)
    elif config.kind == DATA:
        dy = tensors["y"] = graph.tensor(name="dy", dim=y_dims, stride=y_strides, data_type=io)
        w = tensors["w"] = graph.tensor(name="w", dim=w_dims, stride=w_strides, data_type=io)
        dx = graph.conv_dgrad(loss=dy, filter=w, name="conv_dgrad", **window)
        tensors["x"] = dx.set_output(True).set_dim(x_dims).set_stride(x_strides).set_data_type(io)
    else:
        x = tensors["x"] = graph.tensor(name="x", dim=x_dims, stride=x_strides, data_type=io)
        dy = tensors["y"] = graph.tensor(name="dy", dim=y_dims, stride=y_strides, data_type=io)
        dw = graph.conv_wgrad(image=x, loss=dy, name="conv_wgrad", **window)
        tensors["w"] = dw.set_output(True).set_dim(w_dims).set_stride(w_strides).set_data_type(io)
    return graph, tensors


def plan_graph(cudnn: Any, handle: Any, config: Config) -> Planned:
    """Build the configuration's graph and its execution plan: the heuristics' first engine whose numerics are the
    records' (``REFUSED_NOTES``) that builds. Raises where the frontend refuses the graph or no engine remains."""
    graph, tensors = build_graph(cudnn, handle, config)
    graph.validate()
    graph.build_operation_graph()
    graph.create_execution_plans([getattr(cudnn.heur_mode, mode) for mode in HEURISTICS])
    graph.deselect_numeric_notes([getattr(cudnn.numerical_note, note) for note in REFUSED_NOTES[config.dtype]])
    graph.check_support()
    graph.build_plans()
    try:  # the selected plan's name, for the log only
        name = str(graph.get_plan_name_at_index(getattr(graph, "_plan_index", 0)))
    except Exception:
        name = "?"
    return Planned(graph, tensors, int(graph.get_workspace_size()), name, handle)


def pointer(a: Any) -> int:
    """A device array's address."""
    return int(a.data.ptr)


class AlignedInputs:
    """A node's inputs as cuDNN reads them: an input that is C-contiguous at an ``ALIGNMENT``-byte address as itself,
    another copied into a buffer of this node made on the first such call (``ctx.workspace``, aligned as every
    allocation is) and reused by later ones."""

    def __init__(self, ctx: KernelContext) -> None:
        self.ctx = ctx
        self.buffers: dict[int, Any] = {}

    def __call__(self, index: int, a: Any) -> Any:
        if a.flags.c_contiguous and pointer(a) % ALIGNMENT == 0:
            return a
        buf = self.buffers.get(index)
        if buf is None:
            spec = self.ctx.inputs[index]
            buf = self.buffers[index] = self.ctx.workspace(spec.shape, spec.dtype)
        self.ctx.xp.copyto(buf, a)
        return buf


def cudnn_convolution_kernel(ctx: KernelContext) -> Any:
    """Every convolution op (``KINDS``): inputs (x, w[, b]), (dy, w) or (x, dy) as the records take them; the
    output the record's. On cuDNN where it runs the configuration, else the record's own kernel."""
    cache = ctx.shared.get(CACHE)
    if cache is None:
        cache = ctx.shared[CACHE] = _PlanCache()
    config = Config.of(ctx)
    new = config not in cache.entries  # logged once per configuration and plan, when it is built or refused
    planned = cache.planned(config)
    unfused = None  # why the bias and ReLU run after cuDNN's convolution rather than in its graph
    if isinstance(planned, str) and config.bias and not planned.startswith(UNAVAILABLE):
        alone = cache.planned(replace(config, bias=False, relu=False))
        if not isinstance(alone, str):
            unfused, planned = planned, alone
    if isinstance(planned, str):
        cache.paths[ctx.node_name] = f"{IM2COL}: {planned}"
        if new:
            logger.info("node %r (%s): im2col + cuBLAS, not cuDNN: %s", ctx.node_name, ctx.op, planned)
        return own_kernel(ctx, planned)
    cache.paths[ctx.node_name] = CUDNN
    if new:
        logger.info("node %r (%s): cuDNN (plan %s, workspace %d bytes)%s", ctx.node_name, ctx.op, planned.plan_name,
                    planned.workspace_bytes, "" if unfused is None else
                    f"; the bias{' and ReLU' if config.relu else ''} after it, in CuPy: for the fused graph {unfused}")
    return _launcher(ctx, cache, config, planned, epilogue=unfused is not None)


def _launcher(ctx: KernelContext, cache: _PlanCache, config: Config, planned: Planned, epilogue: bool = False
              ) -> Callable[..., Any]:
    """``epilogue``: the graph is the convolution alone; the bias (and the ReLU) follow as CuPy passes."""
    cp, frontend, handle = ctx.xp, cache.frontend, planned.handle
    graph, tensors = planned.graph, planned.tensors
    out = ctx.out(0)
    workspace = ctx.scratch((planned.workspace_bytes,), np.uint8) if planned.workspace_bytes else None
    dense = AlignedInputs(ctx)
    # the inputs' roles in the records' order, and the output's
    roles = {FORWARD: ("x", "w", "b"), DATA: ("y", "w"), FILTER: ("x", "y")}[config.kind]
    result = {FORWARD: "y", DATA: "x", FILTER: "w"}[config.kind]
    out_tensor = tensors[result]
    in_tensors = [tensors[role] for role in roles[:len(ctx.inputs)] if role in tensors]
    # the bias as it broadcasts over y: (F,) along the last axis channels last, (F, 1, ...) channels first
    bias_shape = (-1,) if config.channels_last else (-1,) + (1,) * (len(config.y_shape) - 2)
    relu = config.relu

    def run(*inputs: Any) -> Any:
        pack = {t: pointer(dense(i, a)) for i, (t, a) in enumerate(zip(in_tensors, inputs))}
        pack[out_tensor] = pointer(out)
        # the step's stream inside a recorded step: the launch joins its graph (the frontend skips an unchanged one)
        frontend.set_stream(handle, cp.cuda.get_current_stream().ptr)
        graph.execute(pack, None if workspace is None else pointer(workspace), handle=handle)
        if epilogue:
            cp.add(out, inputs[2].reshape(bias_shape), out=out)
            if relu:
                cp.maximum(out, 0, out=out)
        return out

    return run


def paths(shared: dict[Any, Any]) -> dict[str, str]:
    """Which path each convolution node of a plan took (its kernels' shared dict, ``plan.shared``): "cudnn", or
    "im2col: " and why; empty where no convolution ran through this module."""
    cache = shared.get(CACHE)
    return dict(cache.paths) if cache is not None else {}


KERNEL_BUILDERS: dict[str, Callable[[KernelContext], Any]] = {op: cudnn_convolution_kernel for op in KINDS}
"""The convolution ops' gpu overrides (``flowjob_gpu.overrides.LIBRARY_KERNEL_BUILDERS``)."""
