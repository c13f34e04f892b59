"""The emulated ``cupy.ndarray``: a numpy array kept behind a wall, as device memory is.

numpy cannot see through it: ``np.asarray(a)`` raises as CuPy's does (``__array__``), ``np.add(a, 1)``
raises (``__array_ufunc__ = None``, which also lets ``np.float32(2) * a`` fall back to ``a.__rmul__``,
as it works on CuPy), and so does any numpy function given one (``__array_function__``). ``float(a)``,
``int(a)`` and ``bool(a)`` of a one-element array work, as in CuPy; ``a.get()`` copies it to the host.

``unwrap`` and ``to_device`` are the wall's two doors for the emulated functions: the first hands
numpy the arrays behind emulated ones and refuses host arrays, the second wraps what numpy returns
(a numpy scalar from a reduction becomes a 0-d array, as CuPy returns).

Every device operation first asks ``recorder()`` whether the current stream captures (``capture.py``): if it
does, the operation is recorded for the graph instead of run (``device_op`` wraps the less frequent ones;
the operators, indexing and forwarded methods ask inline), and host transfers raise (``refuse_during_capture``).
"""
from __future__ import annotations

import functools
import operator
import types
from typing import Any, Iterator

import numpy as np

from flowjob_gpu.emulation.cuda import Device, MemoryPointer, recorder, refuse_during_capture
from flowjob_gpu.emulation.names import parameters_of, snapshot
from flowjob_gpu.emulation.unemulated import complete_class, not_emulated

IMPLICIT_CONVERSION = ("Implicit conversion to a NumPy array is not allowed. "
                       "Please use `.get()` to construct a NumPy array explicitly.")  # CuPy's words


DEVICE_MEMORY = "it works on device memory (a real GPU has it)"


# dtypes CuPy has kernels for: booleans, integers, floats and complex numbers up to 64-bit parts (no strings,
# objects, records, dates, nor long double)
DEVICE_KINDS = frozenset("biufc")


def check_dtype(dtype: np.dtype) -> None:
    if dtype.kind not in DEVICE_KINDS or dtype.char in "gG":
        raise ValueError(f"Unsupported dtype {dtype}")  # CuPy's words


def host_array_refused(value: Any) -> TypeError:
    return TypeError(f"Unsupported type {type(value)}: a host numpy array given to flowjob's emulated CuPy, as "
                     "CuPy refuses it; move host data to the device with the backend's from_host (cupy.asarray)")


def numpy_refused(name: str) -> TypeError:
    return TypeError(f"numpy.{name} was given a cupy.ndarray of flowjob's emulated CuPy: call the array module's "
                     f"own (xp.{name}), or copy the array to the host with the backend's to_host")


def device_op(op: Any) -> Any:
    """``op`` (an emulated device operation) recorded for the graph, not run, while the current stream captures."""
    @functools.wraps(op)
    def recorded(*args: Any, **kwargs: Any) -> Any:
        capture = recorder()
        if capture is None:
            return op(*args, **kwargs)
        return capture.record(op, args, kwargs)
    return recorded


def is_host_data(value: Any) -> bool:
    """Whether CuPy would copy ``value`` over from the host (a numpy array, a list or tuple not all of device
    arrays, a Python or numpy scalar) to use it as array data."""
    kind = type(value)
    if kind is ndarray:
        return False
    if kind is list or kind is tuple:
        return not value or any(map(is_host_data, value))
    return True


def _check_index(capture: Any, key: Any) -> None:
    """During capture: an index CuPy copies from the host (a numpy array, a list), or a boolean mask (CuPy reads
    its count of True back to size the result), is a host transfer."""
    for part in key if type(key) is tuple else (key,):
        kind = type(part)
        if kind is list or isinstance(part, np.ndarray):
            capture.refuse("an index copied from the host")
        if kind is ndarray and part.dtype.kind == "b":
            capture.refuse("a boolean mask index (CuPy reads its number of True elements back)")


