"""The emulated CuPy has exactly the real one's names: the checked-in snapshot, compared with the CuPy
installed here where there is one; numpy's names that CuPy lacks are absent, CuPy's that need CUDA refuse."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import numpy as np
import pytest

from flowjob_gpu.emulation.factory import emulated_cupy, emulated_cupyx
from flowjob_gpu.emulation import names, toplevel
from flowjob_gpu.emulation.unemulated import Unemulated, UnemulatedAttribute

cp = emulated_cupy()
cupyx = emulated_cupyx()

OWNERS = {"cupy": cp, "cupy.linalg": cp.linalg, "cupy.fft": cp.fft, "cupy.lib.stride_tricks": cp.lib.stride_tricks,
          "cupyx": cupyx, "cupy.ndarray": cp.ndarray}

SNAPSHOT = names.snapshot()
MODULES = {"cupy": cp, "cupy.cuda": cp.cuda, "cupy.cuda.runtime": cp.cuda.runtime, "cupy.exceptions": cp.exceptions,
           "cupy.fft": cp.fft, "cupy.lib": cp.lib, "cupy.lib.stride_tricks": cp.lib.stride_tricks,
           "cupy.linalg": cp.linalg, "cupy.random": cp.random, "cupy.typing": cp.typing, "cupyx": cupyx}
CLASSES = {"cupy.ndarray": cp.ndarray, "cupy.ufunc": cp.ufunc, "cupy.flatiter": cp.flatiter,
           "cupy.broadcast": cp.broadcast, "cupy.random.Generator": cp.random.Generator,
           "cupy.random.RandomState": cp.random.RandomState, "cupy.random.BitGenerator": cp.random.BitGenerator,
           "cupy.cuda.Device": cp.cuda.Device, "cupy.cuda.Stream": cp.cuda.Stream, "cupy.cuda.Event": cp.cuda.Event,
           "cupy.cuda.MemoryPool": cp.cuda.MemoryPool, "cupy.cuda.PinnedMemoryPool": cp.cuda.PinnedMemoryPool,
           "cupy.cuda.MemoryPointer": cp.cuda.MemoryPointer}
# numpy 2 dropped these deprecated names of numpy 1, which CuPy 14 still lists: nothing to emulate them with
REMOVED_IN_NUMPY_2 = {"disp", "find_common_type", "get_array_wrap", "issctype", "issubclass_", "issubsctype",
                      "obj2sctype", "safe_eval", "sctype2char", "set_string_function", "who"}
# and numpy < 2 lacks these array-API names, which have no older equivalent
ADDED_IN_NUMPY_2 = {"bitwise_count", "cumulative_prod", "cumulative_sum", "isdtype", "unique_all", "unique_counts",
                    "unique_inverse", "unique_values"}


def _public(obj) -> set[str]:
    return {n for n in dir(obj) if not n.startswith("_")}


def _compare(differences: dict, key: str, installed: set[str], kept: set[str]) -> None:
    if installed != kept:
        differences[key] = {"new": sorted(installed - kept), "gone": sorted(kept - installed)}


@pytest.mark.skipif(importlib.util.find_spec("cupy") is None,
                    reason="CuPy is not installed here (pip install cupy-cuda12x: it imports without a GPU)")
def test_the_snapshot_is_the_installed_cupys_names():
    # a fresh interpreter: what the process imported before (cupy.cuda.nccl, say) would add names
    printed = subprocess.run([sys.executable, "-m", "flowjob_gpu.emulation.names", "--print"], check=True,
                             capture_output=True, text=True).stdout
    installed = names.Names.from_json(json.loads(printed))
    theirs, ours = installed.to_json(), SNAPSHOT.to_json()
    differences: dict[str, dict[str, list[str]]] = {}
    for key in ("ufuncs", "ufuncs_with_at", "array_dunders", "numpy_objects"):
        _compare(differences, key, set(theirs[key]), set(ours[key]))
    for group in ("modules", "classes"):
        for name in theirs[group].keys() | ours[group].keys():
            _compare(differences, name, set(theirs[group].get(name, ())), set(ours[group].get(name, ())))
    assert not differences, (f"CuPy {installed.cupy_version}'s names differ from the snapshot of CuPy "
                             f"{SNAPSHOT.cupy_version} ({differences}); refresh it with "
                             "python -m flowjob_gpu.emulation.names --write, then emulate the new names")


@pytest.mark.parametrize("qualname", sorted(SNAPSHOT.signatures))
def test_each_function_takes_cupys_parameters(qualname):
    owner, _, name = qualname.rpartition(".")
    emulated = getattr(OWNERS[owner], name)
    if not isinstance(emulated, (Unemulated, UnemulatedAttribute)):
        assert names.parameters(emulated) == SNAPSHOT.signatures[qualname]


@pytest.mark.parametrize("call", [
    lambda a: cp.max(a, initial=0), lambda a: cp.sum(a, where=a > 0), lambda a: a.sum(where=a > 0),
    lambda a: cp.argsort(a, stable=True), lambda a: cp.zeros(3, like=a), lambda a: cp.count_nonzero(a, keepdims=True),
    lambda a: cp.add(a, 1, where=a > 0), lambda a: cp.exp(a, order="C"), lambda a: a.item(0),
    lambda a: cp.concatenate([a], 0, None, "extra"), lambda a: cp.linalg.norm(a, 2, None, False, "extra"),
], ids=["initial", "where", "method-where", "stable", "like", "keepdims", "ufunc-where", "ufunc-order", "item-index",
        "positional", "linalg"])
def test_numpy_only_arguments_are_refused(call):
    with pytest.raises(TypeError):
        call(cp.arange(4.0))


def test_the_snapshot_covers_every_module_and_class_it_reads():
    assert set(SNAPSHOT.modules) == set(names.MODULES) and set(SNAPSHOT.classes) == set(names.CLASSES)
    assert SNAPSHOT.ufuncs <= SNAPSHOT.modules["cupy"] and SNAPSHOT.ufuncs_with_at <= SNAPSHOT.ufuncs
    assert {"add", "maximum"} <= SNAPSHOT.ufuncs_with_at and "multiply" not in SNAPSHOT.ufuncs_with_at


@pytest.mark.parametrize("qualname", sorted(MODULES))
def test_each_module_has_exactly_cupys_names(qualname):
    assert _public(MODULES[qualname]) == set(SNAPSHOT.modules[qualname])


@pytest.mark.parametrize("qualname", sorted(CLASSES))
def test_each_class_has_exactly_cupys_names(qualname):
    assert _public(CLASSES[qualname]) == set(SNAPSHOT.classes[qualname])


def test_the_array_has_cupys_operators_and_conversions():
    ours = {n for n in dir(cp.ndarray) if n.startswith("__") and not hasattr(object, n)}
    # Python 2's operators and numpy's subclass hook, which CuPy's Cython class still carries
    vestigial = {"__div__", "__idiv__", "__hex__", "__oct__", "__array_finalize__"}
    assert ours == set(SNAPSHOT.array_dunders) - vestigial
    assert not hasattr(cp.ndarray, "__index__")  # range(xp.sum(x)) fails on CuPy; int() is the explicit way


@pytest.mark.parametrize("name", ["errstate", "nditer", "insert", "spacing", "seterr", "frompyfunc", "matrix",
                                  "datetime64", "ma", "char", "object_", "str_", "memmap", "busday_count"])
def test_numpy_only_names_are_absent(name):
    assert hasattr(np, name)
    with pytest.raises(AttributeError, match="exactly CuPy"):
        getattr(cp, name)


@pytest.mark.parametrize("name", ["normal", "permutation", "choice", "shuffle", "bytes"])
def test_numpy_only_generator_methods_are_absent(name):
    assert hasattr(np.random.default_rng(0), name)
    assert not hasattr(cp.random.default_rng(0), name)


@pytest.mark.parametrize("use", [
    lambda: cp.RawModule(code=""), lambda: cp.RawKernel("", "f"), lambda: cp.ElementwiseKernel("T x", "T y", ""),
    lambda: cp.ReductionKernel("T x", "T y", "x", "a + b", "y = a", "0"), lambda: cp.cuda.Graph(),
    lambda: cp.cuda.Stream().launch_host_func(print, None), lambda: cp.cuda.Device().compute_capability,
    lambda: cp.cuda.runtime.memGetInfo(), lambda: cp.cuda.compiler.compile_using_nvrtc,
    lambda: cp.arange(3).toDlpack(), lambda: cp.arange(3).__cuda_array_interface__, lambda: cp.from_dlpack(None),
    lambda: cp.testing.assert_array_equal, lambda: cp.get_default_memory_pool().malloc(8),
], ids=["RawModule", "RawKernel", "ElementwiseKernel", "ReductionKernel", "Graph", "host_func", "compute_capability",
        "memGetInfo", "compiler", "toDlpack", "cuda_array_interface", "from_dlpack", "testing", "malloc"])
def test_cuda_only_names_exist_and_refuse(use):
    with pytest.raises(NotImplementedError, match="flowjob's emulated CuPy"):
        use()


def test_emulated_names_are_cupys_kinds():
    for name in SNAPSHOT.ufuncs:
        value = getattr(cp, name)
        assert isinstance(value, cp.ufunc) or isinstance(value, Unemulated), name
    for name in SNAPSHOT.numpy_objects & set(dir(np)):  # numpy's own object, where this numpy has the name
        assert getattr(cp, name) is getattr(np, name), name
    assert cp.float32 is np.float32 and cp.dtype is np.dtype and cp.newaxis is None and cp.pi == np.pi
    assert cp.NaN != cp.NaN and cp.NINF == -np.inf and cp.AxisError is np.exceptions.AxisError
    assert cp.fuse(lambda x: x + 1)(cp.ones(2)).tolist() == [2.0, 2.0]
    assert cp.get_array_module(cp.ones(1)) is cp and cp.get_array_module(np.ones(1)) is np
    assert isinstance(cp.cuda.Stream.__dict__["launch_host_func"], UnemulatedAttribute)


def test_only_names_numpy_lacks_fall_back_to_a_refusal():
    expected = REMOVED_IN_NUMPY_2 if toplevel.NUMPY_2 else ADDED_IN_NUMPY_2
    assert toplevel.fallbacks(cp) <= expected


def test_the_device_side_of_cupy_cuda():
    assert cp.cuda.runtime.getDeviceCount() == 1 and cp.cuda.runtime.getDevice() == 0 and cp.is_available()
    with cp.cuda.Device(0) as device:
        assert device.id == 0
    with pytest.raises(cp.cuda.runtime.CUDARuntimeError):
        cp.cuda.Device(1).use()
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        assert cp.cuda.get_current_stream() is stream
    assert cp.cuda.get_current_stream() is cp.cuda.Stream.null
    start, end = cp.cuda.Event(), cp.cuda.Event()
    start.record()
    end.record(stream)
    end.synchronize()
    stream.synchronize()
    assert cp.cuda.get_elapsed_time(start, end) >= 0 and end.done
    pool = cp.get_default_memory_pool()
    assert pool is cp.get_default_memory_pool() and pool.used_bytes() == 0
    pool.free_all_blocks()
    cp.get_default_pinned_memory_pool().free_all_blocks()
    assert isinstance(cp.cuda.PinnedMemoryPool(), cp.cuda.PinnedMemoryPool)
