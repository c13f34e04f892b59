"""Legacy v0.4's eager ``flow.Tensor`` and ``flow.tensor``.

A tensor holds an array of the default session's backend. Every operation on tensors is a call of op
records through a one-operation job (``flowjob_core.imperative.tape``): the Python operators are the op
packages' blob operators, and the methods that run an op package's records (``reshape``, ``sum``, ``to``,
``normal_``, ...) are that package's, registered with ``OpRegistry.add_tensor_method`` and found by
``Tensor.__getattr__`` in the default session: core names no op of another package. A result computed from
a tensor that requires a gradient keeps that job for ``backward()``. Arrays are never written in place: the
in-place methods (``fill_``, ``copy_``, ``normal_``) give the tensor a new array (``replace_value``), so a
value kept for a gradient stays what it was.
"""
from __future__ import annotations

import numbers
import types
from typing import Any, Callable

import numpy as np

from flowjob_core.errors import FlowjobError
from flowjob_core.imperative import autograd
from flowjob_core.imperative.grad_mode import is_grad_enabled
from flowjob_core.imperative.tape import Segment, TapeBuilder
from flowjob_core.ir import dtypes
from flowjob_core.plugins.builtin_ops import ADD_N
from flowjob_core.runtime.one_element import one_element
from flowjob_core.runtime.session import get_default_session
from flowjob_core.trace.blob import Blob
from flowjob_core.trace.builder import apply

_DEVICE_TAGS = {"cpu": "cpu", "cuda": "gpu", "gpu": "gpu"}  # legacy device type -> backend tag


class Device:
    """Where a tensor lives (legacy ``tensor.device``): ``type`` ``"cpu"`` or ``"cuda"``, and an index."""

    __slots__ = ("type", "index")
    type: str
    index: int

    def __init__(self, spec: "str | Device" = "cpu", index: int | None = None) -> None:
        text = f"{spec.type}:{spec.index if index is None else index}" if isinstance(spec, Device) else str(spec)
        kind, _, number = text.partition(":")
        if kind not in _DEVICE_TAGS:
            raise FlowjobError(f"device {spec!r}: the device type must be one of {sorted(_DEVICE_TAGS)}")
        self.type = "cuda" if kind == "gpu" else kind
        self.index = int(number) if number else (index or 0)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Device) and (self.type, self.index) == (other.type, other.index)

    def __hash__(self) -> int:
        return hash((self.type, self.index))

    def __repr__(self) -> str:
        return f"device(type='{self.type}', index={self.index})"


def backend_device(device: Any, what: str) -> Device:
    """The device a tensor asked for, checked against the session's backend (eager tensors live there)."""
    backend = get_default_session().backend
    here = Device("cuda" if backend.tag == "gpu" else "cpu")
    if device is None:
        return here
    wanted = Device(device)
    if _DEVICE_TAGS[wanted.type] != backend.tag or wanted.index != 0:
        raise FlowjobError(f"{what}: device {wanted!r} is not this session's backend ({backend.name}, {here!r}); "
                           f"eager tensors live on the backend the session runs on")
    return here


def tensor_dtype(value: Any, what: str) -> np.dtype:
    try:
        return dtypes.as_dtype(value)
    except TypeError as exc:
        raise TypeError(f"{what}: {exc}") from None


def _array(data: Any, dtype: Any, what: str) -> Any:
    """``data`` (nested lists, an array, a number) as an array of the session's backend, of ``dtype`` (None:
    the data's own dtype, which must be one flowjob supports)."""
    array = np.asarray(data)
    if array.dtype.kind not in "biuf":
        raise TypeError(f"{what}: data of dtype {array.dtype} is not a tensor's: supported dtypes are "
                        f"{sorted(d.name for d in dtypes.SUPPORTED)}")
    target = tensor_dtype(array.dtype if dtype is None else dtype, what)
    return get_default_session().backend.from_host(np.array(array, dtype=target, copy=True))


