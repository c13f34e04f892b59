"""func_config.indexed_slices_optimizer_conf as legacy v0.3/v0.4: listed embedding variables (gradient from
one flow.gather along axis 0) update only the looked-up rows, duplicates summed, and only those rows' optimizer
slots (SGD, momentum, Adam, LazyAdam, and SGDW/AdamW's weight decay); other rows and slots keep their values.
Where legacy had no sparse update, the option is refused with an error naming the job, the variable and the
reason. The end holds legacy v0.3.4's own test_optimizers.py indexed-slices tests, as they were written."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core import ConfigError, get_default_session
from flowjob_core.testing.modules import sibling

helpers = sibling(__file__, "op_surface_helpers")
fresh_session = helpers.fresh_session
value = helpers.value

ROWS, DIM, BATCH = 7, 3, 6
RNG = np.random.default_rng(3)
TABLE = RNG.standard_normal((ROWS, DIM)).astype(np.float32)
TARGET = RNG.standard_normal((BATCH, DIM)).astype(np.float32)
# repeated rows (2 three times, 0 twice), negative ones (-1 is row 6), rows 1, 3, 4 never looked up
IDS = [np.array([2, 0, 2, 5, -1, 2], np.int32), np.array([0, 0, 6, 5, 2, 2], np.int32),
       np.array([5, 2, 0, 0, 6, 6], np.int32)]
UNTOUCHED = [1, 3, 4]
LR = 0.1


def sparse_conf(*names: str, enable: bool | None = None) -> Any:
    cfg = flow.function_config()
    conf: dict[str, Any] = {"include_op_names": {"op_name": list(names)}}
    if enable is not None:
        conf["enable"] = enable
    cfg.indexed_slices_optimizer_conf(conf)
    return cfg


def embedding_job(make_optimizer: Callable[[], Any], cfg: Any, regularizer: Any = None, load: bool = True) -> Any:
    """The job; ``load``: set the table (which plans every job, so a refused one fails there already)."""
    @flow.global_function(type="train", function_config=cfg)
    def train(ids: tp.Numpy.Placeholder((BATCH,), dtype=flow.int32)) -> tp.Numpy:
        table = flow.get_variable("embedding", shape=(ROWS, DIM), initializer=flow.constant_initializer(0.0),
                                  regularizer=regularizer)
        diff = flow.gather(table, ids) - flow.constant(TARGET, dtype=flow.float32)
        loss = flow.math.square(diff)
        make_optimizer().minimize(loss)
        return loss

    if load:
        flow.load_variables({"embedding": TABLE})
    return train


def row_gradient(w: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The looked-up rows (each once) and their gradients of mean((w[ids] - target)^2), duplicates summed."""
    rows = np.unique(ids % ROWS)
    grad = np.zeros((ROWS, DIM), np.float64)
    np.add.at(grad, ids % ROWS, 2.0 * (w[ids % ROWS] - TARGET) / TARGET.size)
    return rows, grad[rows]


def reference(kind: str, steps: int, **hyper: float) -> dict[str, np.ndarray]:
    w = TABLE.astype(np.float64)
    m, v = np.zeros_like(w), np.zeros_like(w)
    b1, b2, eps, beta = hyper.get("beta1", 0.9), hyper.get("beta2", 0.999), hyper.get("epsilon", 1e-8), 0.9
    b1t, b2t = b1, b2
    for ids in IDS[:steps]:
        r, g = row_gradient(w, ids)
        if kind == "sgd":
            w[r] -= LR * g
        elif kind == "momentum":
            m[r] = beta * m[r] - LR * g
            w[r] += m[r]
        else:
            lr = LR
            if kind == "adam_bc":
                lr = LR * np.sqrt(1 - b2t) / (1 - b1t)
                b1t, b2t = b1t * b1, b2t * b2
            m[r] = b1 * m[r] + (1 - b1) * g
            v[r] = b2 * v[r] + (1 - b2) * g * g
            w[r] -= lr * m[r] / (np.sqrt(v[r]) + eps)
    return {"w": w, "m": m, "v": v, "b1t": np.array([b1t]), "b2t": np.array([b2t])}


