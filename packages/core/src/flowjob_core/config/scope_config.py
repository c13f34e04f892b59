"""Legacy v0.4's scope attributes: ``flow.experimental.scope.config(name=value, ...)`` around ops.

Legacy registered each attribute with a default (``REGISTER_SCOPE_CONFIG_DEF``); an op traced inside the
``with`` block carried the values in its scope, and passes read them per op. Here the values set are kept in
``Node.scope`` and :func:`scope_value` answers with the default for the others:

- ``quantization_aware_training`` (default True): read by the quantization-aware training pass
  (``function_config.enable_qat``); False leaves the ops inside unquantized;
- ``ssp_num_stages``, ``ssp_stage_id`` (default -1): read by the stale-synchronous pass
  (``function_config.enable_ssp``) on a trainable variable's node;
- ``checkpointing`` (default False): legacy recomputed such ops' activations in the backward pass to save
  memory, which changes no value; recorded, no effect here;
- ``pipeline_stage_id_hint`` (default 0): the pipeline stage of the ops inside, for placements over several
  devices; recorded, no effect on one process.
"""
from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Callable

from flowjob_core.config.options import UnknownOptionError, closest, is_bool, is_int, record
from flowjob_core.errors import ConfigError
from flowjob_core.ir.job import Node
from flowjob_core.trace import scope

__all__ = ["SCOPE_ATTRIBUTES", "ScopeAttribute", "config", "scope_value"]

WHERE = "flow.experimental.scope.config"


@dataclass(frozen=True)
class ScopeAttribute:
    default: Any
    check: Callable[[Any], bool]
    expected: str
    no_effect: str = ""  # recorded only: what it tuned in legacy


SCOPE_ATTRIBUTES: dict[str, ScopeAttribute] = {
    "quantization_aware_training": ScopeAttribute(True, is_bool, "a bool"),
    "ssp_num_stages": ScopeAttribute(-1, is_int, "an int"),
    "ssp_stage_id": ScopeAttribute(-1, is_int, "an int"),
    "checkpointing": ScopeAttribute(False, is_bool, "a bool",
                                    "legacy's recomputation of activations in the backward pass (memory)"),
    "pipeline_stage_id_hint": ScopeAttribute(0, is_int, "an int",
                                             "legacy's pipeline stages over several devices"),
}


def config(**values: Any) -> AbstractContextManager[None]:
    """``flow.experimental.scope.config(**attributes)``: ops traced inside carry these scope attributes."""
    for name, value in values.items():
        attribute = SCOPE_ATTRIBUTES.get(name)
        if attribute is None:
            raise UnknownOptionError(f"{WHERE}: unknown scope attribute {name!r}; "
                                     f"{closest(name, list(SCOPE_ATTRIBUTES))}")
        if not attribute.check(value):
            raise ConfigError(f"{WHERE}: {name} expects {attribute.expected}, got {value!r}")
        if attribute.no_effect:
            record(f"{WHERE}.{name}", value, attribute.no_effect)
    return scope.attributes(values)


def scope_value(node: Node, name: str) -> Any:
    """The scope attribute ``name`` of ``node``: the value set around it, else legacy's default."""
    for key, value in node.scope:
        if key == name:
            return value
    return SCOPE_ATTRIBUTES[name].default
