"""``oneflow.core.job.initializer_conf_pb2``: legacy's ``InitializerConf`` and its member messages.

Legacy programs build an initializer as a message and pass it wherever an initializer is accepted::

    init = initializer_conf_util.InitializerConf()
    init.truncated_normal_conf.std = 0.02
    flow.get_variable("w", shape=(4, 4), initializer=init)

flowjob reads such a message as the matching ``flow.*_initializer``. ``initializer_conf.proto``
beside this file is the documented source (field numbers and defaults are legacy's); the descriptor
is built in code by ``oneflow.core._descriptors``.
"""
from __future__ import annotations

from google.protobuf.descriptor_pb2 import DescriptorProto

from oneflow.core._descriptors import Field, enum, file, load, message


def _range(name: str, scalar: str) -> DescriptorProto:
    return message(name, Field("optional", scalar, "start", 1, default="0"),
                   Field("optional", scalar, "stride", 2, default="1"),
                   Field("optional", "int64", "axis", 3, default="-1"))


def _fan(name: str) -> DescriptorProto:
    return message(name, Field("required", "VarianceNorm", "variance_norm", 1),
                   Field("required", "string", "data_format", 2))


# the oneof ``type`` of InitializerConf: field name -> member message, numbered 1.. in this order
MEMBERS: dict[str, str] = {
    "constant_conf": "ConstantInitializerConf",
    "constant_int_conf": "ConstantIntInitializerConf",
    "random_uniform_conf": "RandomUniformInitializerConf",
    "random_uniform_int_conf": "RandomUniformIntInitializerConf",
    "random_normal_conf": "RandomNormalInitializerConf",
    "truncated_normal_conf": "TruncatedNormalInitializerConf",
    "xavier_conf": "XavierInitializerConf",
    "msra_conf": "MsraInitializerConf",
    "range_conf": "RangeInitializerConf",
    "int_range_conf": "IntRangeInitializerConf",
    "variance_scaling_conf": "VarianceScalingInitializerConf",
    "empty_conf": "EmptyInitializerConf",
}

_FILE = load(file(
    "oneflow/core/job/initializer_conf.proto",
    enums=[enum("VarianceNorm", "kFanIn", "kFanOut", "kAverage"),
           enum("RandomDistribution", "kRandomUniform", "kRandomNormal", "kTruncatedNormal")],
    messages=[
        message("ConstantInitializerConf", Field("optional", "float", "value", 1, default="0")),
        message("ConstantIntInitializerConf", Field("optional", "int64", "value", 1, default="0")),
        message("RandomUniformInitializerConf", Field("optional", "float", "min", 1, default="0"),
                Field("optional", "float", "max", 2, default="1")),
        message("RandomUniformIntInitializerConf", Field("optional", "int32", "min", 1, default="0"),
                Field("optional", "int32", "max", 2, default="1")),
        message("RandomNormalInitializerConf", Field("optional", "float", "mean", 1, default="0"),
                Field("optional", "float", "std", 2, default="1")),
        message("TruncatedNormalInitializerConf", Field("optional", "float", "mean", 1, default="0"),
                Field("optional", "float", "std", 2, default="0.05")),
        _fan("XavierInitializerConf"),
        _fan("MsraInitializerConf"),
        _range("RangeInitializerConf", "double"),
        _range("IntRangeInitializerConf", "int64"),
        message("VarianceScalingInitializerConf", Field("required", "float", "scale", 1),
                Field("required", "VarianceNorm", "variance_norm", 2),
                Field("required", "RandomDistribution", "distribution", 3),
                Field("required", "string", "data_format", 4)),
        message("EmptyInitializerConf"),
        message("InitializerConf", *(Field("optional", member, field, number, oneof="type")
                                     for number, (field, member) in enumerate(MEMBERS.items(), start=1))),
    ],
))

DESCRIPTOR = _FILE.DESCRIPTOR
VarianceNorm = _FILE.VarianceNorm
RandomDistribution = _FILE.RandomDistribution
kFanIn: int = _FILE.kFanIn
kFanOut: int = _FILE.kFanOut
kAverage: int = _FILE.kAverage
kRandomUniform: int = _FILE.kRandomUniform
kRandomNormal: int = _FILE.kRandomNormal
kTruncatedNormal: int = _FILE.kTruncatedNormal
ConstantInitializerConf = _FILE.ConstantInitializerConf
ConstantIntInitializerConf = _FILE.ConstantIntInitializerConf
RandomUniformInitializerConf = _FILE.RandomUniformInitializerConf
RandomUniformIntInitializerConf = _FILE.RandomUniformIntInitializerConf
RandomNormalInitializerConf = _FILE.RandomNormalInitializerConf
TruncatedNormalInitializerConf = _FILE.TruncatedNormalInitializerConf
XavierInitializerConf = _FILE.XavierInitializerConf
MsraInitializerConf = _FILE.MsraInitializerConf
RangeInitializerConf = _FILE.RangeInitializerConf
IntRangeInitializerConf = _FILE.IntRangeInitializerConf
VarianceScalingInitializerConf = _FILE.VarianceScalingInitializerConf
EmptyInitializerConf = _FILE.EmptyInitializerConf
InitializerConf = _FILE.InitializerConf

__all__ = [
    "ConstantInitializerConf", "ConstantIntInitializerConf", "EmptyInitializerConf", "InitializerConf",
    "IntRangeInitializerConf", "MsraInitializerConf", "RandomDistribution", "RandomNormalInitializerConf",
    "RandomUniformInitializerConf", "RandomUniformIntInitializerConf", "RangeInitializerConf",
    "TruncatedNormalInitializerConf", "VarianceNorm", "VarianceScalingInitializerConf", "XavierInitializerConf",
    "kAverage", "kFanIn", "kFanOut", "kRandomNormal", "kRandomUniform", "kTruncatedNormal",
]
