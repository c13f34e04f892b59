"""A double of nvidia-cudnn-frontend's graph API (``cudnn.pygraph``), as far as flowjob_gpu.cudnn_convolution uses
it, for machines without cuDNN or a device: it records what the graph is built from (tensors' dims, strides and
types, each node's parameters, the heuristics and the numerical notes dropped, the handle's streams) and its
``execute`` computes the convolution the way cuDNN defines it (dims channels first, strides in elements over the
memory at the given addresses, pre and post padding, stride, dilation, groups from the filter's second dim) with
the records' numpy reference kernels, so a wrong dim, stride or pad gives wrong numbers. On the emulated CuPy, an
``execute`` issued while a stream captures is recorded there and replayed with the graph, as a launch is.
``refuse(config_graph)`` decides whether ``check_support`` raises (the frontend's "no engine supports it")."""
from __future__ import annotations

import ctypes
import enum
import types
from typing import Any, Callable

import numpy as np

from flowjob_gpu.emulation import cuda as emulated_cuda
from flowjob_ops.kernels import conv
from flowjob_ops.kernels.window import FORMATS

DataType = enum.Enum("data_type", "FLOAT DOUBLE HALF BFLOAT16")
HeurMode = enum.Enum("heur_mode", "A B FALLBACK")
NumericalNote = enum.Enum("numerical_note", "TENSOR_CORE DOWN_CONVERT_INPUTS REDUCED_PRECISION_REDUCTION FFT "
                                            "NONDETERMINISTIC WINOGRAD")
NUMPY = {DataType.FLOAT: np.float32, DataType.DOUBLE: np.float64, DataType.HALF: np.float16}


class NotSupported(RuntimeError):
    """The frontend's cudnnGraphNotSupportedError, in the double."""


class Tensor:
    def __init__(self, name: str, dim: Any = None, stride: Any = None, data_type: Any = None,
                 virtual: bool = False) -> None:
        self.name, self.dim, self.stride, self.data_type = name, dim, stride, data_type
        self.is_virtual = virtual

    def set_output(self, value: bool) -> "Tensor":
        self.is_virtual = not value
        return self

    def set_dim(self, dim: Any) -> "Tensor":
        self.dim = list(dim)
        return self

    def set_stride(self, stride: Any) -> "Tensor":
        self.stride = list(stride)
        return self

    def set_data_type(self, data_type: Any) -> "Tensor":
        self.data_type = data_type
        return self