class ndarray:
    """An array on the emulated device (``cupy.ndarray``): numpy memory numpy itself may not touch."""

    __slots__ = ("_array",)
    __array_priority__ = 100.0
    __array_ufunc__ = None  # numpy's ufuncs refuse it; numpy's scalars defer their operators to it
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, shape: Any, dtype: Any = float, memptr: Any = None, strides: Any = None,
                 order: str = "C") -> None:
        if memptr is not None or strides is not None:
            raise not_emulated("cupy.ndarray(memptr=..., strides=...)", DEVICE_MEMORY)
        self._array = np.empty(shape, dtype, order)

    def _capture_memory(self) -> np.ndarray:  # what a stream capture saves, restores and replays into
        return self._array

    # the wall ----------------------------------------------------------------
    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise TypeError(IMPLICIT_CONVERSION)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        raise numpy_refused(getattr(func, "__name__", str(func)))

    def get(self, stream: Any = None, order: str = "C", out: np.ndarray | None = None,
            blocking: bool = True) -> np.ndarray:
        """A host (numpy) copy; into ``out`` if given. ``blocking=False`` with ``out`` is CuPy's asynchronous copy
        (into pinned memory, the host does not wait): counted as a copy, not a synchronization."""
        asynchronous = not blocking and out is not None
        refuse_during_capture("cupy.ndarray.get(blocking=False)" if asynchronous else "cupy.ndarray.get()", stream)
        if out is not None:
            if not isinstance(out, np.ndarray):
                raise TypeError("Only numpy.ndarray can be obtained from cupy.ndarray")
            if out.dtype != self.dtype or out.shape != self.shape:
                raise ValueError(f"{self.dtype} {self.shape} array cannot be copied into {out.dtype} {out.shape}")
            np.copyto(out, self._array)
            return out
        if order in ("A", "a"):
            order = "F" if self._array.flags.f_contiguous and not self._array.flags.c_contiguous else "C"
        return np.array(self._array, order=order, copy=True)

    def set(self, arr: np.ndarray, stream: Any = None) -> None:
        """Copy the host array ``arr`` (same shape and dtype) into this one."""
        refuse_during_capture("cupy.ndarray.set()", stream)
        if not isinstance(arr, np.ndarray):
            raise TypeError("Only numpy.ndarray can be set to cupy.ndarray")
        if arr.dtype != self.dtype:
            raise TypeError(f"{arr.dtype} array cannot be set to {self.dtype} array")
        if arr.shape != self.shape:
            raise ValueError(f"Shape mismatch. Old shape: {self.shape}, new shape: {arr.shape}")
        np.copyto(self._array, arr)

    def __format__(self, spec: str) -> str:
        refuse_during_capture("cupy.ndarray.__format__")
        return format(self._array, spec)

    def item(self) -> Any:
        refuse_during_capture("cupy.ndarray.item")
        return self._array.item()

    def tolist(self) -> Any:
        refuse_during_capture("cupy.ndarray.tolist")
        return self._array.tolist()

    def tobytes(self, order: str = "C") -> bytes:
        refuse_during_capture("cupy.ndarray.tobytes")
        return self._array.tobytes(order)

    def tofile(self, fid: Any, sep: str = "", format: str = "%s") -> None:
        refuse_during_capture("cupy.ndarray.tofile")
        self._array.tofile(fid, sep, format)

    def dump(self, file: Any) -> None:
        refuse_during_capture("cupy.ndarray.dump")
        self._array.dump(file)

    def dumps(self) -> bytes:
        refuse_during_capture("cupy.ndarray.dumps")
        return self._array.dumps()

    def __reduce__(self) -> tuple[Any, tuple[np.ndarray]]:
        refuse_during_capture("cupy.ndarray.__reduce__")
        return _rebuild, (self._array.copy(),)

    @device_op
    def __copy__(self) -> "ndarray":
        return wrap(self._array.copy())

    @device_op
    def __deepcopy__(self, memo: Any) -> "ndarray":
        return wrap(self._array.copy())

    __class_getitem__ = classmethod(types.GenericAlias)

    # attributes ----------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return self._array.shape

    @shape.setter
    def shape(self, shape: Any) -> None:  # a view of the new shape, or AttributeError where it needs a copy
        view = self._array.view()
        view.shape = shape
        self._array = view

    @property
    def flags(self) -> "Flags":
        return Flags(self._array)

    @property
    def T(self) -> "ndarray":
        return wrap(self._array.T)

    @property
    def mT(self) -> "ndarray":
        if self.ndim < 2:
            raise ValueError("matrix transpose with ndim < 2 is undefined")
        return wrap(self._array.swapaxes(-1, -2))

    @property
    def base(self) -> "ndarray | None":
        base = self._array.base
        return wrap(base) if isinstance(base, np.ndarray) else None

    @property
    def flat(self) -> "flatiter":
        return flatiter(self)

    @property
    def device(self) -> Device:
        return Device(0)

    @property
    def data(self) -> MemoryPointer:
        return MemoryPointer._at(self._array.__array_interface__["data"][0])

    @property
    def __cuda_array_interface__(self) -> Any:
        raise not_emulated("cupy.ndarray.__cuda_array_interface__", DEVICE_MEMORY)

    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any:
        raise not_emulated("cupy.ndarray.__dlpack__", DEVICE_MEMORY)

    def __dlpack_device__(self) -> Any:
        raise not_emulated("cupy.ndarray.__dlpack_device__", DEVICE_MEMORY)

    # elements ---------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._array)

    def __iter__(self) -> Iterator["ndarray"]:
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(len(self._array)))

    def __getitem__(self, key: Any) -> "ndarray":
        capture = recorder()
        if capture is not None:
            _check_index(capture, key)
            return capture.record(ndarray.__getitem__, (self, key), {})
        key = index_key(key)
        got = self._array[key]
        if type(got) is not np.ndarray:  # CuPy gives a 0-d view where numpy gives a scalar
            got = self._array[(key if type(key) is tuple else (key,)) + (Ellipsis,)]
        return wrap(got)

    def __setitem__(self, key: Any, value: Any) -> None:
        capture = recorder()
        if capture is not None:
            _check_index(capture, key)
            if isinstance(value, (np.ndarray, list, tuple)) and is_host_data(value):
                capture.refuse("cupy.ndarray.__setitem__ of host data")
            capture.record(ndarray.__setitem__, (self, key, value), {})
            return
        self._array[index_key(key)] = unwrap(value)

    def __delitem__(self, key: Any) -> None:
        raise ValueError("cannot delete array elements")

    @device_op
    def fill(self, value: Any) -> None:
        self._array.fill(unwrap(value))

    @device_op
    def scatter_add(self, slices: Any, value: Any) -> None:
        np.add.at(self._array, index_key(slices), unwrap(value))

    @device_op
    def scatter_max(self, slices: Any, value: Any) -> None:
        np.maximum.at(self._array, index_key(slices), unwrap(value))

    @device_op
    def scatter_min(self, slices: Any, value: Any) -> None:
        np.minimum.at(self._array, index_key(slices), unwrap(value))

    @device_op
    def view(self, dtype: Any = None, type: Any = None) -> "ndarray":
        if type is not None:
            raise not_emulated("cupy.ndarray.view(type=...)", "it makes a subclass of cupy.ndarray")
        return wrap(self._array.view() if dtype is None else self._array.view(dtype))

    @device_op
    def astype(self, dtype: Any, order: str = "K", casting: Any = None, subok: Any = None,
               copy: bool = True) -> "ndarray":
        got = self._array.astype(dtype, order, casting or "unsafe", copy=copy)
        check_dtype(got.dtype)
        return self if got is self._array else wrap(got)

    @device_op
    def ptp(self, axis: Any = None, out: Any = None, keepdims: bool = False) -> "ndarray":
        return to_device(np.ptp(self._array, axis, unwrap(out), keepdims), (self, out))


