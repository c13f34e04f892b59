"""Checked legacy option setters shared by ``flow.function_config()`` and ``flow.config.*``.

Every legacy option is declared once as an :class:`Option` saying what happens to it here:

- ``applied``: flowjob reads it (a placement, the version-0.1 ``train.*`` optimizer, ...);
- ``recorded``: it only tuned CUDA or the legacy runtime (cuDNN algorithms, NCCL fusion, memory
  policies); the value is checked, kept where :func:`recorded_options` and ``python -m oneflow
  info`` show it, logged at debug level to ``flowjob.config``, and changes nothing;
- ``unsupported``: it would change results and is not implemented; values for which
  ``Option.supported`` is true (the legacy default) are recorded, any other is a ``ConfigError``,
  never silently ignored.

A misspelt name is an :class:`UnknownOptionError` naming the closest real one; it is also an
``AttributeError``, so a program's ``hasattr(cfg.train, "...")`` feature test still answers ``False``.
"""
from __future__ import annotations

import copy
import difflib
import logging
import threading
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Self

from flowjob_core.errors import ConfigError
from flowjob_core.ir.job import ConfigSnapshot

logger = logging.getLogger("flowjob.config")

_REQUIRED = object()  # an option without a default must be called with a value


class UnknownOptionError(ConfigError, AttributeError):
    """An option name that legacy OneFlow never had (usually a typo)."""


@dataclass(frozen=True)
class Option:
    check: Callable[[Any], bool]
    expected: str
    default: Any = _REQUIRED  # the value of a bare call, ``cfg.enable_inplace()``
    effect: str = "applied"  # applied | recorded | unsupported
    why: str = ""  # recorded: what it tuned; unsupported: what flowjob lacks
    supported: Callable[[Any], bool] = lambda value: False  # unsupported: values that change nothing

    def __post_init__(self) -> None:
        if self.effect not in ("applied", "recorded", "unsupported"):
            raise ValueError(f"unknown option effect {self.effect!r}")


def is_bool(v: Any) -> bool:
    return isinstance(v, bool)


def is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def is_str(v: Any) -> bool:
    return isinstance(v, str)


def is_dict(v: Any) -> bool:
    return isinstance(v, dict)


BOOL = (is_bool, "a bool")
INT = (is_int, "an int")
NUMBER = (is_number, "a number")


def flag(why: str, default: bool = True, effect: str = "recorded") -> Option:
    """A bool switch of CUDA or the legacy runtime (bare call: ``default``)."""
    return Option(is_bool, "a bool", default, effect, why)


def count(why: str) -> Option:
    """An int setting of CUDA or the legacy runtime (no bare call)."""
    return Option(is_int, "an int", _REQUIRED, "recorded", why)


# every recorded option set in this process, by dotted name ("function_config.enable_cudnn")
_recorded: dict[str, Any] = {}
_recorded_lock = threading.Lock()


def recorded_options() -> dict[str, Any]:
    """The no-effect options this process set, by dotted name, last value each (``python -m oneflow info``)."""
    with _recorded_lock:
        return dict(_recorded)


def record(path: str, value: Any, why: str) -> None:
    with _recorded_lock:
        _recorded[path] = value
    logger.debug("%s(%r) recorded, no effect here: it tunes %s", path, value, why)


def closest(name: str, known: list[str]) -> str:
    """``did you mean 'x'?`` for a misspelt name, else the list of known names."""
    match = difflib.get_close_matches(name, known, n=1)
    if match:
        return f"did you mean {match[0]!r}?"
    return f"known: {', '.join(sorted(known))}"


def check_value(path: str, option: Option, value: Any) -> Any:
    """The checked value (the default for a bare call); an error names the option and the expected type."""
    if value is _REQUIRED:
        raise ConfigError(f"{path} expects {option.expected}: call it with a value")
    if value is None or not option.check(value):
        raise ConfigError(f"{path} expects {option.expected}, got {value!r}")
    if option.effect == "unsupported" and not option.supported(value):
        raise ConfigError(f"{path}({value!r}) is not supported yet: {option.why}")
    if option.effect != "applied":
        # recorded, or an unsupported option left at its neutral value
        record(path, value, option.why or "nothing flowjob computes")
    return value


class OptionSet:
    """A namespace of setters called like functions (``cfg.enable_inplace(True)``), each checked.

    Subclasses declare ``_path`` (how errors and the record name it), ``_options`` and ``_children``
    (nested namespaces such as ``train``). Values are kept in ``values``, nested ones in the child.
    """

    _path: ClassVar[str] = "option"
    _what: ClassVar[str] = "option"
    _options: ClassVar[dict[str, Option]] = {}
    _children: ClassVar[dict[str, type["OptionSet"]]] = {}

    def __init__(self) -> None:
        object.__setattr__(self, "values", {})
        for name, child in type(self)._children.items():
            object.__setattr__(self, name, child())

    def _known(self) -> list[str]:
        return [*type(self)._options, *type(self)._children]

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        options = type(self)._options
        if name not in options:
            raise UnknownOptionError(f"unknown {self._what} {name!r}; "
                                     f"{closest(name, self._known())}")
        option = options[name]

        def setter(value: Any = option.default) -> None:
            self._store(name, check_value(f"{self._path}.{name}", option, value))

        setter.__name__ = name
        return setter

    def __setattr__(self, name: str, value: Any) -> None:
        getattr(self, name)(value)

    def _store(self, name: str, value: Any) -> None:
        self.values[name] = value

    def get(self, name: str, default: Any = None) -> Any:
        return self.values.get(name, default)

    @property
    def is_set(self) -> bool:
        """Whether an option of this set was set (``TrainConfig``: a training one)."""
        return bool(self.values)

    def snapshot(self) -> ConfigSnapshot:
        """These settings as a traced job keeps them: frozen, the values copied."""
        options = tuple(sorted(((k, copy.deepcopy(v)) for k, v in self.values.items()), key=lambda kv: kv[0]))
        sections = tuple((name, getattr(self, name).snapshot()) for name in sorted(type(self)._children))
        return ConfigSnapshot(options, sections, self.is_set)

    def recorded_options(self) -> dict[str, Any]:
        """The options set on this object that change nothing here (dotted names, nested ones too)."""
        out = {f"{self._path}.{k}": v for k, v in self.values.items() if type(self)._options[k].effect != "applied"}
        for name in type(self)._children:
            out.update(getattr(self, name).recorded_options())
        return out

    def __deepcopy__(self, memo: dict) -> Self:
        clone = type(self)()
        clone.values.update(copy.deepcopy(self.values, memo))
        for name in type(self)._children:
            object.__setattr__(clone, name, copy.deepcopy(getattr(self, name), memo))
        return clone

    def __eq__(self, other: object) -> bool:
        # by value, so two copies of a job (which holds its function's config) compare equal
        return type(self) is type(other) and vars(self) == vars(other)

    __hash__ = None  # type: ignore[assignment]  # mutable: setters change it
