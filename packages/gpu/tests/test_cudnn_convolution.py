"""Convolutions on cuDNN through nvidia-cudnn-frontend (flowjob_gpu.cudnn_convolution), with the records' im2col
kernels as the fallback.

Without a device: the kernel on the emulated CuPy against a double of the frontend's graph API (tests/
cudnn_double.py) that computes what cuDNN would from the graph it is given, so the graph's dims, strides, pads,
strides, dilations, groups and types are checked by the numbers (against the records' numpy kernels) as well as
read back; the choice (no frontend, no handle, a refused configuration: the record's kernel with one info log a
configuration; else cuDNN); the plan cache (one graph a configuration); a training job on the emulated device
whose convolutions run through the double, recorded as CUDA graphs, against the same job on the records' kernels.
Where nvidia-cudnn-frontend is installed, the graph is also built with the real frontend's Python graph (which
needs no device until ``validate``). With a device (``gpu`` marker): cuDNN itself against the records."""
from __future__ import annotations

import logging
import os

import numpy as np
import pytest

from flowjob_core import BlobSpec, KernelContext, make_plugin_manager
from flowjob_core.plugins.host import gather_registries
from flowjob_core.testing.modules import sibling
from flowjob_gpu import available_cupy, cudnn_convolution, plugin
from flowjob_gpu.emulation.factory import emulated_cupy
from flowjob_ops import plugin as ops_plugin
from flowjob_ops.records.conv import GRAD_KEYS

double = sibling(__file__, "cudnn_double")
REQUIRE = "FLOWJOB_REQUIRE_GPU"  # set by the device check (conftest.py)
OPS = gather_registries(make_plugin_manager(plugins=[ops_plugin], autoload=False)).ops

# (forward op, x shape, w shape, attrs, dtype): layouts, paddings, strides, dilations, groups, ranks, types
CASES = [
    ("conv2d", (2, 3, 9, 8), (4, 3, 3, 3), {"padding": "SAME", "strides": 2}, "float32"),
    ("conv2d", (2, 8, 7, 4), (6, 3, 2, 2), {"padding": "SAME_UPPER", "strides": [2, 1], "dilations": 2, "groups": 2,
                                            "data_format": "NHWC"}, "float64"),
    ("conv2d", (1, 4, 6, 6), (4, 2, 3, 3), {"padding": [[0, 0], [0, 0], [1, 2], [0, 1]], "groups": 2}, "float16"),
    ("conv3d", (2, 2, 5, 6, 4), (3, 2, 2, 3, 1), {"padding": "VALID", "strides": [1, 2, 1]}, "float32"),
    ("conv3d", (1, 4, 5, 3, 4), (2, 2, 2, 2, 2), {"padding": "SAME", "dilations": [1, 2, 1], "groups": 2,
                                                  "data_format": "NDHWC"}, "float64"),
    ("conv2d_bias", (2, 3, 6, 5), (4, 3, 3, 3), {"padding": "SAME", "activation": "relu"}, "float32"),
    ("conv2d_bias", (2, 6, 5, 3), (4, 2, 2, 3), {"padding": "VALID", "activation": None, "data_format": "NHWC"},
     "float64"),
]
TOLERANCE = {"float16": 2e-3, "float32": 2e-5, "float64": 1e-12}


def _context(cp, op, inputs, outputs, attrs, shared, node="conv"):
    return KernelContext(xp=cp, backend=None, op=op, node_name=node, attrs=attrs,
                         inputs=tuple(BlobSpec(a.shape, a.dtype) for a in inputs),
                         outputs=tuple(BlobSpec(shape, inputs[0].dtype) for shape in outputs), job_type="train",
                         shared=shared, ops=OPS)


def _record(op, inputs, outputs, attrs):
    """The op record's own kernel on numpy."""
    ctx = _context(np, op, inputs, outputs, attrs, {})
    return np.array(OPS[op].kernel(ctx)(*inputs), copy=True)