class Flags:
    """CuPy's ``ndarray.flags``: the layout only (numpy's ``writeable`` and the like are not CuPy's)."""

    __slots__ = ("c_contiguous", "f_contiguous", "owndata")

    def __init__(self, array: np.ndarray) -> None:
        self.c_contiguous = bool(array.flags.c_contiguous)
        self.f_contiguous = bool(array.flags.f_contiguous)
        self.owndata = bool(array.flags.owndata)

    @property
    def fnc(self) -> bool:
        return self.f_contiguous and not self.c_contiguous

    @property
    def forc(self) -> bool:
        return self.f_contiguous or self.c_contiguous

    def __getitem__(self, name: str) -> bool:
        keys = {"C_CONTIGUOUS": "c_contiguous", "F_CONTIGUOUS": "f_contiguous", "OWNDATA": "owndata",
                "FNC": "fnc", "FORC": "forc"}
        if name not in keys:
            raise KeyError(f"{name} is not defined for cupy.ndarray.flags")
        return getattr(self, keys[name])

    def __repr__(self) -> str:
        return "\n".join(f"  {key} : {getattr(self, key)}" for key in ("c_contiguous", "f_contiguous", "owndata"))


class flatiter:
    """``ndarray.flat``: the array's elements in C order, readable and writable by index."""

    def __init__(self, array: ndarray) -> None:
        self._base = array

    def _capture_memory(self) -> np.ndarray:  # what a stream capture saves, restores and replays into
        return self._base._array

    @property
    def base(self) -> ndarray:
        return self._base

    @device_op
    def copy(self) -> ndarray:
        return wrap(self._base._array.flatten())

    @device_op
    def __getitem__(self, key: Any) -> ndarray:
        return to_device(self._base._array.flat[index_key(key)])

    @device_op
    def __setitem__(self, key: Any, value: Any) -> None:
        self._base._array.flat[index_key(key)] = unwrap(value)

    def __iter__(self) -> Iterator[ndarray]:
        return (wrap(np.asarray(v)) for v in self._base._array.flat)

    def __len__(self) -> int:
        return self._base.size


