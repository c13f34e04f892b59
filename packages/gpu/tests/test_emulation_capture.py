"""Stream capture and graph replay on the emulated CuPy: nothing runs while a stream captures, launching the
graph recomputes from the current memory into the capture-time arrays, and host transfers during capture fail
the capture, as on a GPU. The ``gpu``-marked tests hold real CuPy to the same behaviour."""
from __future__ import annotations

import pickle

import numpy as np
import pytest

from flowjob_gpu.emulation import factory
from flowjob_gpu import available_cupy

emulated_cupy = factory.emulated_cupy()
cupyx = factory.emulated_cupyx()

UNSUPPORTED = "cudaErrorStreamCaptureUnsupported: operation not permitted when stream is capturing"
INVALIDATED = "cudaErrorStreamCaptureInvalidated"


@pytest.fixture(params=["emulated", pytest.param("cupy", marks=pytest.mark.gpu)])
def xp(request):
    return emulated_cupy if request.param == "emulated" else available_cupy()


cp = emulated_cupy  # the tests without xp hold the emulation's own traits (poison, replay into memory)


def _capture(xp, stream, work):
    """``work()``'s results and the graph of the capture around it."""
    with stream:
        stream.begin_capture()
        assert stream.is_capturing()
        results = work()
        graph = stream.end_capture()
    assert not stream.is_capturing()
    return results, graph


def _step(xp, x, z):
    y = xp.multiply(x, 2.0)
    xp.add(y, 1, out=z)
    z[0] = 5
    return y, z.sum()


def test_capture_records_without_running_and_launch_computes(xp):
    x, z = xp.arange(4, dtype=xp.float32), xp.zeros(4, dtype=xp.float32)
    stream = xp.cuda.Stream(non_blocking=True)
    (y, w), graph = _capture(xp, stream, lambda: _step(xp, x, z))
    stream.synchronize()
    assert x.tolist() == [0, 1, 2, 3] and z.tolist() == [0, 0, 0, 0]  # nothing ran
    graph.upload(stream)
    graph.launch(stream)
    stream.synchronize()
    assert y.tolist() == [0, 2, 4, 6] and z.tolist() == [5, 3, 5, 7] and float(w) == 20
    x[...] = 10  # new contents of the captured memory: the next launch reads them, into the same arrays
    graph.launch(stream)
    stream.synchronize()
    assert y.tolist() == [20] * 4 and z.tolist() == [5, 21, 21, 21] and float(w) == 68
    graph.launch(stream)  # launching again: the same values
    stream.synchronize()
    assert z.tolist() == [5, 21, 21, 21] and float(w) == 68


def test_new_arrays_hold_garbage_until_the_launch():
    x, z = cp.arange(4, dtype=cp.float32), cp.zeros(4, dtype=cp.int32)
    stream = cp.cuda.Stream(non_blocking=True)
    (y, w, k, m), graph = _capture(cp, stream, lambda: (x * 2.0, x.sum(), z + 1, x > 1))
    assert np.isnan(y.get()).all() and np.isnan(float(w))
    assert k.tolist() == [-1] * 4 and m.tolist() == [True] * 4
    graph.launch()
    assert y.tolist() == [0, 2, 4, 6] and float(w) == 6 and k.tolist() == [1] * 4 and m.tolist() == [0, 0, 1, 1]


def test_in_place_operations_wait_for_the_launch():
    a, b = cp.ones(3), cp.zeros((2, 3))
    idx = cp.asarray(np.array([0, 0, 2]))
    stream = cp.cuda.Stream(non_blocking=True)

    def work():
        a.__iadd__(1)
        a[1:] *= 3
        b.fill(2)
        cp.copyto(b[0], a)
        cupyx.scatter_add(b[1], idx, a)
        b.sort(axis=1)
        a.real = a + 1

    _, graph = _capture(cp, stream, work)
    assert a.tolist() == [1, 1, 1] and b.tolist() == [[0] * 3] * 2
    graph.launch()
    assert a.tolist() == [3, 7, 7] and b.tolist() == [[2, 6, 6], [2, 8, 10]]
    graph.launch()  # the in-place updates run again, from the values left by the first launch
    assert a.tolist() == [5, 25, 25]


