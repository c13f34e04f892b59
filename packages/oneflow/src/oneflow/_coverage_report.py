"""How much of legacy OneFlow's API this build serves: ``docs/compatibility.md`` and
``python -m oneflow info --api NAME``.

Three sources, nothing listed twice:

- ``legacy_api.txt`` (next to this module): every public ``flow.*`` name legacy v0.3/v0.4 exported;
- the face itself: a name is served when ``import oneflow`` resolves it (top-level names are looked
  up in the face's name index, which imports nothing; deeper ones import their face submodule);
- the option declarations of ``flowjob_core`` (``FunctionConfig`` and its children, the
  ``flow.config`` option sets): each says whether it is applied, recorded with no effect, or refused.

Only refusals that are not option declarations need words here (:data:`REFUSED`).
"""
from __future__ import annotations

import difflib
import importlib
import inspect
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Iterator

from flowjob_core import MissingPackageError
from flowjob_core.config.function_config import FunctionConfig
from flowjob_core.config.options import Option, OptionSet
from flowjob_core.api.flow_config_options import CollectiveBoxing, Cudnn, TopLevel

LEGACY_FILE = Path(__file__).with_name("legacy_api.txt")
PAGE_COMMAND = "python -m oneflow compat --write docs/compatibility.md"

SUPPORTED, NO_EFFECT, REFUSED_STATUS, MISSING = "supported", "no effect", "refused", "missing"
STATUSES = (SUPPORTED, NO_EFFECT, REFUSED_STATUS, MISSING)

# names the face provides only to refuse them with a reason (option records carry their own)
REFUSED: dict[str, str] = {
    "flow.summary.Graph": "legacy wrote OneFlow's own structure-graph JSON, which TensorBoard does not read",
    "flow.summary.Projector": "legacy wrote OneFlow's own projector records, which TensorBoard does not read",
    "flow.tensorrt.write_int8_calibration": "flowjob has no TensorRT backend (jobs run on numpy or CuPy)",
    "flow.tensorrt.cache_int8_calibration": "flowjob has no TensorRT backend (jobs run on numpy or CuPy)",
    "flow.sysconfig.get_include": "flowjob has no C++ headers: ops are Python plugins (see load_library)",
    "flow.sysconfig.get_compile_flags": "flowjob has no C++ headers: ops are Python plugins (see load_library)",
    "flow.sysconfig.get_link_flags": "flowjob has no C++ library: ops are Python plugins (see load_library)",
    "flow.deprecated.init_worker": "it started OneFlow workers over ssh; ranks start with python -m oneflow launch",
    "flow.deprecated.delete_worker": "it stopped OneFlow workers over ssh; MPI ranks end with the program",
    "flow.deprecated.delete_worker_by_bootstrap": "it stopped OneFlow workers over ssh; MPI ranks end with the program",
    "flow.deprecated.delete_worker_of_multi_process": ("it stopped OneFlow workers over ssh; MPI ranks end with the "
                                                       "program"),
}

SESSION_OPTION_SETS: tuple[type[OptionSet], ...] = (TopLevel, CollectiveBoxing, Cudnn)

# the ``supported`` predicate an Option has when nothing was given: no value is accepted
_REFUSE_ALL = next(f.default for f in fields(Option) if f.name == "supported")


@dataclass(frozen=True)
class Entry:
    """One legacy name or option and what happens to it here."""

    name: str  # "flow.math.top_k", "function_config.train.primary_lr", "flow.config.use_rdma"
    status: str  # one of STATUSES
    note: str = ""  # where it comes from, what it tuned, why it is refused


def legacy_names(path: Path = LEGACY_FILE) -> list[str]:
    """The ``flow.*`` names of ``legacy_api.txt``, in file order (comments and blank lines skipped)."""
    names = []
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            names.append(line)
    return names


