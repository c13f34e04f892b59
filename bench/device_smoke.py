"""The device check's first test: does the machine build and run what flowjob's GPU path needs? One line a check;
exit 1 if any failed. ``python bench/device_smoke.py [--emulated]``.

On a device, each check fails loudly where its part is missing, never passes by skipping:
- CuPy imports and sees a device;
- NVRTC: every hand-kernel family (flowjob-kernels' ``cuda/<family>.cu``) compiles as the gpu backend compiles it
  (``flowjob_gpu.sources.compiled_module``) and has each of its entry points;
- the chain templates: an ``elementwise_chain`` of each built-in step op (float32; float16 and float64 for a few)
  built and launched through ``flowjob_gpu.chain_kernels`` as a fused job does;
- cuBLAS: a float32 matmul against numpy's;
- cuDNN: the cuDNN 9 library loads, reports its version and makes (and destroys) a handle on the device;
- a cuDNN convolution: a conv2d node and its two gradient nodes built by flowjob_gpu.cudnn_convolution (through
  nvidia-cudnn-frontend, the cudnn extra) run on cuDNN, not its im2col fallback, and match the records' numpy
  kernels;
- a LeNet-sized training step on the gpu backend (dropout's device mask kernel included) is recorded as CUDA graphs
  (flowjob_gpu.step_accounting); the line says how many of its convolution nodes ran on cuDNN.

``--emulated`` runs the same script on the emulated CuPy (FLOWJOB_GPU_EMULATION=1): the sources load and list
their entry points, the chain sources are generated, the matmul and the recorded step run, the convolution nodes
run (on im2col: the emulated device has no cuDNN; the line says why); NVRTC and cuDNN are said to be unchecked
there. So a script error shows on every CPU run.
"""
from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import glob
import os
import sys
from typing import Any

import numpy as np

from check_report import check, failures



def cupy_module(emulated: bool) -> Any:
    if emulated:
        from flowjob_gpu.emulation.toplevel import build
        return build()
    import cupy
    count = cupy.cuda.runtime.getDeviceCount()
    if count < 1:
        raise RuntimeError("CuPy sees no CUDA device")
    return cupy


def families(cp: Any, emulated: bool) -> str:
    import flowjob_kernels
    from flowjob_gpu.sources import compiled_module, kernel_families, kernel_source
    done = []
    for family in kernel_families():
        symbols = flowjob_kernels.entry_points(kernel_source(family))
        if not symbols:
            raise RuntimeError(f"cuda/{family}.cu has no entry point")
        if not emulated:
            module = compiled_module(cp, family, cp.cuda.Device().id)
            for symbol in symbols:
                module.get_function(symbol)
        done.append(f"{family} ({len(symbols)})")
    return ("sources and entry points (NVRTC not checked: emulated) " if emulated else "compiled with NVRTC: ") + \
        ", ".join(done)


def chain_templates(cp: Any, emulated: bool) -> str:
    from flowjob_gpu.chain_kernels import compiled
    from flowjob_gpu.chain_source import chain_kernel
    from flowjob_ops.records.fused import STEPS
    records = {name: step.record for name, step in STEPS.items()}
    scalars = {"scalar_add": 0.75, "scalar_rsub": 1.5, "scalar_div": 3.0, "scalar_rdiv": 0.7, "scalar_pow": 1.5,
               "scalar_mul": 0.1}
    comparisons = {"equal", "not_equal", "greater", "greater_equal", "less", "less_equal"}
    built = 0
    for op, step in sorted(STEPS.items()):
        for dtype in ("float32",) if op not in ("add", "exp", "relu") else ("float16", "float32", "float64"):
            attrs = {"scalar": scalars[op]} if op in scalars else {}
            out = "bool" if records[op].elementwise.ufunc in comparisons else dtype
            operands = (0,) if step.arity == 1 else (0, 1)
            kernel = chain_kernel(((op, attrs, operands),), (dtype,) * step.arity, out, records)
            if kernel.source is None:
                raise RuntimeError(f"{op} ({dtype}): no template: {kernel.reason}")
            built += 1
            if emulated:
                continue
            inputs = [cp.asarray(np.linspace(-2, 2, 64).astype(dtype)) for _ in range(step.arity)]
            result = cp.empty(64, out)
            compiled(cp, kernel.source)(*inputs, *kernel.constants, result)
    if not emulated:
        cp.cuda.Stream.null.synchronize()
    return f"{built} chains " + ("generated (not compiled: emulated)" if emulated else "built and launched")