class Tensor:
    """Legacy v0.4's eager tensor (``flow.Tensor``).

    ``flow.Tensor(*shape)`` is zeros of that shape, ``flow.Tensor(data)`` the data (nested lists or an
    array) as ``dtype`` (default ``flow.float32``), ``flow.Tensor(tensor)`` a copy; ``requires_grad=True``
    makes it a leaf that ``backward()`` gives a ``.grad``. Consistent (placed, split) tensors are refused.
    """

    def __init__(self, *args: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False,
                 placement: Any = None, sbp: Any = None, is_consistent: bool = False, is_lazy: bool = False,
                 data_initializer: Any = None, determining_initializer: Any = None) -> None:
        if placement is not None or sbp is not None or is_consistent or is_lazy:
            raise NotImplementedError("flow.Tensor: consistent and lazy tensors (placement, sbp, is_consistent, "
                                      "is_lazy) are not supported; eager tensors are local to this process")
        if data_initializer is not None or determining_initializer is not None:
            raise NotImplementedError("flow.Tensor: data_initializer and determining_initializer are not supported; "
                                      "initialize with fill_, normal_, uniform_ or copy_")
        what = "flow.Tensor"
        self._device = backend_device(device, what)
        target = tensor_dtype(dtypes.float32 if dtype is None else dtype, what)
        if not args:
            raise TypeError("flow.Tensor() needs a shape, data or a tensor")
        if len(args) == 1 and isinstance(args[0], Tensor):
            value = args[0].detach().to(target, True)._value  # a copy (``to`` is the op package's method)
        elif len(args) == 1 and isinstance(args[0], (list, tuple, np.ndarray)):
            value = _array(args[0], target, what)
        elif all(isinstance(a, numbers.Integral) and not isinstance(a, bool) for a in args):
            value = get_default_session().backend.xp.zeros(tuple(int(a) for a in args), dtype=target)
        else:
            raise TypeError(f"flow.Tensor: invalid arguments {args!r}: expected a shape (ints), data (a list, tuple "
                            f"or array) or a tensor")
        self._init(value, None, None, False)
        self.requires_grad = requires_grad

    # construction -------------------------------------------------------------------------------------------
    def _init(self, value: Any, segment: Segment | None, lbn: str | None, requires_grad: bool) -> None:
        self._value = value
        self._segment = segment
        self._lbn = lbn
        self._requires_grad = requires_grad
        self._grad: Tensor | None = None
        self._retains_grad = False
        if not hasattr(self, "_device"):
            self._device = backend_device(None, "flow.Tensor")

    @classmethod
    def _make(cls, value: Any, segment: Segment | None = None, lbn: str | None = None,
              requires_grad: bool = False) -> "Tensor":
        tensor = object.__new__(Tensor)
        tensor._init(value, segment, lbn, requires_grad)
        return tensor

    def _result(self, value: Any) -> "Tensor":
        """A new leaf tensor holding ``value`` (a gradient), not requiring a gradient."""
        return Tensor._make(value)

    def _accumulate_grad(self, value: Any) -> None:
        grad = Tensor._make(value)
        self._grad = grad if self._grad is None else run_on_blobs(
            "grad_sum", lambda a, b: apply(ADD_N.name, [a, b]), self._grad, grad)

    # properties ---------------------------------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._value.shape)

    @property
    def dtype(self) -> np.dtype:
        return self._value.dtype

    @property
    def device(self) -> Device:
        return self._device

    @property
    def is_cuda(self) -> bool:
        return self._device.type == "cuda"

    def get_device(self) -> Device:
        return self._device

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def dim(self) -> int:
        return self.ndim

    def ndimension(self) -> int:
        return self.ndim

    def size(self, idx: int | None = None) -> Any:
        return self.shape if idx is None else self.shape[idx]

    def numel(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def nelement(self) -> int:
        return self.numel()

    def element_size(self) -> int:
        return self.dtype.itemsize

    is_consistent = property(lambda self: False)
    is_lazy = property(lambda self: False)
    is_determined = property(lambda self: True)
    placement = property(lambda self: None)
    sbp = property(lambda self: None)

    def determine(self, determining_initializer: Any = None) -> None:
        """Legacy's lazy allocation: a flowjob tensor always holds its array."""

    @property
    def requires_grad(self) -> bool:
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        if value and not dtypes.is_floating(self.dtype):
            raise FlowjobError(f"requires_grad=True needs a floating tensor; this one is {self.dtype}")
        if self._segment is not None and not value:
            raise FlowjobError("requires_grad can be set to False on leaf tensors only; use detach()")
        self._requires_grad = bool(value)

    def requires_grad_(self, requires_grad: bool = True) -> "Tensor":
        self.requires_grad = requires_grad
        return self

    @property
    def is_leaf(self) -> bool:
        return self._segment is None

    @property
    def grad(self) -> "Tensor | None":
        return self._grad

    @grad.setter
    def grad(self, value: "Tensor | None") -> None:
        if value is not None and (not isinstance(value, Tensor) or value.shape != self.shape):
            raise FlowjobError(f"a tensor's grad must be None or a tensor of its shape {self.shape}, got {value!r}")
        self._grad = value

    @property
    def grad_fn(self) -> str | None:
        """The op that made this tensor (legacy returned its backward function object), None for a leaf."""
        if self._segment is None:
            return None
        node = next((n for n in self._segment.job.nodes if self._lbn in n.outputs), None)
        return None if node is None else f"<{node.op} backward>"

    def retain_grad(self) -> None:
        """Give this non-leaf tensor a ``.grad`` in later backward passes too."""
        if not self._requires_grad:
            raise FlowjobError("retain_grad() on a tensor that does not require a gradient")
        self._retains_grad = True

    def backward(self, gradient: "Tensor | None" = None, retain_graph: bool = False,
                 create_graph: bool = False) -> None:
        """Add this tensor's gradient to the leaves' ``.grad`` (see ``flow.autograd.backward``)."""
        autograd.backward(self, gradient, retain_graph, create_graph)

    # values -------------------------------------------------------------------------------------------------
    def numpy(self) -> np.ndarray:
        """The value, a host copy (one of shape (1,) converts with ``float()`` as numpy 1 allowed)."""
        return one_element(np.array(get_default_session().backend.to_host(self._value), copy=True))

    def tolist(self) -> Any:
        return self.numpy().tolist()

    def item(self) -> Any:
        if self.numel() != 1:
            raise FlowjobError(f"item() needs a one-element tensor; this one has shape {self.shape}")
        return self.numpy().reshape(()).item()

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __bool__(self) -> bool:
        return bool(self.item())

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        array = self.numpy()
        return array if dtype is None else array.astype(dtype)

    def __repr__(self) -> str:
        text = np.array2string(self.numpy(), separator=", ", prefix="tensor(")
        extra = ", requires_grad=True" if self._requires_grad and self.is_leaf else ""
        if self.grad_fn is not None:
            extra = f", grad_fn={self.grad_fn}"
        return f"tensor({text}, dtype=oneflow.{self.dtype.name}{extra})"

    def __str__(self) -> str:
        return repr(self)  # a subclass's repr (Parameter's) too


    @property
    def data(self) -> "Tensor":
        """The value without its history (shares the array)."""
        return self.detach()

    @data.setter
    def data(self, value: "Tensor") -> None:
        self.copy_(value)

    def detach(self) -> "Tensor":
        return Tensor._make(self._value)

    # in place (a new array each time) --------------------------------------------------------------------------
    def replace_value(self, value: Any, what: str) -> "Tensor":
        """Give this leaf tensor the array ``value`` of its shape (``what``, the method, names it in errors): how the
        in-place methods change a tensor without writing into an array a gradient may keep."""
        if self._segment is not None:
            raise FlowjobError(f"{what} on a tensor computed from others (it would cut its gradient); call it on "
                               f"a leaf or on detach()")
        if tuple(value.shape) != self.shape:
            raise FlowjobError(f"{what}: a value of shape {tuple(value.shape)} for a tensor of shape {self.shape}")
        self._value = value.astype(self.dtype, copy=False) if value.dtype != self.dtype else value
        return self

    def copy_(self, other: Any) -> "Tensor":
        """Take the value of ``other`` (a tensor or array of this shape)."""
        value = other._value if isinstance(other, Tensor) else _array(other, self.dtype, "copy_")
        return self.replace_value(value, "copy_")

    def zeros_(self) -> "Tensor":
        return self.fill_(0)

    # operations (the op package's methods: reshape, permute, sum, to, ...; these compose them) -----------------
    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> "Tensor":
        rank = max(self.ndim, 1)
        start, end = start_dim % rank, end_dim % rank
        shape = self.shape or (1,)
        return self.reshape(shape[:start] + (-1,) + shape[end + 1:])

    def unsqueeze(self, dim: int) -> "Tensor":
        dim = dim % (self.ndim + 1)
        return self.reshape(self.shape[:dim] + (1,) + self.shape[dim:])

    def squeeze(self, dim: int | None = None) -> "Tensor":
        if dim is None:
            return self.reshape(tuple(d for d in self.shape if d != 1))
        dim = dim % self.ndim
        return self.reshape(self.shape[:dim] + self.shape[dim + 1:]) if self.shape[dim] == 1 else self

    def transpose(self, dim0: int, dim1: int) -> "Tensor":
        perm = list(range(self.ndim))
        perm[dim0], perm[dim1] = perm[dim1], perm[dim0]
        return self.permute(perm)

    @property
    def T(self) -> "Tensor":  # noqa: N802 - legacy's (and numpy's) name
        return self.permute(tuple(reversed(range(self.ndim))))

    def matmul(self, other: "Tensor") -> "Tensor":
        result: Tensor = _operator("__matmul__")(self, other)
        return result

    mm = matmul

    def float(self) -> "Tensor":
        return self.to(dtypes.float32)

    def double(self) -> "Tensor":
        return self.to(dtypes.float64)

    def half(self) -> "Tensor":
        return self.to(dtypes.float16)

    def int(self) -> "Tensor":
        return self.to(dtypes.int32)

    def long(self) -> "Tensor":
        return self.to(dtypes.int64)

    def add(self, other: Any) -> "Tensor":
        return self + other

    def sub(self, other: Any) -> "Tensor":
        return self - other

    def mul(self, other: Any) -> "Tensor":
        return self * other

    def div(self, other: Any) -> "Tensor":
        return self / other

    def pow(self, exponent: Any) -> "Tensor":
        return self ** exponent

    def gt(self, other: Any) -> "Tensor":
        return self > other

    def ge(self, other: Any) -> "Tensor":
        return self >= other

    def lt(self, other: Any) -> "Tensor":
        return self < other

    def le(self, other: Any) -> "Tensor":
        return self <= other

    # ``==`` and ``!=`` compare identity, as legacy's tensors did (modules keep tensors in sets and dicts);
    # eq and ne compare elements
    def eq(self, other: Any) -> "Tensor":
        return _operator("__eq__")(self, other)

    def ne(self, other: Any) -> "Tensor":
        return _operator("__ne__")(self, other)

    def __getattr__(self, name: str) -> Any:
        # only names the class lacks reach here: the methods op packages register (OpRegistry.add_tensor_method)
        method = None if name.startswith("_") else get_default_session().registries.ops.tensor_methods.get(name)
        if method is None:
            raise AttributeError(f"'flow.Tensor' object has no attribute {name!r} (the methods that run ops come "
                                 f"from the op packages' plugins: is flowjob-ops installed?)")
        return types.MethodType(method, self)

    def __setitem__(self, key: Any, value: Any) -> None:
        raise NotImplementedError("tensor[key] = value is not supported on flowjob's eager tensors (values are "
                                  "never written in place); build the new tensor, or copy_ a new value into a leaf")


def _operator(dunder: str) -> Callable[..., Any]:
    def method(self: Tensor, *args: Any) -> Any:
        # an array operand becomes a tensor of its own dtype (an index tuple stays what it is)
        operands = [Tensor._make(_array(a, None, dunder)) if isinstance(a, np.ndarray) else a for a in args]

        def on_blobs(blob: Blob, *rest: Any) -> Any:
            return blob._operator(dunder, *rest)

        return run_on_blobs(dunder.strip("_"), on_blobs, self, *operands)

    method.__name__ = method.__qualname__ = dunder
    return method


for _dunder in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__",
                "__rtruediv__", "__neg__", "__pow__", "__rpow__", "__mod__", "__rmod__", "__matmul__",
                "__rmatmul__", "__getitem__", "__lt__", "__le__", "__gt__", "__ge__"):
    setattr(Tensor, _dunder, _operator(_dunder))
