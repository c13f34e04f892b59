"""The typing package's plugin: registers its result kinds through ``flowjob_add_result_kinds``."""
from __future__ import annotations

from flowjob_core import hookimpl

from flowjob_typing.converters import match_converter
from flowjob_typing.params import match_default, match_param
from flowjob_typing.returns import match_return


@hookimpl
def flowjob_add_result_kinds(registry) -> None:  # type: ignore[no-untyped-def]
    registry.add_param_kind(match_param)
    registry.add_default_kind(match_default)
    registry.add_return_kind(match_return)
    registry.add_value_converter(match_converter)