def cublas(cp: Any) -> str:
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((64, 48), np.float32), rng.standard_normal((48, 32), np.float32)
    got = cp.asnumpy(cp.matmul(cp.asarray(a), cp.asarray(b)))
    error = float(np.max(np.abs(got - a.astype(np.float64) @ b.astype(np.float64))))
    if error > 1e-2:  # TF32 would still be within this
        raise RuntimeError(f"matmul differs from numpy's by {error}")
    return f"matmul max error {error:.2e}"


def cudnn_library() -> str:
    """The cuDNN 9 shared library's path: the nvidia-cudnn wheel's, the system's, or the loader's."""
    candidates = []
    try:
        import nvidia.cudnn  # the wheel the image's PyTorch and nvidia-cudnn-frontend use
        for root in nvidia.cudnn.__path__:
            candidates += sorted(glob.glob(os.path.join(root, "lib", "libcudnn.so*")))
    except ImportError:
        pass
    found = ctypes.util.find_library("cudnn")
    candidates += [found] if found else []
    candidates += ["libcudnn.so.9", "libcudnn.so"]
    errors = []
    for path in candidates:
        try:
            ctypes.CDLL(path)
        except OSError as exc:
            errors.append(str(exc))
            continue
        return path
    raise OSError(f"cuDNN is not found: {'; '.join(errors[-2:])}")


def cudnn() -> str:
    path = cudnn_library()
    lib = ctypes.CDLL(path)
    lib.cudnnGetVersion.restype = ctypes.c_size_t
    version = lib.cudnnGetVersion()
    handle = ctypes.c_void_p()
    status = lib.cudnnCreate(ctypes.byref(handle))
    if status != 0:
        lib.cudnnGetErrorString.restype = ctypes.c_char_p
        raise RuntimeError(f"cudnnCreate: status {status} ({lib.cudnnGetErrorString(status).decode()})")
    lib.cudnnDestroy(handle)
    return f"{path}: version {version}, a handle made on the device"


def cudnn_convolution(cp: Any, emulated: bool) -> str:
    """One conv2d node and its gradient nodes through flowjob_gpu.cudnn_convolution, against the records' numpy
    kernels; on a device each must have run on cuDNN (the path's reason is the error where it did not)."""
    from flowjob_core import BlobSpec, KernelContext, make_plugin_manager
    from flowjob_core.plugins.host import gather_registries
    from flowjob_gpu.cudnn_convolution import CUDNN, cudnn_convolution_kernel, paths
    from flowjob_ops import plugin as ops_plugin
    ops = gather_registries(make_plugin_manager(plugins=[ops_plugin], autoload=False)).ops
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((4, 3, 12, 12), np.float32), rng.standard_normal((8, 3, 3, 3), np.float32)
    attrs = {"padding": "SAME", "strides": 2}
    dy = rng.standard_normal((4, 8, 6, 6), np.float32)
    grads = attrs | {"x_shape": x.shape, "w_shape": w.shape}
    nodes = [("conv2d", [x, w], (4, 8, 6, 6), attrs), ("conv2d_grad_data", [dy, w], x.shape, grads),
             ("conv2d_grad_filter", [x, dy], w.shape, grads)]
    shared: dict = {}
    errors = []
    for op, inputs, shape, node_attrs in nodes:
        specs = dict(op=op, node_name=op, attrs=node_attrs, inputs=tuple(BlobSpec(a.shape, a.dtype) for a in inputs),
                     outputs=(BlobSpec(shape, np.float32),), job_type="train", ops=ops)
        run = cudnn_convolution_kernel(KernelContext(xp=cp, backend=None, shared=shared, **specs))
        got = cp.asnumpy(run(*[cp.asarray(a) for a in inputs]))
        want = ops[op].kernel(KernelContext(xp=np, backend=None, **specs))(*inputs)
        errors.append(float(np.max(np.abs(got - want))) / max(1.0, float(np.max(np.abs(want)))))
    ran = paths(shared)
    if max(errors) > 1e-4:
        raise RuntimeError(f"the convolutions differ from the records' by {max(errors):.2e} (relative): {ran}")
    wrong = {node: path for node, path in ran.items() if path != CUDNN}
    if wrong and not emulated:
        raise RuntimeError(f"not on cuDNN: {wrong}")
    shown = "on cuDNN" if not wrong else f"on im2col ({next(iter(wrong.values()))})"
    return f"conv2d, its data and filter gradients {shown}, max relative error {max(errors):.1e}"


