"""The emulated CuPy's arrays: numpy cannot see through them, as it cannot see CuPy's; views, ``out=``,
in-place operators, indexing and reductions behave as CuPy's."""
from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

from flowjob_gpu.emulation.factory import emulated_cupy, emulated_cupyx

cp = emulated_cupy()
cupyx = emulated_cupyx()


def _a() -> cp.ndarray:
    return cp.arange(6, dtype=cp.float32).reshape(2, 3)


@pytest.mark.parametrize("convert", [
    np.asarray, np.array, np.ascontiguousarray, lambda a: np.add(a, 1), lambda a: np.exp(a),
    lambda a: np.concatenate([a]), lambda a: np.sum(a), lambda a: np.where(a > 1, a, 0),
    lambda a: np.array([a[0, 0], a[0, 1]]), lambda a: np.float32(1) + np.ones(3) * a,
], ids=["asarray", "array", "ascontiguousarray", "add", "exp", "concatenate", "sum", "where", "list", "host-op"])
def test_numpy_refuses_emulated_arrays(convert):
    with pytest.raises(TypeError):
        convert(_a())


def test_the_refusal_says_what_to_do():
    with pytest.raises(TypeError, match=r"Implicit conversion to a NumPy array is not allowed.*\.get\(\)"):
        np.asarray(_a())
    with pytest.raises(TypeError, match=r"numpy\.concatenate.*xp\.concatenate.*to_host"):
        np.concatenate([_a()])


@pytest.mark.parametrize("call", [
    lambda a, h: cp.add(a, h), lambda a, h: cp.exp(h), lambda a, h: cp.concatenate([a, h]),
    lambda a, h: cp.where(h > 0, a, 0), lambda a, h: a + h, lambda a, h: h + a, lambda a, h: a.dot(h),
    lambda a, h: cp.copyto(a, h), lambda a, h: a.__setitem__(0, h[0]), lambda a, h: cp.empty_like(h),
], ids=["ufunc", "unary", "concatenate", "where", "operator", "reflected", "method", "copyto", "setitem",
        "empty_like"])
def test_emulated_functions_refuse_host_arrays(call):
    with pytest.raises(TypeError, match="host numpy array"):
        call(_a(), np.ones((2, 3), np.float32))


def test_host_data_crosses_by_asarray_and_asnumpy_only():
    host = np.arange(3.0)
    device = cp.asarray(host)
    assert type(device) is cp.ndarray
    host[0] = 9  # a transfer is a copy
    assert float(device[0]) == 0.0
    back = cp.asnumpy(device)
    assert type(back) is np.ndarray and back.tolist() == [0.0, 1.0, 2.0]
    assert type(device.get()) is np.ndarray
    assert cp.asarray(device) is device and cp.asarray(device, dtype=cp.float32) is not device
    assert type(cp.array([1, 2])) is cp.ndarray and type(cp.array(device)) is cp.ndarray
    device.set(np.full(3, 7.0))
    assert device.tolist() == [7.0, 7.0, 7.0]
    for unsupported in (lambda: cp.asarray(np.array(["a"])), lambda: cp.zeros(2, dtype=object),
                        lambda: cp.arange(2).astype("U1"), lambda: cp.empty(2, np.longdouble)):
        with pytest.raises(ValueError, match="Unsupported dtype"):  # CuPy has no kernels for them
            unsupported()


def test_python_and_numpy_scalars_are_fine():
    a = _a()
    assert (a * 2 + np.float32(1) - 0.5).tolist() == [[0.5, 2.5, 4.5], [6.5, 8.5, 10.5]]
    assert (np.float32(2) * a).dtype == np.float32  # numpy's scalar defers to the array, as with CuPy
    assert cp.maximum(a, 2).tolist()[0] == [2, 2, 2]


def test_scalars_of_one_element_arrays():
    a = _a()
    assert float(a[1, 2]) == 5.0 and int(a[1, 2]) == 5 and bool(a[0, 1]) and not bool(a[0, 0])
    assert complex(a[0, 1]) == 1 + 0j and a[0, 1].item() == 1.0
    with pytest.raises(TypeError):
        float(a)
    with pytest.raises(ValueError):
        bool(a)
    with pytest.raises(TypeError):
        range(cp.sum(a))  # no __index__, as CuPy: a count stays on the device until int() asks for it
    assert f"{a[0, 1]:.1f}" == "1.0"


def test_reductions_and_scalar_indexing_give_0d_arrays():
    a = _a()
    for got in (a.sum(), a.max(), cp.sum(a), cp.mean(a), a[0, 0], cp.count_nonzero(a), cp.allclose(a, a),
                cp.argmax(a), cp.any(a > 4), cp.linalg.norm(a), cp.dot(a[0], a[1])):
        assert type(got) is cp.ndarray and got.ndim == 0, got
    assert a.shape == (2, 3) and cp.ndim(a) == 2 and cp.shape(a) == (2, 3) and len(a) == 2


def test_views_share_memory():
    a = _a()
    views = [a.reshape(3, 2), a.T, a[:, 1:], a.ravel(), a.view(cp.int32), a.transpose(1, 0), a[0],
             cp.lib.stride_tricks.as_strided(a, (3,), (8,)), a.swapaxes(0, 1), a.squeeze(), a[None]]
    for view in views:
        assert cp.shares_memory(a, view) and cp.may_share_memory(a, view)
    a.T[2, 1] = 50
    assert float(a[1, 2]) == 50.0
    a[0][1] = -1  # through a row view
    assert float(a[0, 1]) == -1.0
    assert cp.lib.stride_tricks.as_strided(a, (3,), (8,)).tolist() == [0.0, 2.0, 4.0]
    assert not cp.shares_memory(a, a.copy()) and not cp.shares_memory(a, a.astype(cp.float64))
    assert a.flags.c_contiguous and not a.T.flags.c_contiguous and a.T.flags["F_CONTIGUOUS"]