def walk_options(option_set: type[OptionSet]) -> Iterator[tuple[str, Option]]:
    """``(dotted name, Option)`` for every option of the set and of its children."""
    for name, option in option_set._options.items():
        yield f"{option_set._path}.{name}", option
    for child in option_set._children.values():
        yield from walk_options(child)


def option_entry(name: str, option: Option) -> Entry:
    if option.effect == "applied":
        return Entry(name, SUPPORTED, "read by flowjob")
    if option.effect == "recorded":
        return Entry(name, NO_EFFECT, f"checked and recorded; it tuned {option.why}")
    accepted = "" if option.supported is _REFUSE_ALL else " (its legacy default is accepted)"
    return Entry(name, REFUSED_STATUS, f"{option.why}{accepted}")


def function_config_entries() -> list[Entry]:
    return [option_entry(name, option) for name, option in walk_options(FunctionConfig)]


def session_options() -> dict[str, Option]:
    """``flow.config`` options by dotted name (``flow.config.cudnn.buf_limit_mbyte``)."""
    return {name: option for option_set in SESSION_OPTION_SETS for name, option in walk_options(option_set)}


def _provider(value: Any) -> str:
    if inspect.ismodule(value):
        return f"from {value.__name__}"
    module = getattr(value, "__module__", None)
    return f"from {module}" if isinstance(module, str) else ""  # a value such as a dtype: no module of its own


def face_entry(name: str) -> Entry:
    """Resolve ``flow.a.b`` on the face: top-level names from its index (nothing imported), deeper
    ones through their submodule or object, as a program's attribute access would."""
    import oneflow

    head, *rest = name.split(".")[1:]
    if head not in dir(oneflow):
        return Entry(name, MISSING)
    if not rest:
        index = oneflow._NAMESPACE.index()
        if head in index:
            return Entry(name, SUPPORTED, f"from {index[head][0].module}")
        if head in oneflow._NAMESPACE.submodules():
            return Entry(name, SUPPORTED, f"from oneflow.{head}")
        if head in vars(oneflow):  # core's explicit re-exports, already imported
            return Entry(name, SUPPORTED, _provider(vars(oneflow)[head]) or "from flowjob_core")
    try:
        value = getattr(oneflow, head)
        for part in rest:
            value = getattr(value, part)
    except MissingPackageError as exc:
        return Entry(name, MISSING, str(exc).split(": ")[-1])  # the pip install line
    except AttributeError:
        return Entry(name, MISSING)
    return Entry(name, SUPPORTED, _provider(value))


def name_entry(name: str, options: dict[str, Option] | None = None) -> Entry:
    """The status of one ``flow.*`` name: a declared option, a reasoned refusal, else the face."""
    options = session_options() if options is None else options
    if name in options:
        return option_entry(name, options[name])
    if name in REFUSED:
        return Entry(name, REFUSED_STATUS, REFUSED[name])
    return face_entry(name)


def legacy_entries() -> list[Entry]:
    options = session_options()
    entries = [name_entry(name, options) for name in sorted(set(legacy_names()))]
    # options legacy set through an object rather than an export (flow.config.cudnn.*) are listed too
    listed = {e.name for e in entries}
    entries += [option_entry(name, option) for name, option in options.items() if name not in listed]
    return sorted(entries, key=lambda e: e.name)


def _table(entries: list[Entry]) -> list[str]:
    lines = ["| name | status | note |", "|---|---|---|"]
    for e in entries:
        note = e.note.replace("|", "\\|")
        lines.append(f"| `{e.name}` | {e.status} | {note} |")
    return lines


def _counts(entries: list[Entry]) -> str:
    return " | ".join(str(sum(e.status == s for e in entries)) for s in STATUSES)


