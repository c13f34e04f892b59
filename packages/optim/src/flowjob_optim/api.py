"""``flow.optimizer``: the names the face re-exports (``from flowjob_optim.api import *``)."""
from flowjob_optim.clipping import ClipGradient, by_global_norm, grad_clipping
from flowjob_optim.combined import CombinedOptimizer
from flowjob_optim.loss_scale import loss_scale
from flowjob_optim.optimizers import SGD, SGDW, Adam, AdamW, LAMB, LARS, LazyAdam, Optimizer, RMSProp
from flowjob_optim.schedules import (
    ConstantWarmup, CosineScheduler, CustomScheduler, ExponentialScheduler, InverseTimeScheduler,
    LinearCosineScheduler, LinearWarmup, LrScheduler, NaturalExpScheduler, PiecewiseConstantScheduler,
    PiecewiseScalingScheduler, PolynomialSchduler, PolynomialScheduler, warmup)

__all__ = [
    "Adam", "AdamW", "ClipGradient", "CombinedOptimizer", "ConstantWarmup", "CosineScheduler", "CustomScheduler",
    "ExponentialScheduler", "InverseTimeScheduler", "LAMB", "LARS", "LazyAdam", "LinearCosineScheduler",
    "LinearWarmup", "LrScheduler", "NaturalExpScheduler", "Optimizer", "PiecewiseConstantScheduler",
    "PiecewiseScalingScheduler", "PolynomialSchduler", "PolynomialScheduler", "RMSProp", "SGD", "SGDW",
    "by_global_norm", "grad_clipping", "loss_scale", "warmup",
]
