"""The job functions ``Model.fit`` runs, built from the model's ``training_step`` / ``validation_step``.

Their names are legacy's (``<Model class>_Model_train_numpy_job_<optimizer_idx>``, ...), so checkpoints
hold the same ``System-Train-TrainStep-<job>`` counters as legacy's did. A ``NumpyDataModule``'s first
batch gives the job one placeholder per array (named ``<DataModule class>_opt_<i>_para_<k>``); any other
``DataModule`` is called inside the job, so its ops are part of it.
"""
from __future__ import annotations

import inspect
from typing import Any, Callable

from flowjob_core import Blob, JobFunction, global_function

from oneflow.model._data import DataModule, NumpyDataModule


def job_function(name: str, job_type: str, exe_cfg: Any, body: Callable[[tuple[Any, ...]], Any],
                 data: DataModule, first_batch: Any, optimizer_idx: int) -> JobFunction:
    """A global function running ``body(batch)``: fed ``first_batch``'s placeholders (a ``NumpyDataModule``), or
    taking the batch from ``data`` inside the job."""
    if isinstance(data, NumpyDataModule):
        placeholders = data.infer_oneflow_data_placeholder(first_batch, optimizer_idx)

        def job(*batch: Any):  # no return annotation: the call gives legacy's future of local blobs
            return body(batch)

        stem = f"{type(data).__name__}_opt_{optimizer_idx}_para_"
        job.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [inspect.Parameter(f"{stem}{k}", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=p)
             for k, p in enumerate(placeholders)])
    else:
        def job():  # type: ignore[misc]  # the other branch's job, without parameters
            return body(data(0, optimizer_idx))

    job.__name__ = job.__qualname__ = name
    return global_function(type=job_type, function_config=exe_cfg)(job)


def loss_of(outputs: Any, model_name: str) -> Blob:
    """What ``training_step`` returned: the loss, or a tuple whose first item is the loss."""
    loss = outputs[0] if isinstance(outputs, tuple) and outputs else outputs
    if not isinstance(loss, Blob):
        raise TypeError(f"{model_name}.training_step must return the loss blob or a tuple starting with it, "
                        f"got {type(loss).__name__}")
    return loss


def training_body(model: Any, optimizer: Any, optimizer_idx: int) -> Callable[[tuple[Any, ...]], Any]:
    def body(batch: Any) -> Any:
        outputs = model.training_step(batch=batch, optimizer_idx=optimizer_idx)
        optimizer.minimize(loss_of(outputs, type(model).__name__))
        return outputs

    return body


def validation_body(model: Any, numpy_input: bool) -> Callable[[tuple[Any, ...]], Any]:
    def body(batch: Any) -> Any:
        # legacy passed a fed batch by keyword, one made in the job by position
        return model.validation_step(batch=batch) if numpy_input else model.validation_step(batch)

    return body


__all__ = ["job_function", "loss_of", "training_body", "validation_body"]