INTRO = f"""\
# Compatibility with legacy OneFlow (v0.3/v0.4)

Generated by `{PAGE_COMMAND}`; do not edit by hand (a test fails when this page is stale).
`python -m oneflow info --api flow.math.top_k` answers for one name.

The names are every public `flow.*` name legacy v0.3.4 and v0.4.0 exported
(`packages/oneflow/src/oneflow/legacy_api.txt`, which says how it was built and what it leaves out:
`experimental.*`, v0.4's eager-only module surface and a few runtime internals), then every
`function_config` and `flow.config` option as `flowjob_core` declares it. Statuses:

- **supported**: `import oneflow as flow` resolves the name here, or flowjob reads the option;
- **no effect**: the option is checked and recorded (`python -m oneflow info` lists the values set)
  and changes nothing: it tuned CUDA, NCCL or the legacy runtime;
- **refused**: a clear `ConfigError` says why (options: unless left at the legacy default);
- **missing**: not provided yet (an `AttributeError`, or the `pip install` line of the distribution
  that provides it).
"""


def page() -> str:
    """The whole ``docs/compatibility.md``."""
    names = [e for e in legacy_entries() if not e.name.startswith("flow.config.")]
    config = [e for e in legacy_entries() if e.name.startswith("flow.config.")]
    function_config = sorted(function_config_entries(), key=lambda e: e.name)
    lines = [INTRO, "| | " + " | ".join(STATUSES) + " |", "|---|" + "---|" * len(STATUSES)]
    lines += [f"| `flow.*` names | {_counts(names)} |", f"| `flow.config` | {_counts(config)} |",
              f"| `function_config` options | {_counts(function_config)} |", ""]
    for title, entries in (("`flow.*` names", names), ("`flow.config`", config),
                           ("`function_config` options", function_config)):
        lines += [f"## {title}", "", *_table(entries), ""]
    return "\n".join(lines)


def _normalize(query: str) -> str:
    """``oneflow.math.top_k``, ``math.top_k`` and ``flow.math.top_k`` name the same thing;
    ``function_config.*`` (also ``flow.function_config().x``) names an option."""
    query = query.strip().replace("function_config().", "function_config.")
    for prefix in ("oneflow.", "flow."):
        if query.startswith(prefix):
            query = query[len(prefix):]
            break
    if query.startswith("function_config."):
        return query
    return f"flow.{query}"


def describe(query: str) -> tuple[int, list[str]]:
    """``python -m oneflow info --api NAME``: exit status and lines to print."""
    name = _normalize(query)
    legacy = set(legacy_names())
    options = session_options()
    if name.startswith("function_config."):
        declared = dict(walk_options(FunctionConfig))
        if name not in declared:
            return 1, [f"{name}: not a function_config option{_suggest(name, declared)}"]
        entry = option_entry(name, declared[name])
        return 0, [f"{name}: {entry.status} ({entry.note})", "  legacy v0.3/v0.4 option (declared by flowjob_core)"]
    entry = name_entry(name, options)
    known = name in legacy or name in options
    origin = "legacy v0.3/v0.4 name" if name in legacy else "legacy v0.3/v0.4 option (declared by flowjob_core)"
    if entry.status == MISSING and not known:
        return 1, [f"{name}: not a legacy OneFlow name and not provided here"
                   f"{_suggest(name, [*legacy, *options])}"]
    lines = [f"{name}: {entry.status}" + (f" ({entry.note})" if entry.note else "")]
    lines.append(f"  {origin}" if known else "  a flowjob name (legacy OneFlow had no such name)")
    signature = _signature(name) if entry.status == SUPPORTED and name not in options else None
    if signature:
        lines.append(f"  {signature}")
    return 0, lines


def _suggest(name: str, known: Any) -> str:
    match = difflib.get_close_matches(name, list(known), n=1)
    return f"; did you mean {match[0]}?" if match else ""


def _signature(name: str) -> str | None:
    value: Any = importlib.import_module("oneflow")
    for part in name.split(".")[1:]:
        value = getattr(value, part)
    if not callable(value) or inspect.ismodule(value):
        return None
    try:
        return f"{name.rsplit('.', 1)[-1]}{inspect.signature(value)}"
    except (TypeError, ValueError):  # builtins without a signature
        return None