class Graph:
    def __init__(self, frontend: "Frontend", **kwargs: Any) -> None:
        self.frontend, self.kwargs = frontend, kwargs
        self.tensors: list[Tensor] = []
        self.nodes: list[tuple[str, dict[str, Tensor], dict[str, Any], Tensor]] = []
        self.steps: list[str] = []
        self.heuristics: list[Any] = []
        self.dropped_notes: list[Any] = []
        self.executions: list[tuple[dict, Any, Any]] = []

    def tensor(self, name: str, dim: Any, stride: Any, data_type: Any) -> Tensor:
        t = Tensor(name, list(dim), list(stride), data_type)
        self.tensors.append(t)
        return t

    def _node(self, op: str, inputs: dict[str, Tensor], name: str = "", **params: Any) -> Tensor:
        out = Tensor(f"{name or op}::out", virtual=True)
        self.nodes.append((op, inputs, params, out))
        return out

    def conv_fprop(self, image: Tensor, weight: Tensor, **params: Any) -> Tensor:
        return self._node("conv_fprop", {"image": image, "weight": weight}, **params)

    def conv_dgrad(self, loss: Tensor, filter: Tensor, **params: Any) -> Tensor:
        return self._node("conv_dgrad", {"loss": loss, "filter": filter}, **params)

    def conv_wgrad(self, image: Tensor, loss: Tensor, **params: Any) -> Tensor:
        return self._node("conv_wgrad", {"image": image, "loss": loss}, **params)

    def bias(self, input: Tensor, bias: Tensor, **params: Any) -> Tensor:
        return self._node("bias", {"input": input, "bias": bias}, **params)

    def relu(self, input: Tensor, **params: Any) -> Tensor:
        return self._node("relu", {"input": input}, **params)

    def validate(self) -> None:
        self.steps.append("validate")

    def build_operation_graph(self) -> None:
        self.steps.append("build_operation_graph")

    def create_execution_plans(self, modes: list[Any]) -> None:
        self.steps.append("create_execution_plans")
        self.heuristics = list(modes)

    def deselect_numeric_notes(self, notes: list[Any]) -> "Graph":
        self.dropped_notes = list(notes)
        return self

    def check_support(self) -> None:
        self.steps.append("check_support")
        if self.frontend.refuse(self):
            raise NotSupported("No valid engine configs returned from heuristics")

    def build_plans(self) -> None:
        self.steps.append("build_plans")

    def get_workspace_size(self) -> int:
        return self.frontend.workspace_bytes

    def get_plan_name_at_index(self, index: int) -> str:
        return f"eng{index}_double"

    def execute(self, pack: dict[Tensor, int], workspace: Any, handle: Any = None) -> None:
        assert self.steps[-1] == "build_plans", f"executed before its plan was built: {self.steps}"
        assert all(type(p) is int for p in pack.values()), pack
        self.executions.append((dict(pack), workspace, handle))
        stream = self.frontend.streams.get(id(handle))
        capture = emulated_cuda.recorder()
        if capture is not None:  # a launch on a capturing stream: it runs when the graph replays
            assert stream == emulated_cuda.get_current_stream().ptr, "execute on another stream than the capture's"
            capture.record(self._compute, (dict(pack),), {})
        else:
            self._compute(pack)

    # cuDNN's arithmetic, over the memory at the pack's addresses ----------------------------------------------------
    def _view(self, t: Tensor, address: int) -> np.ndarray:
        dtype = np.dtype(NUMPY[t.data_type])
        span = (sum((d - 1) * s for d, s in zip(t.dim, t.stride)) + 1) * dtype.itemsize
        memory = (ctypes.c_char * span).from_address(address)
        return np.ndarray(tuple(t.dim), dtype, buffer=memory, strides=tuple(s * dtype.itemsize for s in t.stride))

    def _compute(self, pack: dict[Tensor, int]) -> None:
        values: dict[int, np.ndarray] = {id(t): self._view(t, address) for t, address in pack.items()
                                         if t.data_type in NUMPY}
        for op, inputs, params, out in self.nodes:
            if op in ("conv_fprop", "conv_dgrad", "conv_wgrad"):
                result = self._convolve(op, inputs, params, values, out)
            elif op == "bias":
                result = values[id(inputs["input"])] + values[id(inputs["bias"])].astype(np.float64)
            else:
                result = np.maximum(values[id(inputs["input"])], 0)
            if out.is_virtual:
                values[id(out)] = result
            else:
                np.copyto(values[id(out)], result, casting="unsafe")

    def _convolve(self, op: str, inputs: dict[str, Tensor], params: dict[str, Any], values: dict[int, np.ndarray],
                  out: Tensor) -> np.ndarray:
        if op == "conv_fprop":
            x, w = values[id(inputs["image"])], values[id(inputs["weight"])]
            x_dims, w_dims = x.shape, w.shape
        elif op == "conv_dgrad":
            dy, w = values[id(inputs["loss"])], values[id(inputs["filter"])]
            x_dims, w_dims = tuple(out.dim), w.shape
        else:
            x, dy = values[id(inputs["image"])], values[id(inputs["loss"])]
            x_dims, w_dims = x.shape, tuple(out.dim)
        rank = len(x_dims) - 2
        pads = [(0, 0), (0, 0), *zip(params["pre_padding"], params["post_padding"])]
        groups = x_dims[1] // w_dims[1]  # cuDNN's grouped convolution: the filter holds C / groups channels
        geom = conv.ConvGeometry.create(x_dims, w_dims, params["stride"], pads, params["dilation"], groups,
                                        FORMATS[rank][0])
        dtype = np.float64  # the reference in float64: the records' float32 rounding is the tests' tolerance
        if op == "conv_fprop":
            y = np.empty(geom.y_shape, dtype)
            return conv.ConvForward(np, geom, dtype, y)(x.astype(dtype), w.astype(dtype))
        if op == "conv_dgrad":
            dx = np.empty(geom.x_shape, dtype)
            return conv.ConvBackwardData(np, geom, dtype, dx)(dy.astype(dtype), w.astype(dtype))
        dw = np.empty(geom.w_shape, dtype)
        return conv.ConvBackwardFilter(np, geom, dtype, dw)(x.astype(dtype), dy.astype(dtype))


class Handle:
    pass


class Frontend(types.SimpleNamespace):
    """The ``cudnn`` module's double: ``graphs`` built so far, ``handles`` made and destroyed."""

    def __init__(self, refuse: Callable[[Graph], bool] = lambda graph: False, workspace_bytes: int = 512,
                 handle_error: Exception | None = None) -> None:
        super().__init__(data_type=DataType, heur_mode=HeurMode, numerical_note=NumericalNote,
                         cudnnGraphNotSupportedError=NotSupported)
        self.refuse, self.workspace_bytes, self.handle_error = refuse, workspace_bytes, handle_error
        self.graphs: list[Graph] = []
        self.handles: list[Handle] = []
        self.destroyed: list[Handle] = []
        self.streams: dict[int, int] = {}

    def create_handle(self) -> Handle:
        if self.handle_error is not None:
            raise self.handle_error
        handle = Handle()
        self.handles.append(handle)
        return handle

    def destroy_handle(self, handle: Handle) -> None:
        self.destroyed.append(handle)

    def set_stream(self, handle: Handle, stream: int) -> None:
        self.streams[id(handle)] = stream

    def pygraph(self, **kwargs: Any) -> Graph:
        graph = Graph(self, **kwargs)
        self.graphs.append(graph)
        return graph
