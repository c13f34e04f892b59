"""Which ops ``flow.onnx.export`` writes, and why each other op has no ONNX form: the list ``python -m oneflow
info`` prints and the exporter's refusal names.

An op without a converter falls in one of the families below (a reason of its own, or its family's by
name); an op of a third-party plugin in none of them is reported as having no converter.
"""
from __future__ import annotations

from typing import Iterable

from flowjob_ops.export.onnx_nodes import CONVERTERS

__all__ = ["describe", "exported", "not_exported", "reason"]

_TRAINING = "a train job's update of its state; export the predict job"
_DATA = "a data pipeline op (reads files or decodes records); feed the model its decoded inputs instead"
_BUFFER = "works on tensor buffers (arrays of arrays), which ONNX tensors cannot hold"
_RANDOM = "draws from flowjob's seeded generator stream, whose values no ONNX runtime reproduces"
_DYNAMIC = "its row count depends on the data while flowjob plans a fixed one; ONNX gives another shape"
_HOST = "a host-side effect (summary writing, profiler marks) with no value to compute"
_GRAPH = "a node of the job's structure itself, written as the model's inputs, initializers and outputs"
_TIME = "a time-shape op (legacy's repeat/acc/pack/unpack across steps), which a one-step ONNX model lacks"
_GRADIENT = "a gradient op, made only in train jobs; export the predict job"
_SHARDED = ("one rank's piece of an op over a split variable, made by the boxing pass of a job on several ranks; "
            "export the job from one process")
_TEST = "one of legacy's test ops (flowjob_ops.records.op_test_fixtures), never part of a model"

REASONS: dict[str, str] = {
    "input": _GRAPH, "variable": _GRAPH, "return": _GRAPH, "fetch": _GRAPH,
    "assign": _TRAINING, "batch_norm_train": _TRAINING, "batch_norm_moving_update": _TRAINING,
    "ssp_variable_proxy": _TRAINING, "indexed_slices_reduce_sum": "combines the sparse rows of a gradient; "
                                                                  "made only in train jobs",
    "unbroadcast": "sums a broadcast gradient back to its input's shape; made only in train jobs",
    "scale_by_loss_count": "scales a variable's gradient by the step's loss count; made only in train jobs",
    "random_uniform": _RANDOM, "random_normal": _RANDOM, "bernoulli": _RANDOM, "coin_flip": _RANDOM,
    "random_mask_like": _RANDOM, "generate_random_batch_permutation_indices": _RANDOM, "decode_random": _RANDOM,
    "distributed_partial_fc_sample": _RANDOM,
    "argwhere": _DYNAMIC, "bounded_concat": _DYNAMIC,
    "concat_split_like": "splits bounded_concat's gradient by its inputs' rows; made only in train jobs",
    "sync_dynamic_resize": _DYNAMIC, "unique_with_counts": _DYNAMIC,
    "acc": _TIME, "repeat": _TIME, "pack": _TIME, "unpack": _TIME,
    "create_summary_writer": _HOST, "flush_summary_writer": _HOST, "nvtx_start": _HOST, "nvtx_end": _HOST,
    "categorical_ordinal_encode": "keeps a hash table of the ids seen so far, updated in place at each call",
    "lgamma": "ONNX has no log-gamma function (nor a digamma for its gradient)",
    "ctc_loss": "ONNX has no CTC loss (its dynamic program needs a Loop over time steps)",
    "crop_mirror_normalize_from_uint8": _DATA, "object_bbox_flip": _DATA, "object_bbox_scale": _DATA,
    "object_segmentation_polygon_flip": _DATA, "object_segmentation_polygon_scale": _DATA,
    "object_segmentation_polygon_to_mask": _DATA, "gen_tensor_buffer": _BUFFER,
    "cpu_only_relu_test": _TEST,
    "conv2d_grad_data": _GRADIENT, "conv2d_grad_filter": _GRADIENT, "conv3d_grad_data": _GRADIENT,
    "conv3d_grad_filter": _GRADIENT,
    "conv2d_bias_pool": "made by flowjob's fusion pass after tracing; flow.onnx.export reads the job as traced, "
                        "where its parts (conv2d, bias_add, relu, max_pool2d) export",
    "elementwise_chain": "made by flowjob's fusion pass after tracing; flow.onnx.export reads the job as traced, "
                         "where each step's op exports",
}
"""op type -> why it has no ONNX form, for the ops no family below names."""

_FAMILIES: tuple[tuple[tuple[str, ...], tuple[str, ...], str], ...] = (
    ((), ("_grad",), _GRADIENT),
    (("optim_",), (), _TRAINING),
    (("sharded_",), (), _SHARDED),
    (("test_",), (), _TEST),
    (("image_", "ofrecord_", "onerec_", "coco_", "megatron_"), (), _DATA),
    (("tensor_buffer", "tensor_list", "tensor_to_tensor_buffer"), ("_tensor_buffer",), _BUFFER),
)


def reason(op: str) -> str | None:
    """Why ``op`` has no ONNX form; None where it has a converter or no reason is known (a plugin's op)."""
    if op in CONVERTERS:
        return None
    if op in REASONS:
        return REASONS[op]
    for prefixes, suffixes, why in _FAMILIES:
        if (prefixes and op.startswith(prefixes)) or (suffixes and op.endswith(suffixes)):
            return why
    return None


def exported(ops: Iterable[str]) -> list[str]:
    """The ops among ``ops`` that export, sorted."""
    return sorted(op for op in ops if op in CONVERTERS)


def not_exported(ops: Iterable[str]) -> dict[str, str]:
    """Each op among ``ops`` that does not export, with the reason (sorted by name)."""
    return {op: reason(op) or "no ONNX converter is written for it" for op in sorted(ops) if op not in CONVERTERS}


def describe(ops: Iterable[str]) -> list[str]:
    """Lines for ``python -m oneflow info``: how many of ``ops`` export, and the others grouped by reason."""
    names = sorted(set(ops))
    by_reason: dict[str, list[str]] = {}
    for op, why in not_exported(names).items():
        by_reason.setdefault(why, []).append(op)
    lines = [f"onnx export (flow.onnx.export): {len(exported(names))} of {len(names)} ops; the others, by reason:"]
    for why, group in sorted(by_reason.items(), key=lambda item: -len(item[1])):
        lines.append(f"  {why}: {', '.join(group)}")
    return lines
