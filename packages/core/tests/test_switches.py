"""Every FLOWJOB_* switch is declared once in flowjob_core.switches and read when used."""
from __future__ import annotations

import dataclasses
import pathlib
import re

import pytest

from flowjob_core.errors import ConfigError
from flowjob_core.switches import Switches, current

REPO = pathlib.Path(__file__).resolve().parents[3]


def test_defaults_when_unset_or_empty() -> None:
    assert Switches.from_environ({}) == Switches()
    assert Switches.from_environ({"FLOWJOB_FUSION": "", "FLOWJOB_CONV_ALGORITHM": " "}) == Switches()
    assert Switches().fusion and not Switches().malloc_tuning  # allocator tuning is opt-in


@pytest.mark.parametrize("text, value", [("1", True), ("on", True), ("Yes", True), ("0", False), ("off", False),
                                         ("FALSE", False)])
def test_booleans(text: str, value: bool) -> None:
    assert Switches.from_environ({"FLOWJOB_FUSION": text}).fusion is value


def test_lists_and_choices() -> None:
    s = Switches.from_environ({"FLOWJOB_PLUGINS": " ops, optim ,", "FLOWJOB_CONV_ALGORITHM": "Winograd"})
    assert s.plugins == ("ops", "optim") and s.conv_algorithm == "winograd"


@pytest.mark.parametrize("variable, text", [("FLOWJOB_FUSION", "maybe"), ("FLOWJOB_CONV_ALGORITHM", "fft"),
                                            ("FLOWJOB_MALLOC_TUNING", "2")])
def test_a_value_not_understood_names_the_variable(variable: str, text: str) -> None:
    with pytest.raises(ConfigError, match=variable):
        Switches.from_environ({variable: text})


def test_read_afresh_from_the_process_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLOWJOB_FUSION", "0")
    assert current().fusion is False
    monkeypatch.delenv("FLOWJOB_FUSION")
    assert current().fusion is True


def test_describe_lists_every_switch_with_its_value() -> None:
    rows = Switches.from_environ({"FLOWJOB_BLOCKED_PLUGINS": "a,b"}).describe()
    assert [r[0] for r in rows] == [f.metadata["env"] for f in dataclasses.fields(Switches)]
    assert ("FLOWJOB_BLOCKED_PLUGINS", "a,b") in [r[:2] for r in rows]
    assert all(doc for _, _, doc in rows)


def test_no_other_flowjob_variable_is_read_anywhere() -> None:
    declared = {f.metadata["env"] for f in dataclasses.fields(Switches)}
    sources = [p for p in (REPO / "packages").glob("*/src/**/*.py")]
    used = {m for p in sources for m in re.findall(r"FLOWJOB_[A-Z_]+[A-Z]", p.read_text())}
    assert used - declared == set(), f"FLOWJOB_* names used in sources but not declared: {used - declared}"


def test_only_the_switches_module_reads_flowjob_variables_from_the_environment() -> None:
    # flowjob-data does not depend on core: it reads its one switch itself (declared here too, for `info`)
    allowed = {"switches.py", "sources.py"}
    offenders = [str(p) for p in (REPO / "packages").glob("*/src/**/*.py")
                 if p.name not in allowed and re.search(r"environ(\.get)?[\[(]\s*[\"']FLOWJOB_", p.read_text())]
    assert offenders == []