def _arrays(op, x_shape, w_shape, attrs, dtype, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(x_shape).astype(dtype)
    w = rng.standard_normal(w_shape).astype(dtype)
    inputs = [x, w]
    if op == "conv2d_bias":
        channels = w_shape[0]
        inputs.append(rng.standard_normal(channels).astype(dtype))
    (y,) = OPS[op].infer([BlobSpec(a.shape, a.dtype) for a in inputs], attrs)
    dy = rng.standard_normal(y.shape).astype(dtype)
    return inputs, y.shape, dy


def _triple(op, inputs, y_shape, dy, attrs):
    """(op, inputs, output shape, attrs) of the forward, data-gradient and filter-gradient nodes."""
    x, w = inputs[:2]
    base = "conv3d" if op == "conv3d" else "conv2d"
    grad_attrs = {k: attrs[k] for k in GRAD_KEYS if k in attrs} | {"x_shape": x.shape, "w_shape": w.shape}
    return [(op, inputs, y_shape, attrs), (f"{base}_grad_data", [dy, w], x.shape, grad_attrs),
            (f"{base}_grad_filter", [x, dy], w.shape, grad_attrs)]


@pytest.fixture
def frontend(monkeypatch):
    fake = double.Frontend()
    monkeypatch.setattr(cudnn_convolution, "import_frontend", lambda: fake)
    return fake


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[4]}-{c[3].get('data_format', 'first')}")
def test_cudnn_graphs_compute_what_the_records_do(frontend, case):
    op, x_shape, w_shape, attrs, dtype = case
    cp = emulated_cupy()
    inputs, y_shape, dy = _arrays(op, x_shape, w_shape, attrs, dtype)
    shared: dict = {}
    for node, (name, args, out_shape, node_attrs) in enumerate(_triple(op, inputs, y_shape, dy, attrs)):
        ctx = _context(cp, name, args, [out_shape], node_attrs, shared, node=f"n{node}")
        run = cudnn_convolution.cudnn_convolution_kernel(ctx)
        got = cp.asnumpy(run(*[cp.asarray(a) for a in args]))
        want = _record(name, args, [out_shape], node_attrs)
        assert got.dtype == want.dtype and got.shape == want.shape
        scale = max(1.0, float(np.max(np.abs(want.astype(np.float64)))))
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=TOLERANCE[dtype],
                                   atol=TOLERANCE[dtype] * scale, err_msg=name)
    assert cudnn_convolution.paths(shared) == {"n0": "cudnn", "n1": "cudnn", "n2": "cudnn"}
    assert len(frontend.graphs) == 3 and len(frontend.handles) == 1


def test_the_graph_is_built_as_cudnn_reads_it(frontend):
    """Channels-last dims and strides, asymmetric SAME_UPPER pads, strides, dilations, groups, types, the
    heuristics, the notes dropped, the plan's steps, the workspace and the stream."""
    cp = emulated_cupy()
    op, x_shape, w_shape, attrs, dtype = CASES[1]
    inputs, y_shape, dy = _arrays(op, x_shape, w_shape, attrs, dtype)
    ctx = _context(cp, op, inputs, [y_shape], attrs, {})
    run = cudnn_convolution.cudnn_convolution_kernel(ctx)
    (graph,) = frontend.graphs
    F64 = double.DataType.DOUBLE
    assert graph.kwargs["io_data_type"] is F64 and graph.kwargs["compute_data_type"] is F64
    x, w = graph.tensors
    assert (x.dim, x.stride, x.data_type) == ([2, 4, 8, 7], [8 * 7 * 4, 1, 7 * 4, 4], F64)  # (N, H, W, C) memory
    assert (w.dim, w.stride) == ([6, 2, 3, 2], [3 * 2 * 2, 1, 2 * 2, 2])  # (F, kh, kw, C/groups) memory
    (conv, _, params, y), = graph.nodes
    # SAME_UPPER, stride (2, 1), dilation 2: rows 8 -> 4 through an extent of 5 need 3 pads, the odd one after;
    # columns 7 -> 7 through an extent of 3 need 2
    assert conv == "conv_fprop" and params == {
        "pre_padding": [1, 1], "post_padding": [2, 1], "stride": [2, 1], "dilation": [2, 2],
        "compute_data_type": F64}
    assert (y.dim, y.stride, y.is_virtual) == ([2, 6, 4, 7], [4 * 7 * 6, 1, 7 * 6, 6], False)
    assert graph.heuristics == [double.HeurMode.A, double.HeurMode.FALLBACK]
    assert {n.name for n in graph.dropped_notes} == {"TENSOR_CORE", "DOWN_CONVERT_INPUTS",
                                                     "REDUCED_PRECISION_REDUCTION", "FFT", "NONDETERMINISTIC"}
    assert graph.steps == ["validate", "build_operation_graph", "create_execution_plans", "check_support",
                           "build_plans"]
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        run(*[cp.asarray(a) for a in inputs])
    ((pack, workspace, handle),) = graph.executions
    assert handle is frontend.handles[0] and frontend.streams[id(handle)] == stream.ptr != 0
    assert workspace is not None and set(pack) == {x, w, y}