def wrap(array: np.ndarray) -> ndarray:
    """An emulated array around ``array`` (no copy)."""
    emulated = object.__new__(ndarray)
    emulated._array = array
    return emulated


def _rebuild(array: np.ndarray) -> ndarray:
    return wrap(array)


def unwrap(value: Any) -> Any:
    """``value`` as numpy takes it: an emulated array's memory (also inside lists and tuples); a host
    numpy array is refused (TypeError), as CuPy's functions refuse it."""
    kind = type(value)
    if kind is ndarray:
        return value._array
    if kind is list or kind is tuple:
        return kind(map(unwrap, value))
    if isinstance(value, np.ndarray):
        raise host_array_refused(value)
    return value


def index_key(key: Any) -> Any:
    """An index as numpy takes it: CuPy accepts host index arrays (it copies them over), so they pass."""
    kind = type(key)
    if kind is ndarray:
        return key._array
    if kind is tuple:
        return tuple(k._array if type(k) is ndarray else k for k in key)
    return key


def to_device(result: Any, owners: tuple[Any, ...] = (), scalars: bool = False) -> Any:
    """What numpy returned, as CuPy returns it: arrays emulated (``owners``' own wrapper where numpy returned
    an owner's memory: an ``out=`` argument, an input passed through), numpy scalars as 0-d arrays, tuples
    and lists element by element; ``scalars``: Python numbers too (``count_nonzero``, ``allclose``)."""
    kind = type(result)
    if kind is np.ndarray:
        for owner in owners:
            if type(owner) is ndarray and owner._array is result:
                return owner
        check_dtype(result.dtype)
        return wrap(result)
    if isinstance(result, np.generic):
        return wrap(np.asarray(result))
    if kind is tuple or kind is list:
        return kind(to_device(r, owners, scalars) for r in result)
    if isinstance(result, tuple) and hasattr(result, "_fields"):  # numpy's named results (slogdet, unique_all)
        return kind(*(to_device(r, owners, scalars) for r in result))
    if scalars and kind in (bool, int, float, complex):
        return wrap(np.asarray(result))
    if isinstance(result, np.ndarray):  # a subclass (numpy.matrix): plain, as CuPy has no subclasses
        return wrap(np.asarray(result))
    return result


# methods whose result's size CuPy reads back from the device (a synchronization: refused during capture)
SIZED_ON_HOST = frozenset({"nonzero", "compress"})


def _forwarded(name: str) -> Any:
    method = getattr(np.ndarray, name)
    parameters = parameters_of(f"cupy.ndarray.{name}")
    sized_on_host = name in SIZED_ON_HOST

    def forward(self: ndarray, *args: Any, **kwargs: Any) -> Any:
        capture = recorder()
        if capture is not None:
            if sized_on_host:
                capture.refuse(f"cupy.ndarray.{name} (its result's size is read back to the host)")
            return capture.record(forward, (self, *args), kwargs)
        if parameters is not None:
            parameters.check((self, *args), kwargs)
        result = method(self._array, *map(unwrap, args), **{k: unwrap(v) for k, v in kwargs.items()})
        return to_device(result, (self, kwargs.get("out"), *args))

    forward.__name__ = forward.__qualname__ = name
    forward.__doc__ = f"numpy.ndarray.{name} on the emulated device, with CuPy's parameters."
    if parameters is not None:
        forward.__signature__ = parameters.signature()  # type: ignore[attr-defined]
    return forward


# numpy's methods of the same name and arguments; results stay on the device
for _name in ("all", "any", "argmax", "argmin", "argpartition", "argsort", "byteswap", "choose", "clip", "compress",
              "conj", "conjugate", "copy", "cumprod", "cumsum", "diagonal", "dot", "flatten", "max", "mean", "min",
              "nonzero", "partition", "prod", "put", "ravel", "repeat", "reshape", "round", "searchsorted", "sort",
              "squeeze", "std", "sum", "swapaxes", "take", "trace", "transpose", "var"):
    setattr(ndarray, _name, _forwarded(_name))


