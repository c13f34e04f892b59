"""Version-0.1 training: ``cfg.train.primary_lr(lr)`` + ``cfg.train.model_update_conf({...})`` + ``add_loss``.

The dict mirrors legacy ``NormalModelUpdateOpUserConf``: exactly one of ``naive_conf``,
``momentum_conf {beta}``, ``rmsprop_conf {decay_rate, epsilon, centered}``,
``adam_conf {beta1, beta2, epsilon, do_bias_correction}``, ``lazy_adam_conf {beta1, beta2, epsilon}``,
``lars_conf {momentum_beta, epsilon, lars_coefficient}``, ``lamb_conf``; optionally
``learning_rate_decay {exponential_conf | inverse_time_conf | natural_exp_conf |
piecewise_constant_conf | polynomial_conf | cosine_conf | linear_cosine_conf |
piecewise_scaling_conf}``, ``warmup_conf {constant_conf | linear_conf}``,
``clip_conf {clip_by_global_norm {clip_norm}}``,
``weight_decay_conf {weight_decay_rate, includes | excludes {pattern: [...]}}``.
``secondary_lr`` is the rate of variables whose name ends in ``bias`` (legacy: model_name
"bias"); ``weight_l2``/``bias_l2`` add L2 terms to those gradients.
"""
from __future__ import annotations

from typing import Any

from flowjob_core import ConfigError

from flowjob_optim import optimizers, schedules
from flowjob_optim.clipping import by_global_norm

_RULES = ("naive_conf", "momentum_conf", "rmsprop_conf", "adam_conf", "lazy_adam_conf", "lars_conf", "lamb_conf")
_EXTRAS = ("learning_rate_decay", "warmup_conf", "clip_conf", "weight_decay_conf")
_REQUIRED: Any = object()


def _take(conf: dict[str, Any], where: str, **defaults: Any) -> dict[str, Any]:
    if not isinstance(conf, dict):
        raise ConfigError(f"{where} must be a dict, got {conf!r}")
    unknown = sorted(set(conf) - set(defaults))
    if unknown:
        raise ConfigError(f"{where}: unknown field(s) {unknown}; known: {sorted(defaults)}")
    missing = sorted(k for k, v in defaults.items() if v is _REQUIRED and k not in conf)
    if missing:
        raise ConfigError(f"{where}: missing required field(s) {missing}")
    return {k: conf.get(k, v) for k, v in defaults.items()}



def _one_of(conf: dict[str, Any], names: tuple[str, ...], where: str) -> tuple[str, Any]:
    found = [n for n in names if n in conf]
    if len(found) != 1:
        raise ConfigError(f"{where} needs exactly one of {list(names)}, found {found or 'none'}")
    return found[0], conf[found[0]]


def _warmup(conf: dict[str, Any] | None, where: str) -> schedules.Warmup | None:
    if conf is None:
        return None
    kind, body = _one_of(conf, ("constant_conf", "linear_conf"), f"{where}['warmup_conf']")
    if kind == "constant_conf":
        c = _take(body, f"{where}['warmup_conf']['constant_conf']", warmup_batches=_REQUIRED, multiplier=_REQUIRED)
        return schedules.ConstantWarmup(int(c["warmup_batches"]), c["multiplier"])
    c = _take(body, f"{where}['warmup_conf']['linear_conf']", warmup_batches=_REQUIRED, start_multiplier=_REQUIRED)
    return schedules.LinearWarmup(int(c["warmup_batches"]), c["start_multiplier"])


def _schedule(lr: float, decay: dict[str, Any] | None, warmup: schedules.Warmup | None,
              where: str) -> schedules.LrScheduler:
    if decay is None:
        return schedules.LrScheduler(lr, warmup)
    names = ("exponential_conf", "inverse_time_conf", "natural_exp_conf", "piecewise_constant_conf",
             "polynomial_conf", "cosine_conf", "linear_cosine_conf", "piecewise_scaling_conf")
    kind, body = _one_of(decay, names, f"{where}['learning_rate_decay']")
    at = f"{where}['learning_rate_decay'][{kind!r}]"
    if kind in ("exponential_conf", "inverse_time_conf", "natural_exp_conf"):
        c = _take(body, at, decay_batches=_REQUIRED, decay_rate=_REQUIRED, staircase=False)
        cls = {"exponential_conf": schedules.ExponentialScheduler, "inverse_time_conf": schedules.InverseTimeScheduler,
               "natural_exp_conf": schedules.NaturalExpScheduler}[kind]
        return cls(lr, int(c["decay_batches"]), c["decay_rate"], c["staircase"], warmup)
    if kind == "piecewise_constant_conf":
        c = _take(body, at, boundaries=_REQUIRED, values=_REQUIRED)
        sched = schedules.PiecewiseConstantScheduler(c["boundaries"], c["values"], warmup)
        sched.base_lr = float(lr)  # the warmup scales primary_lr, as legacy's conf.learning_rate
        return sched
    if kind == "piecewise_scaling_conf":
        c = _take(body, at, boundaries=_REQUIRED, scales=_REQUIRED)
        sched = schedules.PiecewiseScalingScheduler(lr, c["boundaries"], list(c["scales"])[1:], warmup)
        sched.scales = [float(s) for s in c["scales"]]
        return sched
    if kind == "polynomial_conf":
        c = _take(body, at, decay_batches=_REQUIRED, end_learning_rate=0.0001, power=1.0, cycle=False)
        return schedules.PolynomialScheduler(lr, int(c["decay_batches"]), c["end_learning_rate"], c["power"],
                                             c["cycle"], warmup)
    if kind == "cosine_conf":
        c = _take(body, at, decay_batches=_REQUIRED, alpha=0.0)
        return schedules.CosineScheduler(lr, int(c["decay_batches"]), c["alpha"], warmup)
    c = _take(body, at, decay_batches=_REQUIRED, num_periods=0.5, alpha=0.0, beta=0.001)
    return schedules.LinearCosineScheduler(lr, int(c["decay_batches"]), c["num_periods"], c["alpha"], c["beta"],
                                           warmup)