def test_half_io_computes_in_float_and_keeps_tensor_cores(frontend):
    cp = emulated_cupy()
    op, x_shape, w_shape, attrs, dtype = CASES[2]
    inputs, y_shape, _ = _arrays(op, x_shape, w_shape, attrs, dtype)
    cudnn_convolution.cudnn_convolution_kernel(_context(cp, op, inputs, [y_shape], attrs, {}))
    (graph,) = frontend.graphs
    assert graph.kwargs["io_data_type"] is double.DataType.HALF
    assert graph.kwargs["compute_data_type"] is double.DataType.FLOAT
    assert {n.name for n in graph.dropped_notes} == {"FFT", "NONDETERMINISTIC"}


def test_bias_and_relu_are_one_graph(frontend):
    cp = emulated_cupy()
    op, x_shape, w_shape, attrs, dtype = CASES[5]
    inputs, y_shape, _ = _arrays(op, x_shape, w_shape, attrs, dtype)
    cudnn_convolution.cudnn_convolution_kernel(_context(cp, op, inputs, [y_shape], attrs, {}))
    (graph,) = frontend.graphs
    assert [node[0] for node in graph.nodes] == ["conv_fprop", "bias", "relu"]
    b = graph.tensors[2]
    assert (b.dim, b.stride) == ([1, 4, 1, 1], [4, 1, 1, 1])
    assert [node[3].is_virtual for node in graph.nodes] == [True, True, False]


@pytest.mark.parametrize("case", CASES[5:], ids=["relu-first", "last"])
def test_a_refused_fused_bias_runs_the_convolution_on_cudnn_and_the_bias_after(monkeypatch, caplog, case):
    fake = double.Frontend(refuse=lambda graph: any(node[0] == "bias" for node in graph.nodes))
    monkeypatch.setattr(cudnn_convolution, "import_frontend", lambda: fake)
    op, x_shape, w_shape, attrs, dtype = case
    cp, shared = emulated_cupy(), {}
    inputs, y_shape, _ = _arrays(op, x_shape, w_shape, attrs, dtype)
    with caplog.at_level(logging.INFO, logger=cudnn_convolution.__name__):
        run = cudnn_convolution.cudnn_convolution_kernel(_context(cp, op, inputs, [y_shape], attrs, shared))
    got = cp.asnumpy(run(*[cp.asarray(a) for a in inputs]))
    np.testing.assert_allclose(got, _record(op, inputs, [y_shape], attrs), rtol=TOLERANCE[dtype],
                               atol=TOLERANCE[dtype])
    assert cudnn_convolution.paths(shared) == {"conv": "cudnn"}
    assert [[node[0] for node in g.nodes] for g in fake.graphs] == [["conv_fprop", "bias"] +
                                                                   (["relu"] if attrs["activation"] else []),
                                                                   ["conv_fprop"]]
    relu = " and ReLU" if attrs["activation"] else ""
    assert f"the bias{relu} after it, in CuPy: for the fused graph the frontend refused" in caplog.text
    assert (got >= 0).all() if attrs["activation"] else (got < 0).any()


def _one_node(cp, shared, node="conv", shape=(2, 3, 8, 8)):
    inputs, y_shape, _ = _arrays("conv2d", shape, (4, 3, 3, 3), {"padding": "SAME"}, "float32")
    ctx = _context(cp, "conv2d", inputs, [y_shape], {"padding": "SAME"}, shared, node=node)
    run = cudnn_convolution.cudnn_convolution_kernel(ctx)
    got = cp.asnumpy(run(*[cp.asarray(a) for a in inputs]))
    np.testing.assert_allclose(got, _record("conv2d", inputs, [y_shape], {"padding": "SAME"}), rtol=2e-5,
                               atol=2e-5)
    return run, inputs


