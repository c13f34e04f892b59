"""The CuPy behaviours flowjob's kernels depend on, read off the device: ``python bench/cupy_facts.py``.

Each line is one fact: what was tried and what CuPy did (a value, or the exception's type and message).
The device check runs it, so that a kernel fix for a GPU rests on what CuPy does there, not on a guess.
"""
from __future__ import annotations

import traceback
from typing import Any, Callable


def fact(label: str, attempt: Callable[[], Any]) -> None:
    try:
        shown = repr(attempt())
    except Exception as exc:  # every failure is the fact being read
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        shown = f"{type(exc).__name__}: {exc} (at {frame.filename.rsplit('/', 1)[-1]}:{frame.lineno})"
    print(f"{label:58s} {shown[:300]}", flush=True)


def main() -> None:
    import cupy as cp
    import numpy as np

    x = cp.asarray(np.array([0.1, -0.0], np.float32))
    one = cp.asarray(np.array([1.5]))
    out0 = cp.empty((), np.float32)
    fact("min(x, axis=(0,), keepdims=False, out=0-d)", lambda: cp.min(x, axis=(0,), keepdims=False, out=out0))
    fact("max(x, axis=(0,), keepdims=False, out=0-d)", lambda: cp.max(x, axis=(0,), keepdims=False, out=out0))
    fact("min(x, axis=None, keepdims=False, out=0-d)", lambda: cp.min(x, axis=None, keepdims=False, out=out0))
    fact("x.min(axis=(0,), out=0-d)", lambda: x.min(axis=(0,), out=out0))
    fact("min(x, axis=(0,)) then copyto", lambda: cp.copyto(out0, cp.min(x, axis=(0,))))
    fact("min(float64 (1,), axis=(0,), out=0-d float64)",
         lambda: cp.min(one, axis=(0,), keepdims=False, out=cp.empty((), np.float64)))
    a, b = cp.asarray(np.float64(1)), cp.asarray(np.float64(2))
    fact("shares_memory(two 0-d arrays)", lambda: cp.shares_memory(a, b))
    fact("may_share_memory(two 0-d arrays)", lambda: cp.may_share_memory(a, b))
    c, d = cp.ones((3, 4)), cp.ones((4,))
    fact("shares_memory((3,4), (4,))", lambda: cp.shares_memory(c, d))
    fact("take(arange(4), [9]) (out of range)", lambda: cp.take(cp.arange(4), cp.asarray([9])))
    fact("arange(4)[[9]] (out of range)", lambda: cp.arange(4)[cp.asarray([9])])
    buf = cp.zeros(4, np.float32)
    fact("default_rng(0).random(out=buf, dtype=float32) fills buf",
         lambda: (cp.random.default_rng(0).random(out=buf, dtype=np.float32), buf)[1])
    fact("cupy.cuda.cudnn importable", lambda: __import__("cupy.cuda.cudnn", fromlist=["x"]).getVersion())
    fact("cupyx.cudnn importable", lambda: __import__("cupyx.cudnn", fromlist=["x"]).__name__)
    fact("cupy.cuda.Graph (stream capture)", lambda: _capture(cp))
    fact("matmul float32 uses TF32", lambda: _tf32(cp))
    fact("graph copying from pinned host memory reads it at launch", lambda: _pinned_copy_in_graph(cp))
    fact("RawModule float32 subnormal * 1 (CuPy's own -ftz=true)", lambda: _subnormal_times_one(cp, ()))
    fact("RawModule options=('-ftz=false',): subnormal * 1", lambda: _subnormal_times_one(cp, ("-ftz=false",)))


def _capture(cp: Any) -> Any:
    stream = cp.cuda.Stream(non_blocking=True)
    y = cp.zeros(8, cp.float32)
    with stream:
        stream.begin_capture()
        cp.add(y, 1, out=y)
        graph = stream.end_capture()
    graph.launch(stream)
    graph.launch(stream)
    stream.synchronize()
    return float(y[0])


def _pinned_copy_in_graph(cp: Any) -> Any:
    """Whether a host-to-device copy from pinned memory captured in a graph copies what the host buffer holds when
    the graph is launched (the way a recorded step would take a learning rate computed on the host): the values
    the device array holds after launches with the host buffer at 1, then 2."""
    import cupyx
    import numpy as np
    host = cupyx.empty_pinned((1,), np.float32)
    device = cp.zeros(1, np.float32)
    stream = cp.cuda.Stream(non_blocking=True)
    host[0] = 1.0
    with stream:
        stream.begin_capture()
        device.set(host, stream=stream)
        graph = stream.end_capture()
    seen = []
    for value in (1.0, 2.0):
        host[0] = value
        graph.launch(stream)
        stream.synchronize()
        seen.append(float(device[0]))
    return seen


def _subnormal_times_one(cp: Any, options: tuple) -> Any:
    """What a hand kernel makes of a float32 subnormal: kept (the flush is off) or 0.0 (flushed)."""
    import numpy as np
    code = 'extern "C" __global__ void times_one(const float* a, float* out) { out[0] = a[0] * 1.0f; }'
    fn = cp.RawModule(code=code, options=options).get_function("times_one")
    a = cp.asarray(np.array([np.finfo(np.float32).smallest_subnormal], np.float32))
    out = cp.zeros(1, np.float32)
    fn((1,), (1,), (a, out))
    return float(out[0])


def _tf32(cp: Any) -> Any:
    import numpy as np
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((256, 256), dtype=np.float32), rng.standard_normal((256, 256), dtype=np.float32)
    got = cp.asnumpy(cp.asarray(a) @ cp.asarray(b))
    return float(np.max(np.abs(got - a.astype(np.float64) @ b.astype(np.float64))))


if __name__ == "__main__":
    main()
