"""v0.4's eager tensors (``flow.Tensor``, ``flow.nn.Module``, ``flow.autograd``): op records run as tensors are
computed, gradients come from the same gradient rules as in a lazy job, so they are compared with a lazy twin."""
from __future__ import annotations

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core.errors import FlowjobError, ShapeError

B, D, H, C = 8, 5, 12, 3
RNG = np.random.default_rng(7)
X = RNG.standard_normal((B, D)).astype(np.float32)
Y = RNG.standard_normal((B, C)).astype(np.float32)


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


class Linear(flow.nn.Module):
    def __init__(self, rows: int, cols: int, seed: int) -> None:
        super().__init__()
        rng = np.random.default_rng(seed)
        self.weight = flow.nn.Parameter(flow.Tensor(rng.standard_normal((rows, cols)) * 0.4))
        self.bias = flow.nn.Parameter(flow.Tensor(rng.standard_normal(cols) * 0.1))

    def forward(self, x):
        return x.matmul(self.weight) + self.bias


class MLP(flow.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = Linear(D, H, 1)
        self.fc2 = Linear(H, C, 2)

    def forward(self, x):
        return self.fc2(self.fc1(x).relu())


def mse(out, target):
    d = out - target
    return (d * d).mean()


def test_an_mlp_trains_eagerly_and_its_loss_falls():
    model, x, y = MLP(), flow.Tensor(X), flow.Tensor(Y)
    losses = []
    for _ in range(30):
        loss = mse(model(x), y)
        losses.append(loss.item())
        for p in model.parameters():
            p.grad = None
        loss.backward()
        for p in model.parameters():
            p.copy_(p.detach() - 0.1 * p.grad)
    assert losses[-1] < 0.5 * losses[0]
    assert all(b <= a for a, b in zip(losses, losses[1:]))
    assert [name for name, _ in model.named_parameters()] == ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]