def test_without_the_frontend_the_records_kernel_runs_and_says_why_once(monkeypatch, caplog):
    def missing():
        raise ImportError("No module named 'cudnn'")

    monkeypatch.setattr(cudnn_convolution, "import_frontend", missing)
    cp, shared = emulated_cupy(), {}
    with caplog.at_level(logging.INFO, logger=cudnn_convolution.__name__):
        run, inputs = _one_node(cp, shared, node="conv1")
        for _ in range(3):  # steps log nothing
            run(*[cp.asarray(a) for a in inputs])
        _one_node(cp, shared, node="conv2")  # the same configuration: not logged again
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1, lines
    assert "'conv1' (conv2d): im2col + cuBLAS, not cuDNN: nvidia-cudnn-frontend is not installed" in lines[0]
    assert "flowjob-gpu[cudnn]" in lines[0]
    assert cudnn_convolution.paths(shared)["conv2"].startswith("im2col: nvidia-cudnn-frontend is not installed")


def test_a_frontend_without_cudnn_or_a_device_falls_back(monkeypatch, caplog):
    fake = double.Frontend(handle_error=RuntimeError("Unable to find symbol cudnnGetVersion"))
    monkeypatch.setattr(cudnn_convolution, "import_frontend", lambda: fake)
    shared: dict = {}
    with caplog.at_level(logging.INFO, logger=cudnn_convolution.__name__):
        _one_node(emulated_cupy(), shared)
    assert "cuDNN could not make a handle (RuntimeError: Unable to find symbol cudnnGetVersion)" in caplog.text
    assert not fake.graphs and cudnn_convolution.paths(shared)["conv"].startswith("im2col: ")


def test_a_refused_configuration_falls_back_and_the_others_run_on_cudnn(monkeypatch, caplog):
    # the double refuses the 8x8 input's graphs only
    fake = double.Frontend(refuse=lambda graph: graph.tensors[0].dim[2:] == [8, 8])
    monkeypatch.setattr(cudnn_convolution, "import_frontend", lambda: fake)
    shared: dict = {}
    with caplog.at_level(logging.INFO, logger=cudnn_convolution.__name__):
        _one_node(emulated_cupy(), shared, node="big", shape=(2, 3, 8, 8))
        _one_node(emulated_cupy(), shared, node="small", shape=(2, 3, 6, 6))
    assert cudnn_convolution.paths(shared) == {
        "big": "im2col: the frontend refused the configuration (NotSupported: No valid engine configs returned "
               "from heuristics)", "small": "cudnn"}
    assert "node 'big' (conv2d): im2col + cuBLAS, not cuDNN: the frontend refused" in caplog.text
    assert "node 'small' (conv2d): cuDNN (plan eng0_double, workspace 512 bytes)" in caplog.text


def test_a_float_type_cudnn_lacks_falls_back_without_building(frontend):
    cp, shared = emulated_cupy(), {}
    ctx = KernelContext(xp=cp, backend=None, op="conv2d", node_name="bf", attrs={},
                        inputs=(BlobSpec((1, 1, 3, 3), "float32"), BlobSpec((1, 1, 1, 1), "float32")),
                        outputs=(BlobSpec((1, 1, 3, 3), "float32"),), shared=shared, ops=OPS)
    config = cudnn_convolution.Config.of(ctx)
    cache = cudnn_convolution._PlanCache()
    assert cache.planned(config.__class__(**{**config.__dict__, "dtype": "bfloat16"})) == \
        "cuDNN has no bfloat16 convolution here (only float16, float32, float64)"
    assert not frontend.graphs


def test_a_configuration_is_built_once_a_plan(frontend, caplog):
    cp, shared = emulated_cupy(), {}
    with caplog.at_level(logging.INFO, logger=cudnn_convolution.__name__):
        _one_node(cp, shared, node="a")
        _one_node(cp, shared, node="b")  # same shapes and attributes: the same graph and plan
        _one_node(cp, shared, node="c", shape=(2, 3, 6, 6))
    assert len(frontend.graphs) == 2 and shared[cudnn_convolution.CACHE].builds == 2
    assert len(frontend.handles) == 1
    assert [r.getMessage().split(":")[0] for r in caplog.records] == ["node 'a' (conv2d)", "node 'c' (conv2d)"]
    _one_node(cp, {}, node="a")  # another plan builds its own
    assert len(frontend.graphs) == 3 and len(frontend.handles) == 2


