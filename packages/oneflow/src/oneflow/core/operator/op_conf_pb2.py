"""``oneflow.core.operator.op_conf_pb2``: only legacy's ``ActivationType`` enum.

Legacy's op_conf.proto held every operator configuration of its graph compiler; programs use only
the activation numbers from it (BERT passes ``op_conf_util.kNone`` to its dense layers, legacy model
tests ``kRelu`` / ``kSigmoid``), so that enum is all this module provides. ``op_conf.proto`` beside
this file is its documented source; the descriptor is built in code by ``oneflow.core._descriptors``.
"""
from __future__ import annotations

from oneflow.core._descriptors import enum, file, load

_FILE = load(file("oneflow/core/operator/op_conf.proto",
                  enums=[enum("ActivationType", "kNone", "kTanH", "kSigmoid", "kRelu")], messages=[]))

DESCRIPTOR = _FILE.DESCRIPTOR
ActivationType = _FILE.ActivationType
kNone: int = _FILE.kNone
kTanH: int = _FILE.kTanH
kSigmoid: int = _FILE.kSigmoid
kRelu: int = _FILE.kRelu

__all__ = ["ActivationType", "kNone", "kRelu", "kSigmoid", "kTanH"]