def lazy_gradients(values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The raw gradients (watch_diff) of the same network in a lazy train job, its weights fed as arguments."""
    grads: dict[str, np.ndarray] = {}

    @flow.global_function(type="train")
    def job(x: tp.Numpy.Placeholder((B, D)), y: tp.Numpy.Placeholder((B, C)),
            w1: tp.Numpy.Placeholder((D, H)), b1: tp.Numpy.Placeholder((H,)),
            w2: tp.Numpy.Placeholder((H, C)), b2: tp.Numpy.Placeholder((C,))) -> tp.Numpy:
        hidden = flow.nn.relu(flow.matmul(x, w1) + b1)
        d = flow.matmul(hidden, w2) + b2 - y
        loss = flow.math.reduce_mean(d * d)
        for name, blob in (("fc1.weight", w1), ("fc1.bias", b1), ("fc2.weight", w2), ("fc2.bias", b2)):
            flow.watch_diff(blob, lambda g, name=name: grads.__setitem__(name, g.copy()))
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)
        return loss

    job(X, Y, values["fc1.weight"], values["fc1.bias"], values["fc2.weight"], values["fc2.bias"])
    flow.sync_default_session()
    return grads


def test_gradients_are_the_lazy_jobs_gradients_of_the_same_ops():
    model = MLP()
    values = {name: t.numpy() for name, t in model.state_dict().items()}
    mse(model(flow.Tensor(X)), flow.Tensor(Y)).backward()
    want = lazy_gradients(values)
    assert sorted(want) == sorted(values)
    for name, param in model.named_parameters():
        np.testing.assert_array_equal(param.grad.numpy(), want[name], err_msg=name)  # the same kernels: bitwise


def test_autograd_grad_leaves_grad_alone_and_retain_graph_allows_a_second_pass():
    x = flow.Tensor([[1.0, -2.0], [3.0, 0.5]], requires_grad=True)
    y = (x * x * 3.0).sum()
    (gx,) = flow.autograd.grad(y, x, retain_graph=True)
    np.testing.assert_allclose(gx.numpy(), 6.0 * x.numpy())
    assert x.grad is None
    y.backward(retain_graph=True)
    y.backward()  # gradients accumulate
    np.testing.assert_allclose(x.grad.numpy(), 12.0 * x.numpy())
    with pytest.raises(FlowjobError, match="retain_graph=True"):
        y.backward()


def test_backward_with_a_gradient_argument_and_retain_grad():
    x = flow.Tensor(np.arange(6, dtype=np.float32).reshape(2, 3), requires_grad=True)
    h = x * 2.0
    h.retain_grad()
    y = h.exp()
    weight = flow.Tensor(np.full((2, 3), 0.5, np.float32))
    flow.autograd.backward(y, weight)
    np.testing.assert_allclose(h.grad.numpy(), 0.5 * np.exp(2.0 * x.numpy()), rtol=1e-6)
    np.testing.assert_allclose(x.grad.numpy(), np.exp(2.0 * x.numpy()), rtol=1e-6)


def test_backward_on_a_non_scalar_without_gradient_names_it():
    y = flow.Tensor(np.ones((2, 3), np.float32), requires_grad=True) * 2.0
    with pytest.raises(ShapeError, match=r"shape \(2, 3\).*gradient"):
        y.backward()
    with pytest.raises(FlowjobError, match="does not require a gradient"):
        flow.Tensor([1.0]).backward()


def test_unsupported_dtypes_are_refused_with_their_name():
    with pytest.raises(TypeError, match="complex128"):
        flow.tensor([1 + 2j])
    with pytest.raises(TypeError, match="bool"):
        flow.Tensor([1.0], dtype=np.bool_)
    with pytest.raises(TypeError, match="boolean data"):
        flow.tensor([True, False])
    with pytest.raises(FlowjobError, match="floating"):
        flow.tensor([1, 2]).requires_grad_()


def test_state_dict_round_trip():
    model, other = MLP(), MLP()
    other.fc1.weight.normal_()
    state = model.state_dict()
    assert list(state) == ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    result = other.load_state_dict({k: v.numpy() if k.endswith("bias") else v for k, v in state.items()})
    assert result.missing_keys == [] and result.unexpected_keys == []
    x = flow.Tensor(X)
    np.testing.assert_array_equal(other(x).numpy(), model(x).numpy())
    # the state holds the parameters themselves, as legacy's did; loading copied their values
    assert state == {"fc1.weight": model.fc1.weight, "fc1.bias": model.fc1.bias, "fc2.weight": model.fc2.weight,
                     "fc2.bias": model.fc2.bias}
    other.fc2.bias.fill_(7.0)
    assert model.fc2.bias.numpy().max() < 7.0
    with pytest.raises(RuntimeError, match="missing key.*fc2.bias"):
        other.load_state_dict({k: v for k, v in state.items() if k != "fc2.bias"})
    with pytest.raises(RuntimeError, match="size mismatch for fc1.bias"):
        other.load_state_dict({**state, "fc1.bias": np.zeros(H + 1, np.float32)})
    assert other.load_state_dict({"fc1.bias": state["fc1.bias"]}, strict=False).missing_keys == [
        "fc1.weight", "fc2.weight", "fc2.bias"]


def test_module_tree_buffers_and_modes(monkeypatch):
    monkeypatch.setenv("FLOWJOB_GPU_EMULATION", "0")  # it moves the module to the cpu device by name
    model = MLP()
    model.register_buffer("steps", flow.tensor([0]))
    model.register_buffer("scratch", flow.Tensor(2), persistent=False)
    assert [n for n, _ in model.named_children()] == ["fc1", "fc2"]
    assert [n for n, _ in model.named_modules()] == ["", "fc1", "fc2"]
    assert "steps" in model.state_dict() and "scratch" not in model.state_dict()
    assert not model.eval().fc1.training and model.train().fc2.training
    with pytest.raises(TypeError, match="nn.Parameter or None"):
        model.fc1.weight = flow.Tensor(2, 2)
    with pytest.raises(KeyError, match="already exists"):
        model.register_parameter("fc1", None)
    assert model.to("cpu").fc1.weight.device == flow.device("cpu")
    with pytest.raises(FlowjobError, match="not this session's backend"):
        model.to("cuda")


def test_tensor_basics():
    t = flow.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert t.dtype == flow.float32 and t.shape == (2, 2) and t.numel() == 4 and t.is_leaf
    assert flow.tensor(np.arange(3)).dtype == np.arange(3).dtype
    assert flow.Tensor(2, 3).tolist() == [[0.0] * 3] * 2
    assert (t + 1).tolist() == [[2.0, 3.0], [4.0, 5.0]]
    assert (1 - t).tolist() == [[0.0, -1.0], [-2.0, -3.0]]
    assert (t @ t).tolist() == [[7.0, 10.0], [15.0, 22.0]]
    assert t.reshape(4).tolist() == [1.0, 2.0, 3.0, 4.0] and t.T.tolist() == [[1.0, 3.0], [2.0, 4.0]]
    assert t.sum().item() == 10.0 and t.mean(dim=0).tolist() == [2.0, 3.0]
    assert (t > 2).tolist() == [[0, 0], [1, 1]]
    assert t[1].tolist() == [3.0, 4.0]
    assert flow.to(t, flow.int32).dtype == flow.int32 and t.to(flow.float32) is t
    assert t.to(flow.float32, True) is not t
    assert flow.Tensor(t).tolist() == t.tolist()


def test_embedding_looks_rows_up_and_passes_gradients_back():
    emb = flow.nn.Embedding(10, 4, padding_idx=0)
    assert emb.weight.shape == (10, 4) and not emb.weight.numpy()[0].any()
    indices = flow.tensor([[1, 2, 4], [4, 3, 9]], dtype=flow.int32)
    out = emb(indices)
    np.testing.assert_array_equal(out.numpy(), emb.weight.numpy()[indices.numpy()])
    out.sum().backward()
    counts = np.bincount(indices.numpy().ravel(), minlength=10).astype(np.float32)
    np.testing.assert_array_equal(emb.weight.grad.numpy(), np.repeat(counts[:, None], 4, axis=1))


def test_deprecated_module_counts_calls():
    class Twice(flow.deprecated.nn.Module):
        def forward(self, x):
            return 2 * x

    module = Twice("twice")
    assert module(3) == 6 and module(4) == 8
    assert module.module_name == "twice" and module.call_seq_no == 2
    assert Twice().module_name.startswith("Module_")
    with pytest.raises(TypeError, match="override forward"):
        class Bad(flow.deprecated.nn.Module):
            def __call__(self, *args):
                return None


def test_no_grad_results_are_leaves_and_equality_is_identity_as_in_legacy():
    x = flow.Tensor(np.ones((2, 3), np.float32), requires_grad=True)
    with flow.no_grad():
        m = x + 1.0
    assert m.is_leaf and not m.requires_grad and (x + 1.0).requires_grad
    m.requires_grad = True
    assert m == m and m != x and x.grad is None  # identity, as legacy's tensors compared
    assert x.eq(x).tolist() == [[1, 1, 1]] * 2 and x.ne(m).tolist() == [[1, 1, 1]] * 2

    class Pair(flow.nn.Module):
        def __init__(self, first, second):
            super().__init__()
            self.param1 = first
            self.param2 = second

    p0, p1 = flow.nn.Parameter(flow.Tensor(2, 3)), flow.nn.Parameter(flow.Tensor(2, 3))
    outer = Pair(p1, Pair(p0, p1))
    assert list(outer.parameters()) == [p1, p0]  # each parameter once, in registration order
    assert outer.state_dict() == {"param1": p1, "param2.param1": p0, "param2.param2": p1}


def test_unary_methods_run_their_op_records():
    x = flow.Tensor([[0.25, -0.5]])
    np.testing.assert_allclose(x.arcsin().numpy(), np.arcsin(x.numpy()), rtol=1e-6)
    np.testing.assert_allclose(x.sigmoid().numpy(), 1 / (1 + np.exp(-x.numpy())), rtol=1e-6)
    assert x.abs().tolist() == [[0.25, 0.5]] and x.neg().tolist() == [[-0.25, 0.5]]


def test_a_state_dict_saved_with_flow_save_loads_back(tmp_path):
    model, other = MLP(), MLP()
    flow.save(model.state_dict(), str(tmp_path / "model"))
    other.load_state_dict(flow.load(str(tmp_path / "model")))
    x = flow.Tensor(X)
    np.testing.assert_array_equal(other(x).numpy(), model(x).numpy())


def test_a_failing_kernel_names_the_op():
    with pytest.raises(FlowjobError, match=r"\(gather\).*kernel failed on tensors: IndexError"):
        flow.nn.Embedding(3, 2)(flow.tensor([[5]]))