def test_views_share_the_captured_memory():
    x = cp.arange(6, dtype=cp.float64)
    stream = cp.cuda.Stream(non_blocking=True)
    (v, t, r), graph = _capture(cp, stream, lambda: (x.reshape(2, 3), x[::2], (x + 1).reshape(3, 2).T))
    assert v.tolist() == [[0, 1, 2], [3, 4, 5]] and t.tolist() == [0, 2, 4]  # views of memory written before
    assert np.isnan(r.get()).all()
    x[...] = 1
    assert v.tolist() == [[1] * 3] * 2  # the view, made during capture, is a view still
    graph.launch()
    assert r.tolist() == [[2] * 3] * 2


def test_an_array_made_before_the_capture_is_not_replaced():
    """A caller who keeps the array a name held before the capture sees it unchanged: the graph writes
    into the arrays the capture made."""
    state = {"h": cp.zeros(2)}
    before = state["h"]
    stream = cp.cuda.Stream(non_blocking=True)
    _, graph = _capture(cp, stream, lambda: state.update(h=state["h"] + 1))
    graph.launch()
    assert before.tolist() == [0, 0] and state["h"].tolist() == [1, 1]


def test_random_draws_are_drawn_at_each_launch():
    rng = cp.random.default_rng(0)
    stream = cp.cuda.Stream(non_blocking=True)
    draw, graph = _capture(cp, stream, lambda: rng.random(3))
    assert np.isnan(draw.get()).all()
    graph.launch()
    first = draw.tolist()
    graph.launch()
    assert draw.tolist() != first and all(0 <= v < 1 for v in draw.tolist())


def _host_transfers(xp):
    return {
        "float": lambda a: float(a[0]), "int": lambda a: int(a[0]), "bool": lambda a: bool(a[0]),
        "item": lambda a: a[0].item(), "get": lambda a: a.get(), "tolist": lambda a: a.tolist(),
        "asnumpy": lambda a: xp.asnumpy(a), "stream.synchronize": lambda a: xp.cuda.get_current_stream().synchronize(),
        "device.synchronize": lambda a: xp.cuda.Device().synchronize(),
        "deviceSynchronize": lambda a: xp.cuda.runtime.deviceSynchronize(),
        "asarray(host)": lambda a: xp.asarray(np.ones(3)), "array(host)": lambda a: xp.array([1.0, 2.0]),
        "set": lambda a: a.set(np.ones(3)), "setitem(host)": lambda a: a.__setitem__(Ellipsis, np.ones(3)),
    }


_TRANSFERS = sorted(_host_transfers(np))


@pytest.mark.parametrize("transfer", _TRANSFERS)
def test_host_transfers_during_capture_fail_it(xp, transfer):
    a = xp.arange(3, dtype=xp.float64)
    stream = xp.cuda.Stream(non_blocking=True)
    with stream:
        stream.begin_capture()
        a * 2.0  # a Python scalar is fine: it is part of the recorded launch
        with pytest.raises(xp.cuda.runtime.CUDARuntimeError, match=UNSUPPORTED):
            _host_transfers(xp)[transfer](a)
        with pytest.raises(xp.cuda.runtime.CUDARuntimeError, match=INVALIDATED):
            stream.end_capture()
        assert not stream.is_capturing()
        c = a + 1  # the stream runs work again
    assert c.tolist() == [1, 2, 3]