def schedule() -> Any:
    return flow.optimizer.PiecewiseConstantScheduler([], [LR])


CASES = {
    "sgd": (lambda: flow.optimizer.SGD(schedule(), momentum=0), "sgd", {}),
    "momentum": (lambda: flow.optimizer.SGD(schedule(), momentum=0.9), "momentum", {"embedding-momentum": "m"}),
    "adam": (lambda: flow.optimizer.Adam(schedule()), "adam", {"embedding-m": "m", "embedding-v": "v"}),
    "adam_bias_corrected": (lambda: flow.optimizer.Adam(schedule(), do_bias_correction=True), "adam_bc",
                            {"embedding-m": "m", "embedding-v": "v", "embedding-beta1_t": "b1t",
                             "embedding-beta2_t": "b2t"}),
    "lazy_adam": (lambda: flow.optimizer.LazyAdam(schedule()), "adam_bc",
                  {"embedding-m": "m", "embedding-v": "v", "embedding-beta1_t": "b1t", "embedding-beta2_t": "b2t"}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_only_looked_up_rows_and_their_slots_change(case: str) -> None:
    make, kind, slots = CASES[case]
    job = embedding_job(make, sparse_conf("embedding"))
    for ids in IDS:
        job(ids)
    ref = reference(kind, len(IDS))
    # Adam's m / sqrt(v) of small float32 gradients loses a few more digits than the other rules
    tol = {"rtol": 1e-4, "atol": 1e-5} if "adam" in kind else {"rtol": 1e-5, "atol": 1e-6}
    np.testing.assert_allclose(value("embedding"), ref["w"], **tol)
    np.testing.assert_array_equal(value("embedding")[UNTOUCHED], TABLE[UNTOUCHED])
    for slot, key in slots.items():
        np.testing.assert_allclose(value(slot), ref[key].reshape(value(slot).shape), rtol=1e-5, atol=1e-7,
                                   err_msg=slot)
        if key in ("m", "v"):
            assert not value(slot)[UNTOUCHED].any(), slot
    ops = {node.op for node in job.plan().order}
    assert any(op.startswith("optim_indexed_slices_") for op in ops)
    assert "gather_grad" not in ops  # no dense gradient is made


def test_returned_loss_uses_the_rows_before_the_update() -> None:
    job = embedding_job(CASES["momentum"][0], sparse_conf("embedding"))
    np.testing.assert_allclose(job(IDS[0]), (TABLE[IDS[0] % ROWS] - TARGET) ** 2, rtol=1e-6)


def test_sparse_sgd_equals_the_dense_update() -> None:
    # plain SGD moves only rows with a gradient anyway: both forms must agree
    embedding_job(CASES["sgd"][0], sparse_conf("embedding"))(IDS[0])
    sparse = value("embedding")
    flow.clear_default_session()
    embedding_job(CASES["sgd"][0], flow.function_config())(IDS[0])
    np.testing.assert_allclose(sparse, value("embedding"), rtol=1e-6, atol=1e-7)


def test_disabled_or_unlisted_variables_update_densely() -> None:
    for cfg in (sparse_conf("embedding", enable=False), sparse_conf()):
        flow.clear_default_session()
        job = embedding_job(CASES["momentum"][0], cfg)
        job(IDS[0])
        job(IDS[1])
        assert "optim_momentum_update" in {node.op for node in job.plan().order}
        # the dense momentum keeps moving rows whose gradient is zero now (row 1 never has one, row 6 has one once)
        assert value("embedding-momentum")[6].any()


def test_other_variables_of_the_job_update_densely() -> None:
    @flow.global_function(type="train", function_config=sparse_conf("embedding"))
    def train(ids: tp.Numpy.Placeholder((BATCH,), dtype=flow.int32)) -> tp.Numpy:
        table = flow.get_variable("embedding", shape=(ROWS, DIM), initializer=flow.constant_initializer(0.5))
        w = flow.get_variable("w", shape=(DIM, 1), initializer=flow.constant_initializer(1.0))
        loss = flow.math.square(flow.matmul(flow.gather(table, ids), w))
        flow.optimizer.SGD(schedule(), momentum=0.9).minimize(loss)
        return loss

    train(IDS[0])
    ops = [node.op for node in train.plan().order]
    assert "optim_indexed_slices_momentum_update" in ops and "optim_momentum_update" in ops
    assert value("embedding")[UNTOUCHED].tolist() == [[0.5] * DIM] * len(UNTOUCHED)
    assert (value("w") != 1.0).all()


def refused(job: Any, *expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        job(IDS[0])
    message = str(info.value)
    for part in ("indexed_slices_optimizer_conf", "'train'", *expected):
        assert part in message, (part, message)


@pytest.mark.parametrize("make, why", [
    (lambda: flow.optimizer.RMSProp(schedule()), "RMSProp"),
    (lambda: flow.optimizer.LAMB(schedule()), "LAMB"),
    (lambda: flow.optimizer.LARS(schedule()), "LARS"),
])
def test_optimizers_without_a_sparse_form_update_densely_with_a_warning(make: Callable[[], Any], why: str) -> None:
    # legacy's rewrite skipped them silently; the v0.4 Wide&Deep benchmark relies on it with LARS
    with pytest.warns(UserWarning, match=rf"indexed_slices_optimizer_conf of job 'train', variable 'embedding'.*"
                                         rf"{why} updates it densely"):
        train = embedding_job(make, sparse_conf("embedding"))  # loading the table plans the job
        train(IDS[0])
    ops = [node.op for node in train.plan().order]
    assert not any(op.startswith("optim_indexed_slices") for op in ops), ops
    assert (flow.get_all_variables()["embedding"].numpy() != TABLE).any()


@pytest.mark.parametrize("make, why", [
    (lambda: flow.optimizer.SGD(schedule(), momentum=0,
                                grad_clipping=flow.optimizer.grad_clipping.by_global_norm(1.0)), "clipping"),
])
def test_updates_legacy_had_no_sparse_form_for_are_refused(make: Callable[[], Any], why: str) -> None:
    refused(embedding_job(make, sparse_conf("embedding"), load=False), "'embedding'", why)


def test_a_regularized_variable_is_refused() -> None:
    refused(embedding_job(CASES["sgd"][0], sparse_conf("embedding"), flow.regularizers.l2(0.1), load=False), "L1/L2")


def test_accumulation_and_sparse_updates_are_refused_together() -> None:
    cfg = sparse_conf("embedding")
    cfg.train.num_gradient_accumulation_steps(2)
    refused(embedding_job(CASES["sgd"][0], cfg, load=False), "num_gradient_accumulation_steps")


def test_unknown_names_and_dense_gradients_update_densely_with_a_warning() -> None:
    # a name the job lacks: legacy matched nothing; here a warning names it (a typo shows) and training goes on
    with pytest.warns(UserWarning, match=r"job 'train', variable 'embeding': no variable of that name"):
        typo = embedding_job(CASES["sgd"][0], sparse_conf("embeding"))
        typo(IDS[0])
    assert not any(node.op.startswith("optim_indexed_slices") for node in typo.plan().order)
    assert (value("embedding")[2] != TABLE[2]).all()  # a looked-up row trained (densely)

    flow.clear_default_session()

    @flow.global_function(type="train", function_config=sparse_conf("embedding"))
    def train(ids: tp.Numpy.Placeholder((BATCH,), dtype=flow.int32)) -> tp.Numpy:
        table = flow.get_variable("embedding", shape=(ROWS, DIM), initializer=flow.constant_initializer(0.5))
        # also read by a reduction: the gradient is no longer one gather's
        loss = flow.math.reduce_sum(flow.gather(table, ids)) + flow.math.reduce_sum(table)
        flow.optimizer.SGD(schedule(), momentum=0).minimize(loss)
        return loss

    # legacy's rewrite did not match such a variable and updated it densely: so here, and a warning names it
    with pytest.warns(UserWarning, match=r"job 'train', variable 'embedding': a sparse update needs a gradient "
                                         r"from one flow.gather along axis 0.*updated densely"):
        train(IDS[0])
    assert not any(node.op.startswith("optim_indexed_slices") for node in train.plan().order)
    counts = np.bincount(IDS[0] % ROWS, minlength=ROWS)[:, None]  # every row: 1 from the sum, plus its lookups
    np.testing.assert_allclose(value("embedding"), np.broadcast_to(0.5 - LR * (counts + 1), (ROWS, DIM)), rtol=1e-6)


def test_a_refused_job_leaves_the_session_usable() -> None:
    clipped = flow.optimizer.grad_clipping.by_global_norm(1.0)
    bad = embedding_job(lambda: flow.optimizer.SGD(schedule(), momentum=0, grad_clipping=clipped),
                        sparse_conf("embedding"), load=False)
    refused(bad, "clipping")
    refused(bad, "clipping")  # the same error again, not a half-built plan

    @flow.global_function(type="predict")
    def look(ids: tp.Numpy.Placeholder((BATCH,), dtype=flow.int32)) -> tp.Numpy:
        return flow.gather(flow.get_variable("embedding", shape=(ROWS, DIM)), ids)

    assert not look(IDS[0]).any()  # the table as the refused job's trace declared it: constant 0


@pytest.mark.parametrize("bad", [
    ["embedding"],
    {"include_op_names": ["embedding"]},
    {"include_op_names": {"op_names": ["embedding"]}},
    {"include_op_names": {"op_name": "embedding"}},
    {"include_op_names": {"op_name": [3]}},
    {"include_op_names": {"op_name": ["embedding"]}, "enable": 1},
    {"include_op_names": {"op_name": ["embedding"]}, "exclude": True},
])
def test_the_conf_layout_is_checked(bad: Any) -> None:
    with pytest.raises(ConfigError, match="indexed_slices_optimizer_conf expects a dict"):
        flow.function_config().indexed_slices_optimizer_conf(bad)


def test_predict_jobs_ignore_the_option() -> None:
    @flow.global_function(type="predict", function_config=sparse_conf("embedding"))
    def look(ids: tp.Numpy.Placeholder((BATCH,), dtype=flow.int32)) -> tp.Numpy:
        return flow.gather(flow.get_variable("embedding", shape=(ROWS, DIM)), ids)

    flow.load_variables({"embedding": TABLE})
    np.testing.assert_array_equal(look(IDS[1]), TABLE[IDS[1] % ROWS])
    assert get_default_session().variables.names() == ["embedding"]


# legacy v0.3.4 test_optimizers.py: test_indexed_slices_{sgd,sgdw,adam,adamw}, as written -------------------
def _unique_grads(sparse_ids, sparse_grads):
    num_ids = np.prod(sparse_ids.shape)
    sparse_grads = sparse_grads.reshape((num_ids,) + sparse_grads.shape[len(sparse_ids.shape):])
    unique_dict = {}
    for i, ids in enumerate(sparse_ids.flatten()):
        if ids in unique_dict:
            unique_dict[ids] += sparse_grads[i].copy()
        else:
            unique_dict[ids] = sparse_grads[i].copy()
    return unique_dict


def _legacy_indexed_slices_job(make_optimizer, model_shape, ids_shape, mul_scalar):
    func_config = flow.FunctionConfig()
    func_config.default_data_type(flow.float32)
    func_config.indexed_slices_optimizer_conf(dict(include_op_names=dict(op_name=["embeddings"])))

    @flow.global_function(type="train", function_config=func_config)
    def testIndexedSlices(sparse_ids: flow.typing.Numpy.Placeholder(ids_shape, dtype=flow.int32)
                          ) -> flow.typing.Numpy:
        with flow.scope.placement("cpu", "0:0"):
            embedding_table = flow.get_variable(name="embeddings", shape=model_shape,
                                                initializer=flow.random_uniform_initializer(minval=0, maxval=100))
            embedding = flow.gather(params=embedding_table * mul_scalar, indices=sparse_ids)
            loss = flow.math.reduce_mean(embedding)
            make_optimizer().minimize(loss)
            return embedding_table

    return testIndexedSlices


def _run_legacy(job, model_shape, ids_shape, train_iters):
    sparse_ids = np.random.default_rng(34).integers(model_shape[0], size=ids_shape).astype(np.int32)
    init_value = None
    for i in range(train_iters + 1):
        x = job(sparse_ids)
        if i == 0:
            init_value = np.copy(x)
    return sparse_ids, init_value, x


@pytest.mark.parametrize("momentum_beta, mul_scalar, weight_decay",
                         [(0, 1, 0.0), (0.9, 2, 0.0), (0, 2, 0.5), (0.9, 2, 0.5), (0, 2, 0.3), (0.9, 2, 0.3)])
def test_legacy_indexed_slices_sgd_and_sgdw(momentum_beta, mul_scalar, weight_decay):
    model_shape, ids_shape, grad_shape, learning_rate, train_iters = (200, 2), (10, 4), (10, 4, 2), 1, 10
    schedule = flow.optimizer.PiecewiseConstantScheduler([], [learning_rate])
    if weight_decay:
        make = lambda: flow.optimizer.SGDW(schedule, momentum=momentum_beta, weight_decay=weight_decay)  # noqa: E731
    else:
        make = lambda: flow.optimizer.SGD(schedule, momentum=momentum_beta)  # noqa: E731
    job = _legacy_indexed_slices_job(make, model_shape, ids_shape, mul_scalar)
    sparse_ids, param, x = _run_legacy(job, model_shape, ids_shape, train_iters)
    gradient = np.full(grad_shape, float(mul_scalar) / np.prod(grad_shape))
    momentum = np.zeros(param.shape)
    unique_dict = _unique_grads(sparse_ids, gradient)
    for _ in range(train_iters):
        param_t, momentum_t = np.copy(param), np.copy(momentum)
        for ids in unique_dict.keys():
            next_momentum = momentum_beta * momentum_t[ids] - learning_rate * unique_dict[ids]
            momentum_t[ids] = next_momentum
            param_t[ids] = param[ids] + next_momentum - learning_rate * weight_decay * param[ids]
        param, momentum = param_t, momentum_t
    assert np.allclose(x.flatten(), param.flatten(), rtol=1e-4, atol=1e-4)
    assert any(n.op.startswith("optim_indexed_slices_") for n in job.plan().order)


@pytest.mark.parametrize("mul_scalar, weight_decay", [(1, 0.0), (2, 0.0), (2, 0.5), (2, 0.3)])
def test_legacy_indexed_slices_adam_and_adamw(mul_scalar, weight_decay):
    model_shape, ids_shape, grad_shape, train_iters = (200, 2), (10, 4), (10, 4, 2), 10
    beta1, beta2, epsilon, lr = 0.9, 0.99, 1e-9, 1
    schedule = flow.optimizer.PiecewiseConstantScheduler([], [lr])
    if weight_decay:
        make = lambda: flow.optimizer.AdamW(schedule, beta1=beta1, beta2=beta2, epsilon=epsilon,  # noqa: E731
                                            do_bias_correction=True, weight_decay=weight_decay)
    else:
        make = lambda: flow.optimizer.Adam(schedule, beta1=beta1, beta2=beta2, epsilon=epsilon,  # noqa: E731
                                           do_bias_correction=True)
    job = _legacy_indexed_slices_job(make, model_shape, ids_shape, mul_scalar)
    sparse_ids, param, x = _run_legacy(job, model_shape, ids_shape, train_iters)
    gradient = np.full(grad_shape, float(mul_scalar) / np.prod(grad_shape))
    m, v = np.zeros(param.shape), np.zeros(param.shape)
    unique_dict = _unique_grads(sparse_ids, gradient)
    for i in range(train_iters):
        param_t, m_t, v_t = np.copy(param), np.copy(m), np.copy(v)
        for ids in unique_dict.keys():
            lr_t = lr * np.sqrt(1 - beta2 ** (i + 1)) / (1 - beta1 ** (i + 1))
            m_t[ids] = beta1 * m[ids] + (1 - beta1) * unique_dict[ids]
            v_t[ids] = beta2 * v[ids] + (1 - beta2) * unique_dict[ids] * unique_dict[ids]
            param_t[ids] = param[ids] - lr_t * (m_t[ids] / (np.sqrt(v_t[ids]) + epsilon) + weight_decay * param[ids])
        param, m, v = param_t, m_t, v_t
    assert np.allclose(x.flatten(), param.flatten(), rtol=1e-4, atol=1e-4)
    assert any(n.op.startswith("optim_indexed_slices_") for n in job.plan().order)