def test_out_arguments_and_in_place_operators_keep_the_array():
    a, out = _a(), cp.empty((2, 3), cp.float32)
    assert cp.add(a, 1, out=out) is out and cp.multiply(a, a, out) is out
    assert cp.sum(a, axis=0, out=cp.empty(3, cp.float32)).tolist() == [3.0, 5.0, 7.0]
    assert a.sum(axis=1, out=out[:, 0]).tolist() == [3.0, 12.0] and out[:, 0].tolist() == [3.0, 12.0]
    before = a
    a += 1
    a *= a
    a[:, 0] -= 1
    assert a is before and a.tolist() == [[0.0, 4.0, 9.0], [15.0, 25.0, 36.0]]
    assert cp.copyto(out, a) is None and out.tolist() == a.tolist()
    out.fill(cp.float32(2))
    assert out.tolist() == [[2.0] * 3] * 2


def test_indexing_and_assignment():
    a = cp.arange(12).reshape(3, 4)
    mask = a % 2 == 0
    assert a[mask].tolist() == [0, 2, 4, 6, 8, 10]
    a[mask] = -1
    assert a[0].tolist() == [-1, 1, -1, 3]
    rows = cp.asarray([2, 0])
    assert a[rows, 1].tolist() == [9, 1] and a[[2, 0]].shape == (2, 4) and a[np.array([1])].shape == (1, 4)
    a[rows] = cp.zeros(4, a.dtype)
    assert a.tolist() == [[0, 0, 0, 0], [-1, 5, -1, 7], [0, 0, 0, 0]]
    b = cp.zeros(4)
    cp.add.at(b, cp.asarray([1, 1, 3]), 1.0)
    b.scatter_add(cp.asarray([0, 0]), cp.asarray([2.0, 3.0]))
    cupyx.scatter_max(b, cp.asarray([3]), 7.0)
    assert b.tolist() == [5.0, 2.0, 0.0, 7.0]
    assert [float(x) for x in cp.arange(3.0)] == [0.0, 1.0, 2.0]


def test_ufunc_methods_are_cupys():
    a = _a()
    assert cp.add.reduce(a, axis=1).tolist() == [3.0, 12.0]
    assert cp.multiply.accumulate(a[1]).tolist() == [3.0, 12.0, 60.0]
    assert cp.subtract.outer(cp.arange(2), cp.arange(2)).tolist() == [[0, -1], [1, 0]]
    assert cp.add.name == "cupy_add" and cp.add.nin == 2 and isinstance(cp.add, cp.ufunc)
    with pytest.raises(NotImplementedError, match="cupy_maximum.reduce"):
        cp.maximum.reduce(a)  # CuPy reduces with add and multiply only
    with pytest.raises(NotImplementedError, match="cupy_multiply.at"):
        cp.multiply.at(a, cp.asarray([0]), 2.0)


def test_random_generator_draws_on_the_device_with_cupys_methods():
    rng = cp.random.default_rng(0)
    draws = [rng.random((2, 3), dtype=cp.float32), rng.standard_normal(4), rng.uniform(-1, 1, (3,), cp.float32),
             rng.integers(0, 10, size=5), rng.random(), cp.random.rand(2), cp.random.randn(2, dtype=cp.float32)]
    assert all(type(d) is cp.ndarray for d in draws)
    assert draws[0].dtype == cp.float32 and draws[2].dtype == cp.float32
    assert cp.random.default_rng(3).random(4).tolist() == cp.random.default_rng(3).random(4).tolist()
    out = cp.empty(3)
    assert rng.standard_normal(3, out=out) is out
    assert rng.random(3, out=out) is out and len(set(out.tolist())) == 3  # out's shape, drawn whole
    with pytest.raises(TypeError, match="one repeated value on a GPU"):  # what CuPy 14.2 did on an H100
        rng.random(out=out)
    for missing in ("normal", "permutation", "choice", "shuffle"):  # numpy's Generator has them; CuPy's not
        assert not hasattr(rng, missing)


def test_other_array_methods_stay_on_the_device():
    a = _a()
    assert type(a.astype(cp.int64)) is cp.ndarray and a.astype(cp.float32, copy=False) is a
    assert type(a.copy()) is cp.ndarray and a.copy().tolist() == a.tolist()
    assert isinstance(a.nonzero(), tuple) and all(type(i) is cp.ndarray for i in a.nonzero())
    assert a.itemsize == 4 and a.nbytes == 24 and a.strides == (12, 4) and a.size == 6 and a.dtype == np.float32
    assert a.T.shape == (3, 2) and a.mT.shape == (3, 2) and a.base is not None and cp.zeros(2).base is None
    assert a.ptp().item() == 5.0 and a.clip(1, 4).tolist()[0] == [1.0, 1.0, 2.0]
    c = a.copy()
    c.shape = (3, 2)
    assert c.shape == (3, 2) and cp.shares_memory(c, c.reshape(6))
    assert pickle.loads(pickle.dumps(a)).tolist() == a.tolist() and copy.deepcopy(a).tolist() == a.tolist()
    with pytest.raises(TypeError):
        hash(a)