del _dunder


def run_on_blobs(what: str, fn: Callable[..., Any], *args: Any) -> Any:
    """The one way tensors compute (``what`` names the job in errors): ``fn`` on blobs holding the tensors
    among ``args`` (other arguments as they are), run at once; its blobs come back as tensors. A result needs
    a gradient when a tensor argument does and it is floating."""
    tape = TapeBuilder(get_default_session(), what)
    blobs = [tape.feed(a._value, a) if isinstance(a, Tensor) else a for a in args]
    with tape.recording():
        out = fn(*blobs)
    if not isinstance(out, (Blob, tuple, list)):
        return out  # NotImplemented from an operator, a Python value
    track = is_grad_enabled() and any(isinstance(a, Tensor) and a.requires_grad for a in args)
    segment = tape.segment() if track else None

    def wrap(blob: Any) -> Any:
        if not isinstance(blob, Blob):
            return blob
        grad = track and dtypes.is_floating(blob.dtype)
        return Tensor._make(tape.values[blob.lbn], segment if grad else None, blob.lbn if grad else None, grad)

    return wrap(out) if isinstance(out, Blob) else tuple(wrap(b) for b in out)


def run_source(op: str, attrs: dict[str, Any]) -> Any:
    """The array an op without inputs (a constant, random numbers) makes: ``op`` as the op package names it."""
    tape = TapeBuilder(get_default_session(), op)
    with tape.recording():
        blob = apply(op, [], attrs)
    return tape.values[blob.lbn]