def _host_value(convert: Any) -> Any:
    what = f"{convert.__name__}(cupy.ndarray)"

    def conversion(self: ndarray) -> Any:
        refuse_during_capture(what)
        return convert(self._array)
    return conversion


# scalars of one-element arrays and the array's text, as CuPy (which copies them to the host)
for _name, _convert in {"bool": bool, "int": int, "float": float, "complex": complex, "bytes": bytes, "repr": repr,
                        "str": str}.items():
    setattr(ndarray, f"__{_name}__", _host_value(_convert))

# numpy's attributes of the same meaning
for _name in ("dtype", "strides", "size", "ndim", "itemsize", "nbytes"):
    setattr(ndarray, _name, property(operator.attrgetter(f"_array.{_name}")))


def _complex_part(name: str) -> property:
    """``real`` or ``imag``: a view, and writable."""
    def read(self: ndarray) -> ndarray:
        return wrap(getattr(self._array, name))

    @device_op
    def write(self: ndarray, value: Any) -> None:
        setattr(self._array, name, unwrap(value))

    return property(read, write)


for _name in ("real", "imag"):
    setattr(ndarray, _name, _complex_part(_name))


def _operand(value: Any) -> Any:
    """The other operand of an operator as numpy takes it; NotImplemented for what CuPy does not combine."""
    kind = type(value)
    if kind is ndarray:
        return value._array
    if kind in (int, float, bool, complex) or isinstance(value, np.generic):
        return value
    if isinstance(value, (np.ndarray, list, tuple)):
        raise host_array_refused(value) if isinstance(value, np.ndarray) else TypeError(
            f"Unsupported type {kind}: combine cupy.ndarray with arrays and scalars only")
    return NotImplemented


def _binary(ufunc: np.ufunc, reflected: bool = False) -> Any:
    def operator(self: ndarray, other: Any) -> Any:
        capture = recorder()
        if capture is not None:
            return capture.record(operator, (self, other), {})
        value = _operand(other)
        if value is NotImplemented:
            return NotImplemented
        return to_device(ufunc(value, self._array) if reflected else ufunc(self._array, value))
    return operator


def _in_place(ufunc: np.ufunc) -> Any:
    def operator(self: ndarray, other: Any) -> Any:
        capture = recorder()
        if capture is not None:
            return capture.record(operator, (self, other), {})
        value = _operand(other)
        if value is NotImplemented:
            return NotImplemented
        ufunc(self._array, value, out=self._array)
        return self
    return operator


def _unary(ufunc: np.ufunc) -> Any:
    def operator(self: ndarray) -> ndarray:
        capture = recorder()
        if capture is not None:
            return capture.record(operator, (self,), {})
        return to_device(ufunc(self._array))
    return operator


_BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "matmul": np.matmul, "truediv": np.true_divide,
           "floordiv": np.floor_divide, "mod": np.remainder, "divmod": np.divmod, "pow": np.power,
           "lshift": np.left_shift, "rshift": np.right_shift, "and": np.bitwise_and, "or": np.bitwise_or,
           "xor": np.bitwise_xor}
_NO_IN_PLACE = ("matmul", "divmod")  # CuPy has neither __imatmul__ nor __idivmod__
for _name, _ufunc in _BINARY.items():
    setattr(ndarray, f"__{_name}__", _binary(_ufunc))
    setattr(ndarray, f"__r{_name}__", _binary(_ufunc, reflected=True))
    if _name not in _NO_IN_PLACE:
        setattr(ndarray, f"__i{_name}__", _in_place(_ufunc))
for _name, _ufunc in {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
                      "eq": np.equal, "ne": np.not_equal}.items():
    setattr(ndarray, f"__{_name}__", _binary(_ufunc))
for _name, _ufunc in {"neg": np.negative, "pos": np.positive, "abs": np.absolute, "invert": np.invert}.items():
    setattr(ndarray, f"__{_name}__", _unary(_ufunc))

# CuPy's names that need device memory (cstruct, mdspan, reduced_view, toDlpack): present, refusing
complete_class(ndarray, snapshot().classes["cupy.ndarray"], DEVICE_MEMORY)
complete_class(flatiter, snapshot().classes["cupy.flatiter"])
