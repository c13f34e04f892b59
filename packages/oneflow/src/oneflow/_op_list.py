"""A traced job as a saved model's op list (legacy's ``OperatorConf`` messages), and the job back from it.

The job is written as traced, before any pass: each input as an ``input_conf`` (its shape and dtype),
each variable as a ``variable_conf``, each return as a ``return_conf`` and every other node as a
``user_conf`` whose input list ``in`` and output list ``out`` keep the node's order, with its
attributes as ``AttrValue``s (``oneflow._attr_values``). ``replay`` adds the ops again, one by one, to
the job a ``JobBuilder`` is tracing, so every op's inference runs again (an input of another batch size
gives its shapes) and the passes and the planner see an ordinary traced job.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from flowjob_core import Blob, BlobSpec, Job, SavedModelError
from flowjob_core.checkpoint.layout import DATA_TYPES
from flowjob_core.trace.builder import JobBuilder

import oneflow.core.common.data_type_pb2 as data_type_pb
from oneflow import _attr_values
from oneflow.core.operator.op_conf_pb2 import OperatorConf

_DTYPES = {data_type_pb.DataType.Value(name): dtype for dtype, name in DATA_TYPES.items()}


def data_type(dtype: Any, where: str) -> int:
    """Legacy's ``DataType`` number of a numpy dtype."""
    name = DATA_TYPES.get(dtype)
    if name is None:
        raise SavedModelError(f"{where}: dtype {dtype} has no legacy DataType; known: "
                              f"{sorted(str(d) for d in DATA_TYPES)}")
    return data_type_pb.DataType.Value(name)


def numpy_dtype(number: int, where: str) -> Any:
    """The numpy dtype of legacy's ``DataType`` number."""
    if number not in _DTYPES:
        raise SavedModelError(f"{where}: DataType {number} is not one flowjob runs; known: "
                              f"{sorted(data_type_pb.DataType.Name(n) for n in _DTYPES)}")
    return _DTYPES[number]


def split_lbn(lbn: str, where: str) -> tuple[str, str]:
    """``op/blob`` as (op name, blob name)."""
    op_name, slash, blob_name = lbn.rpartition("/")
    if not slash or not op_name or not blob_name:
        raise SavedModelError(f"{where}: {lbn!r} is not a logical blob name ('op_name/blob_name')")
    return op_name, blob_name


def to_op_list(job: Job) -> list[Any]:
    """The op list of the traced ``job`` (a predict job; a train job's update is no part of a model)."""
    where = f"job {job.name!r}"
    if job.type != "predict":
        raise SavedModelError(f"{where} is a {job.type} job: a saved model holds predict jobs (its update steps "
                              f"would not run when served); save a predict job reading the same variables")
    ops = []
    for node in job.nodes:
        conf = OperatorConf(name=node.name, device_tag=node.device)
        node_where = f"{where}, op {node.name!r} ({node.op})"
        if node.op == "input":
            spec = job.specs[node.outputs[0]]
            conf.input_conf.out = split_lbn(node.outputs[0], node_where)[1]
            conf.input_conf.blob_conf.shape.dim.extend(spec.shape)
            conf.input_conf.blob_conf.data_type = data_type(spec.dtype, node_where)
            conf.input_conf.blob_conf.is_dynamic = False
        elif node.op == "variable":
            var = job.variables[node.attrs["name"]]
            conf.variable_conf.out = split_lbn(node.outputs[0], node_where)[1]
            conf.variable_conf.shape.dim.extend(var.spec.shape)
            conf.variable_conf.data_type = data_type(var.spec.dtype, node_where)
            conf.variable_conf.trainable = var.trainable
            if var.model_name is not None:
                conf.variable_conf.model_name = var.model_name
        elif node.op == "return":
            setattr(conf.return_conf, "in", node.inputs[0])  # ``in`` is a Python keyword
            conf.return_conf.out = split_lbn(node.outputs[0], node_where)[1]
        else:
            user = conf.user_conf
            user.op_type_name = node.op
            user.input["in"].s.extend(node.inputs)
            user.output["out"].s.extend(node.outputs)
            for key, value in node.attrs.items():
                user.attr[key].CopyFrom(_attr_values.encode(value, f"{node_where}, attribute {key!r}"))
        ops.append(conf)
    return ops


@dataclass
class SavedGraph:
    """An op list read back: the inputs (op name, lbn, spec) in order, the returns (op name, lbn returned)
    and the other ops."""

    name: str
    inputs: list[tuple[str, str, BlobSpec]]
    returns: list[tuple[str, str]]
    ops: list[Any]

    @classmethod
    def read(cls, name: str, op_list: Iterable[Any]) -> "SavedGraph":
        inputs, returns, ops = [], [], []
        for conf in op_list:
            member = conf.WhichOneof("op_type")
            where = f"saved graph {name!r}, op {conf.name!r}"
            if member == "input_conf":
                blob = conf.input_conf.blob_conf
                spec = BlobSpec(tuple(blob.shape.dim), numpy_dtype(blob.data_type, where))
                inputs.append((conf.name, f"{conf.name}/{conf.input_conf.out}", spec))
            elif member == "return_conf":
                returns.append((conf.name, getattr(conf.return_conf, "in")))
            elif member in ("variable_conf", "user_conf"):
                ops.append(conf)
            else:
                raise SavedModelError(f"{where}: {member or 'no op type'} is not an op flowjob replays (a saved "
                                      f"op list holds input_conf, variable_conf, user_conf and return_conf)")
        return cls(name, inputs, returns, ops)

    def replay(self, builder: JobBuilder, feeds: dict[str, Blob]) -> dict[str, Blob]:
        """Add the ops to ``builder``'s job, reading the input lbns from ``feeds``; every value by lbn."""
        values = dict(feeds)
        for conf in self.ops:
            where = f"saved graph {self.name!r}, op {conf.name!r}"
            if conf.HasField("variable_conf"):
                var = conf.variable_conf
                spec = BlobSpec(tuple(var.shape.dim), numpy_dtype(var.data_type, where))
                blob = builder.add_variable(conf.name, spec, trainable=var.trainable,
                                            model_name=var.model_name if var.HasField("model_name") else None)
                values[f"{conf.name}/{var.out}"] = blob
                continue
            user = conf.user_conf
            names = list(user.input["in"].s) if "in" in user.input else []
            missing = [lbn for lbn in names if lbn not in values]
            if missing:
                raise SavedModelError(f"{where} reads {missing}, which no earlier op of the list gives")
            attrs = {key: _attr_values.decode(value) for key, value in user.attr.items()}
            outs = builder.add_op(user.op_type_name, [values[lbn] for lbn in names], attrs, scoped_name=conf.name,
                                  source=f"op {conf.name!r} of saved graph {self.name!r}")
            saved = list(user.output["out"].s) if "out" in user.output else []
            if len(saved) != len(outs):
                raise SavedModelError(f"{where}: the list names {len(saved)} outputs, op {user.op_type_name!r} "
                                      f"gives {len(outs)}")
            values.update(zip(saved, outs))
        return values