def recorded_step() -> str:
    import oneflow as flow
    import oneflow.typing as tp
    from flowjob_gpu.step_accounting import account
    flow.clear_default_session()

    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((8, 1, 28, 28)), y: tp.Numpy.Placeholder((8,), dtype=flow.int32)
              ) -> tp.Numpy:
        h = flow.layers.conv2d(x, 8, 5, padding="SAME", activation=flow.nn.relu, name="conv")
        h = flow.nn.max_pool2d(h, ksize=2, strides=2, padding="SAME", name="pool")
        h = flow.layers.batch_normalization(h, axis=1, name="bn")
        h = flow.nn.dropout(h, rate=0.25, seed=3, name="dropout")  # the device Philox mask kernel
        logits = flow.layers.dense(flow.reshape(h, [8, -1]), 10, name="dense")
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(y, logits)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0.9).minimize(loss)
        return loss

    rng = np.random.default_rng(0)
    x, y = rng.random((8, 1, 28, 28), np.float32), rng.integers(0, 10, 8).astype(np.int32)
    facts = account(train, lambda: train(x, y), steps=2)
    from flowjob_gpu.cudnn_convolution import CUDNN, paths
    convolutions = paths(train.plan().shared)
    flow.clear_default_session()
    if not facts.recorded:
        raise RuntimeError(f"the step was not recorded: {facts.uncaptured}")
    on_cudnn = sum(path == CUDNN for path in convolutions.values())
    return (f"{facts.graphs} graphs + {facts.live_pieces} live pieces, live: {', '.join(facts.live_nodes)}; "
            f"syncs {facts.host_syncs}, copies {facts.host_device_copies} a step; convolution nodes on cuDNN: "
            f"{on_cudnn} of {len(convolutions)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--emulated", action="store_true", help="the emulated CuPy (no device)")
    args = parser.parse_args()
    os.environ["FLOWJOB_DEVICE"] = "gpu"
    if args.emulated:
        os.environ["FLOWJOB_GPU_EMULATION"] = "1"
    cp = check("CuPy", lambda: cupy_module(args.emulated))
    if cp is None:
        print("FAIL everything else: no CuPy", flush=True)
        sys.exit(1)
    check("CuPy sees", lambda: f"cupy {cp.__version__}, {cp.cuda.runtime.getDeviceCount()} device(s)")
    check("hand-kernel families", lambda: families(cp, args.emulated))
    check("chain templates", lambda: chain_templates(cp, args.emulated))
    check("cuBLAS", lambda: cublas(cp))
    if args.emulated:
        print("--   cuDNN: not checked (emulated)", flush=True)
    else:
        check("cuDNN", cudnn)
    check("a cuDNN convolution (flowjob_gpu.cudnn_convolution)", lambda: cudnn_convolution(cp, args.emulated))
    check("a training step recorded as CUDA graphs", recorded_step)
    print(f"smoke: {len(failures)} failed" + (f": {', '.join(failures)}" if failures else ""), flush=True)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