def test_inputs_cudnn_cannot_read_as_they_are_are_copied_first(frontend):
    """A transposed input and one at an address off cuDNN's 16-byte alignment (a view at an offset) reach the
    graph as aligned C-contiguous copies: the graph's strides describe dense memory."""
    cp, shared = emulated_cupy(), {}
    inputs, y_shape, _ = _arrays("conv2d", (2, 3, 8, 8), (4, 3, 3, 3), {"padding": "SAME"}, "float32")
    x, w = inputs
    want = _record("conv2d", inputs, [y_shape], {"padding": "SAME"})
    ctx = _context(cp, "conv2d", inputs, [y_shape], {"padding": "SAME"}, shared)
    run = cudnn_convolution.cudnn_convolution_kernel(ctx)
    flat = cp.zeros(x.size + 1, np.float32)
    shifted = flat[1:].reshape(x.shape)  # 4 bytes past an aligned allocation
    shifted[...] = cp.asarray(x)
    transposed = cp.asarray(np.ascontiguousarray(w.transpose(1, 0, 2, 3))).transpose(1, 0, 2, 3)
    assert cudnn_convolution.pointer(shifted) % cudnn_convolution.ALIGNMENT and not transposed.flags.c_contiguous
    got = cp.asnumpy(run(shifted, transposed))
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)
    ((pack, _, _),) = frontend.graphs[0].executions
    assert all(address % cudnn_convolution.ALIGNMENT == 0 for address in pack.values())


def test_each_device_of_a_plan_has_its_handle_and_graphs(frontend):
    cp = emulated_cupy()
    inputs, y_shape, _ = _arrays("conv2d", (2, 3, 8, 8), (4, 3, 3, 3), {}, "float32")
    config = cudnn_convolution.Config.of(_context(cp, "conv2d", inputs, [y_shape], {}, {}))
    cache = cudnn_convolution._PlanCache()
    first = cache.planned(config)
    second = cache.planned(cudnn_convolution.Config(**{**config.__dict__, "device": 1}))
    assert cache.planned(config) is first and first.handle is not second.handle
    assert frontend.handles == [first.handle, second.handle] and len(frontend.graphs) == 2


def test_a_plans_handle_is_destroyed_with_it(frontend):
    import gc
    shared: dict = {}
    _one_node(emulated_cupy(), shared)
    del shared
    gc.collect()
    assert frontend.destroyed == frontend.handles


def _real_frontend():
    """cuDNN's frontend on a GPU machine: the device check installs the cudnn extra, and there its absence fails the
    test; a GPU machine set up by hand without the extra skips, saying so."""
    if os.environ.get(REQUIRE) == "1":
        import cudnn
        return cudnn
    return pytest.importorskip("cudnn", reason="this GPU machine lacks nvidia-cudnn-frontend (pip install "
                                               "'flowjob-gpu[cudnn]'); the device check installs it")


# the real frontend: on a GPU machine, where the device check installs it (its Python graph needs no device, but
# the frontend comes with the cudnn extra, which only a machine with a device installs) ----------------------------
@pytest.mark.gpu
def test_the_real_frontends_graph_takes_the_configuration():
    cudnn = _real_frontend()
    op, x_shape, w_shape, attrs, dtype = CASES[1]
    inputs, y_shape, _ = _arrays(op, x_shape, w_shape, attrs, dtype)
    config = cudnn_convolution.Config.of(_context(emulated_cupy(), op, inputs, [y_shape], attrs, {}))
    graph, tensors = cudnn_convolution.build_graph(cudnn, None, config)
    (node,) = graph.nodes
    assert node.params["pre_padding"] == [1, 1] and node.params["post_padding"] == [2, 1]
    assert node.params["stride"] == [2, 1] and node.params["dilation"] == [2, 2]
    assert (tensors["x"].dim, tensors["x"].stride) == ([2, 4, 8, 7], [224, 1, 28, 4])
    assert (tensors["w"].dim, tensors["w"].stride) == ([6, 2, 3, 2], [12, 1, 4, 2])
    assert (tensors["y"].dim, tensors["y"].stride) == ([2, 6, 4, 7], [168, 1, 42, 6])
    assert tensors["y"].data_type == cudnn.data_type.DOUBLE and not tensors["y"].is_virtual