class LegacyOptimizer(optimizers.Optimizer):
    """An optimizer built from a version-0.1 train config; per-variable rate and L2 for biases."""

    def __init__(self, inner: optimizers.Optimizer, secondary: Any, weight_l2: float, bias_l2: float) -> None:
        self.__dict__.update(inner.__dict__)
        self.inner, self.secondary = inner, secondary
        self.weight_l2, self.bias_l2 = weight_l2, bias_l2

    @staticmethod
    def is_bias(var_name: str) -> bool:
        return var_name.endswith("bias")

    def schedule_for(self, var_name: str) -> Any:
        return self.secondary if self.is_bias(var_name) and self.secondary is not None else self.lr_scheduler

    def l2_for(self, var_name: str) -> float:
        return self.bias_l2 if self.is_bias(var_name) else self.weight_l2

    def rule(self, var_name: str) -> optimizers.UpdateRule:
        return self.inner.rule(var_name)


def optimizer_from_train_config(train: Any, job_name: str) -> optimizers.Optimizer:
    """The optimizer a version-0.1 ``cfg.train`` describes; ConfigError names the job and the field."""
    where = f"job {job_name!r}: function_config train.model_update_conf"
    lr = train.get("primary_lr")
    conf = train.get("model_update_conf")
    if lr is None or conf is None:
        missing = [n for n, v in (("primary_lr", lr), ("model_update_conf", conf)) if v is None]
        raise ConfigError(f"job {job_name!r}: version-0.1 training needs train.primary_lr(...) and "
                          f"train.model_update_conf({{'naive_conf': {{}}}}) (or another rule); missing "
                          f"{', '.join('train.' + m for m in missing)}")
    unknown = sorted(set(conf) - set(_RULES) - set(_EXTRAS))
    if unknown:
        raise ConfigError(f"{where}: unknown field(s) {unknown}; known: {sorted(_RULES + _EXTRAS)}")
    kind, body = _one_of(conf, _RULES, where)
    warmup = _warmup(conf.get("warmup_conf"), where)
    sched = _schedule(lr, conf.get("learning_rate_decay"), warmup, where)
    secondary_lr = train.get("secondary_lr")
    secondary = _schedule(secondary_lr, conf.get("learning_rate_decay"), warmup, where) \
        if secondary_lr is not None else None
    clip = None
    if conf.get("clip_conf") is not None:
        _, clip_body = _one_of(conf["clip_conf"], ("clip_by_global_norm",), f"{where}['clip_conf']")
        clip = by_global_norm(_take(clip_body, f"{where}['clip_conf']['clip_by_global_norm']",
                                    clip_norm=_REQUIRED)["clip_norm"])
    at = f"{where}[{kind!r}]"
    inner: optimizers.Optimizer
    if kind == "naive_conf":
        _take(body, at)
        inner = optimizers.SGD(sched, momentum=0.0, grad_clipping=clip)
    elif kind == "momentum_conf":
        inner = optimizers.SGD(sched, momentum=_take(body, at, beta=0.9)["beta"], grad_clipping=clip)
    elif kind == "rmsprop_conf":
        c = _take(body, at, decay_rate=0.99, epsilon=1e-8, centered=False)
        inner = optimizers.RMSProp(sched, c["decay_rate"], c["epsilon"], c["centered"], grad_clipping=clip)
    elif kind == "adam_conf":
        c = _take(body, at, beta1=0.9, beta2=0.999, epsilon=1e-8, do_bias_correction=False)
        inner = optimizers.Adam(sched, c["beta1"], c["beta2"], c["epsilon"], c["do_bias_correction"],
                                grad_clipping=clip)
    elif kind == "lazy_adam_conf":  # legacy LazyAdamModelUpdateConf: always bias-corrected, no switch
        c = _take(body, at, beta1=0.9, beta2=0.999, epsilon=1e-8)
        inner = optimizers.LazyAdam(sched, c["beta1"], c["beta2"], c["epsilon"], grad_clipping=clip)
    elif kind == "lars_conf":
        c = _take(body, at, momentum_beta=0.9, epsilon=1e-9, lars_coefficient=0.0001)
        inner = optimizers.LARS(sched, c["momentum_beta"], c["epsilon"], c["lars_coefficient"], grad_clipping=clip)
    else:
        c = _take(body, at, beta1=0.9, beta2=0.999, epsilon=1e-6)
        inner = optimizers.LAMB(sched, c["beta1"], c["beta2"], c["epsilon"], grad_clipping=clip)
    if conf.get("weight_decay_conf") is not None:
        c = _take(conf["weight_decay_conf"], f"{where}['weight_decay_conf']", weight_decay_rate=_REQUIRED,
                  includes=None, excludes=None)
        inner.weight_decay = float(c["weight_decay_rate"])
        for key in ("includes", "excludes"):
            if c[key] is not None:
                patterns = _take(c[key], f"{where}['weight_decay_conf'][{key!r}]", pattern=_REQUIRED)["pattern"]
                setattr(inner, f"weight_decay_{key}", optimizers._patterns(patterns, f"{where}: {key}"))
    return LegacyOptimizer(inner, secondary, float(train.get("weight_l2") or 0.0), float(train.get("bias_l2") or 0.0))


__all__ = ["LegacyOptimizer", "optimizer_from_train_config"]