@pytest.mark.parametrize("sized", ["nonzero", "ndarray.nonzero", "unique", "where", "mask", "mask-set"])
def test_results_sized_on_the_host_fail_the_capture(sized):
    a = cp.arange(4)
    work = {"nonzero": lambda: cp.nonzero(a), "ndarray.nonzero": lambda: a.nonzero(), "unique": lambda: cp.unique(a),
            "where": lambda: cp.where(a > 1), "mask": lambda: a[a > 1], "mask-set": lambda: a.__setitem__(a > 1, 0)}
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        stream.begin_capture()
        with pytest.raises(cp.cuda.runtime.CUDARuntimeError, match=UNSUPPORTED):
            work[sized]()
        with pytest.raises(RuntimeError, match="invalidated"):
            stream.is_capturing()
        with pytest.raises(cp.cuda.runtime.CUDARuntimeError, match=INVALIDATED):
            a + 1  # the stream's work fails until the capture ends
        with pytest.raises(cp.cuda.runtime.CUDARuntimeError, match=INVALIDATED):
            stream.end_capture()
    assert cp.where(a > 1, a, 0).tolist() == [0, 0, 2, 3]


def test_capture_refuses_the_null_stream_and_a_second_begin(xp):
    with pytest.raises(RuntimeError, match="cannot capture on the default"):
        xp.cuda.Stream.null.begin_capture()
    stream = xp.cuda.Stream(non_blocking=True)
    with stream:
        stream.begin_capture()
        with pytest.raises(xp.cuda.runtime.CUDARuntimeError):
            stream.begin_capture()
        stream.end_capture()
    with pytest.raises(xp.cuda.runtime.CUDARuntimeError):
        stream.end_capture()  # not capturing


def test_work_off_the_capturing_stream_runs_at_once(xp):
    x = xp.arange(3, dtype=xp.float64)
    stream, other = xp.cuda.Stream(non_blocking=True), xp.cuda.Stream(non_blocking=True)
    stream.begin_capture()  # not the current stream: work still runs
    y = x + 1
    with other:
        z = x * 3
        other.synchronize()
    with stream:
        w = x - 1
    stream.end_capture()
    assert y.tolist() == [1, 2, 3] and z.tolist() == [0, 3, 6]
    assert xp.cuda.get_current_stream() == xp.cuda.Stream.null
    if xp is cp:
        assert np.isnan(w.get()).all()


def test_the_current_stream_inside_with_is_the_capturing_one():
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        stream.begin_capture()
        assert cp.cuda.get_current_stream() is stream
        stream.end_capture()


def test_a_graph_launched_during_a_capture_joins_it():
    x = cp.ones(2)
    stream = cp.cuda.Stream(non_blocking=True)
    _, inner = _capture(cp, stream, lambda: x.__iadd__(1))
    _, outer = _capture(cp, stream, lambda: (inner.launch(), inner.launch()))
    assert x.tolist() == [1, 1]
    outer.launch()
    assert x.tolist() == [3, 3]


def test_an_event_recorded_in_a_capture_cannot_be_waited_on():
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        stream.begin_capture()
        event = stream.record()
        stream.end_capture()
    with pytest.raises(cp.cuda.runtime.CUDARuntimeError, match="cudaErrorCapturedEvent"):
        event.synchronize()


def test_other_host_reads_during_capture_fail_it():
    a = cp.ones(2)
    stream = cp.cuda.Stream(non_blocking=True)
    for read in (repr, str, pickle.dumps, lambda a: f"{a}", lambda a: a[[0, 1]]):
        with stream:
            stream.begin_capture()
            with pytest.raises(cp.cuda.runtime.CUDARuntimeError, match=UNSUPPORTED):
                read(a)
            with pytest.raises(cp.cuda.runtime.CUDARuntimeError, match=INVALIDATED):
                stream.end_capture()


def test_graphs_come_from_captures_only():
    assert cp.cuda.graph.Graph is cp.cuda.Graph
    with pytest.raises(RuntimeError, match="end_capture"):
        cp.cuda.Graph()
    with pytest.raises(NotImplementedError):
        cp.cuda.graph.something_else  # noqa: B018
    assert cp.cuda.runtime.streamCaptureModeRelaxed == 2