# a training job on the emulated device, its convolutions through the double, recorded as CUDA graphs -----------
@pytest.fixture
def emulation(monkeypatch):
    monkeypatch.setenv("FLOWJOB_GPU_EMULATION", "1")
    monkeypatch.setenv("FLOWJOB_DEVICE", "gpu")
    monkeypatch.delenv("FLOWJOB_CUDA_GRAPHS", raising=False)
    monkeypatch.setattr(plugin, "available_cupy", lambda: None)


def _train(cudnn: bool, steps: int = 4):
    import oneflow as flow
    import oneflow.typing as tp
    from flowjob_core import get_default_session
    flow.clear_default_session()
    session = get_default_session()
    if cudnn:
        for op, builder in cudnn_convolution.KERNEL_BUILDERS.items():
            session.registries.kernels.add(op, "gpu", builder)
    init = flow.random_normal_initializer(stddev=0.3, seed=2)

    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((4, 2, 9, 9)), y: tp.Numpy.Placeholder((4,), dtype=flow.int32)) -> tp.Numpy:
        h = flow.layers.conv2d(x, 4, 3, padding="SAME", activation=flow.nn.relu, name="conv1",
                               kernel_initializer=init)  # conv2d_bias after fusion
        h = flow.nn.conv2d(h, flow.get_variable("w2", (6, 2, 3, 3), initializer=init), strides=2, padding="VALID",
                           groups=2, name="conv2")
        logits = flow.layers.dense(flow.reshape(h, [4, -1]), 3, kernel_initializer=init, name="dense")
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(y, logits)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0.9).minimize(loss)
        return loss

    rng = np.random.default_rng(1)
    x, y = rng.standard_normal((4, 2, 9, 9)).astype(np.float32), rng.integers(0, 3, 4).astype(np.int32)
    losses = [np.array(train(x, y), copy=True) for _ in range(steps)]
    plan = train.plan()
    flow.clear_default_session()
    return losses, plan


def test_a_recorded_training_step_runs_its_convolutions_on_cudnn(emulation, frontend):
    from flowjob_gpu.step_graphs import GraphedStep
    want, _ = _train(cudnn=False)
    got, plan = _train(cudnn=True)
    assert isinstance(plan.step, GraphedStep) and plan.step.recorded, plan.step.uncaptured
    ran = cudnn_convolution.paths(plan.shared)
    ops = {node.name: node.op for node in plan.order if node.name in ran}
    assert set(ops.values()) == {"conv2d_bias", "conv2d", "conv2d_grad_data", "conv2d_grad_filter"}, ops
    assert set(ran.values()) == {"cudnn"}
    # each node executes in the warm-up step and once more while the second step is captured; the later steps
    # replay the captured launches (no execute call), and their numbers follow
    assert sum(len(g.executions) for g in frontend.graphs) == 2 * len(ran)
    for step, (a, b) in enumerate(zip(got, want)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=f"step {step}")


# a real device -------------------------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[4]}-{c[3].get('data_format', 'first')}")
def test_cudnn_on_the_device_matches_the_records(case, caplog):
    """cuDNN itself (the frontend installed: the device check installs the cudnn extra), each configuration's
    three nodes against the records' numpy kernels; a configuration cuDNN refuses must say so, not pass silently."""
    cp = available_cupy()
    _real_frontend()
    op, x_shape, w_shape, attrs, dtype = case
    inputs, y_shape, dy = _arrays(op, x_shape, w_shape, attrs, dtype)
    shared: dict = {}
    for node, (name, args, out_shape, node_attrs) in enumerate(_triple(op, inputs, y_shape, dy, attrs)):
        ctx = _context(cp, name, args, [out_shape], node_attrs, shared, node=f"n{node}")
        got = cp.asnumpy(cudnn_convolution.cudnn_convolution_kernel(ctx)(*[cp.asarray(a) for a in args]))
        want = _record(name, args, [out_shape], node_attrs)
        scale = max(1.0, float(np.max(np.abs(want.astype(np.float64)))))
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=TOLERANCE[dtype] * 5,
                                   atol=TOLERANCE[dtype] * 5 * scale, err_msg=name)
    ran = cudnn_convolution.paths(shared)
    # float32 2-D convolutions must run on cuDNN; another configuration may be refused, and then says so
    if dtype == "float32" and op != "conv3d":
        assert set(ran.values()) == {"cudnn"}, ran
    else:
        assert all(path == "cudnn" or path.startswith("im2col: the frontend refused") for path in ran.values()), ran