def tensor(data: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False, placement: Any = None,
           sbp: Any = None, is_consistent: bool = False, is_lazy: bool = False) -> Tensor:
    """Legacy ``flow.tensor``: a tensor of ``data`` (a number, nested lists or an array). Without ``dtype``
    it keeps the data's dtype, except that Python floats give ``flow.float32`` (as legacy did)."""
    if isinstance(data, Tensor) or not isinstance(data, (numbers.Number, list, tuple, np.ndarray)):
        raise TypeError(f"flow.tensor: data must be a number, a list, a tuple or an array, got {type(data).__name__}")
    array = np.asarray(data)
    if array.dtype.kind not in "biuf":
        raise TypeError(f"flow.tensor: data of dtype {array.dtype} is not a tensor's: supported dtypes are "
                        f"{sorted(d.name for d in dtypes.SUPPORTED)}")
    if dtype is None:
        dtype = dtypes.float32 if not isinstance(data, np.ndarray) and array.dtype.kind == "f" else array.dtype
        if array.dtype.kind == "b":
            raise TypeError("flow.tensor: boolean data has no flow dtype; pass dtype=flow.int8")
    return Tensor(array, dtype=tensor_dtype(dtype, "flow.tensor"), device=device, requires_grad=requires_grad,
                  placement=placement, sbp=sbp, is_consistent=is_consistent, is_lazy=is_lazy)


device = Device  # legacy's name: flow.device("cpu")

# the face's namespaces: flow.Tensor, flow.tensor, flow.device (flow.to is flowjob-ops')
NAMESPACES = {"flow": ["Tensor", "device", "tensor"]}
__all__ = ["Device", "Tensor", "backend_device", "device", "run_source", "run_on_blobs", "tensor", "tensor_dtype"]
