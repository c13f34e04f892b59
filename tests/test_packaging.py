"""Every distribution is publishable: one version, consistent pins, and a wheel built from its own sdist.

The builds run offline (``python -m build --no-isolation``): the test environment provides
``build`` and ``hatchling`` (the ``all`` tox env installs them), so nothing is downloaded and a
build that reaches outside its own folder (as ``../../kernels`` once did) fails here.
"""
from __future__ import annotations

import email.parser
import importlib
import importlib.metadata
import importlib.util
import re
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
# the packages, the kernel sources (kernels/, beside packages/) and the example plugins
PROJECT_DIRS = sorted([*ROOT.glob("packages/*/pyproject.toml"), ROOT / "kernels" / "pyproject.toml",
                      *ROOT.glob("examples/plugins/*/pyproject.toml")])
VERSION_LINE = re.compile(r'^__version__\s*=\s*["\']([^"\']+)["\']', re.MULTILINE)
CLASSIFIERS = {
    "Development Status :: 3 - Alpha",
    "Operating System :: OS Independent",
    "Programming Language :: Python :: 3.11",
    "Topic :: Scientific/Engineering :: Artificial Intelligence",
}
URL_KEYS = {"Homepage", "Repository", "Documentation", "Issues"}


@dataclass(frozen=True)
class Project:
    folder: Path
    meta: dict
    hatch: dict

    @property
    def name(self) -> str:
        return canonicalize_name(self.meta["name"])

    @property
    def import_name(self) -> str:
        (src,) = self.hatch["build"]["targets"]["wheel"]["packages"]
        return Path(src).name

    @property
    def version_file(self) -> Path:
        return self.folder / self.hatch["version"]["path"]

    @property
    def version(self) -> str:
        """The version as hatch reads it: the ``__version__`` line of the version file."""
        found = VERSION_LINE.search(self.version_file.read_text())
        assert found, f"{self.name}: no __version__ line in {self.version_file}"
        return found.group(1)

    def requirements(self) -> list[Requirement]:
        texts = list(self.meta.get("dependencies", []))
        for extra in self.meta.get("optional-dependencies", {}).values():
            texts.extend(extra)
        return [Requirement(text) for text in texts]


def _load(pyproject: Path) -> Project:
    data = tomllib.loads(pyproject.read_text())
    return Project(pyproject.parent, data["project"], data["tool"]["hatch"])


PROJECTS = [_load(p) for p in PROJECT_DIRS]
BY_NAME = {p.name: p for p in PROJECTS}


def test_every_distribution_is_found():
    assert {"flowjob", "flowjob-core", "flowjob-ops", "flowjob-typing", "flowjob-watch", "flowjob-optim",
            "flowjob-data", "flowjob-gpu", "flowjob-kernels", "flowjob-mpi", "flowjob-ofrecord",
            "flowjob-serving", "flowjob-swish"} <= set(BY_NAME)


@pytest.mark.parametrize("project", PROJECTS, ids=lambda p: p.name)
def test_the_version_is_written_once(project):
    assert "version" not in project.meta and project.meta.get("dynamic") == ["version"], (
        f"{project.name}: the version must come from __version__ ([tool.hatch.version]), not pyproject")
    assert project.version_file == project.folder / "src" / project.import_name / "__init__.py"
    module = importlib.import_module(project.import_name)
    assert module.__version__ == project.version
    installed = importlib.metadata.version(project.name)
    assert installed == project.version, (
        f"{project.name}: installed metadata says {installed}, __version__ says {project.version}; reinstall it")


@pytest.mark.parametrize("project", PROJECTS, ids=lambda p: p.name)
def test_pins_between_distributions_agree(project):
    for req in project.requirements():
        target = BY_NAME.get(canonicalize_name(req.name))
        if target is None:
            continue
        assert req.specifier.contains(target.version), f"{project.name}: {req} excludes {target.version}"
        if ROOT / "examples" not in project.folder.parents:  # the repository's own releases move in lockstep
            assert str(req.specifier) == f"=={target.version}", f"{project.name}: {req} is not an exact pin"


@pytest.mark.parametrize("project", PROJECTS, ids=lambda p: p.name)
def test_metadata_is_complete(project):
    meta = project.meta
    assert meta["license"] == "Apache-2.0" and meta["license-files"] == ["LICENSE"]
    assert (project.folder / "LICENSE").read_bytes() == (ROOT / "LICENSE").read_bytes()
    assert (project.folder / "src" / project.import_name / "py.typed").is_file()
    assert meta["authors"] == [{"name": "The flowjob developers"}]
    assert meta["requires-python"] == ">=3.11"
    assert CLASSIFIERS <= set(meta["classifiers"])
    assert not any(c.startswith("License ::") for c in meta["classifiers"]), "PEP 639: the SPDX license only"
    assert meta["keywords"]
    assert set(meta["urls"]) == URL_KEYS
    assert all(url.startswith("https://github.com/flowjob/flowjob") for url in meta["urls"].values())
    numpy = [r for r in project.requirements() if r.name == "numpy"]
    assert all(str(r.specifier) == ">=1.26" for r in numpy), f"{project.name}: numpy pins {numpy}"


def _build(kind: str, source: Path, outdir: Path) -> Path:
    done = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", f"--{kind}", "--outdir", str(outdir), str(source)],
        capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"building the {kind} of {source} failed:\n{done.stdout}\n{done.stderr}"
    (artifact,) = outdir.iterdir()
    return artifact


def _module_files(project: Project) -> set[str]:
    """Every file of the import package in the source tree, as wheel paths (bytecode left out)."""
    top = project.folder / "src"
    return {path.relative_to(top).as_posix() for path in (top / project.import_name).rglob("*")
            if path.is_file() and "__pycache__" not in path.parts}


@pytest.mark.packaging
@pytest.mark.parametrize("project", PROJECTS, ids=lambda p: p.name)
def test_a_wheel_builds_from_the_sdist(project, tmp_path):
    for tool in ("build", "hatchling"):
        assert importlib.util.find_spec(tool), f"the packaging tests need {tool!r} installed (tox env all has it)"
    sdist = _build("sdist", project.folder, tmp_path / "sdist")
    with tarfile.open(sdist) as archive:
        archive.extractall(tmp_path / "unpacked", filter="data")
    (unpacked,) = (tmp_path / "unpacked").iterdir()
    wheel = _build("wheel", unpacked, tmp_path / "wheel")

    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        dist_info = f"{project.meta['name'].replace('-', '_')}-{project.version}.dist-info"
        metadata = email.parser.Parser().parsestr(archive.read(f"{dist_info}/METADATA").decode())
        license_text = archive.read(f"{dist_info}/licenses/LICENSE")
    missing = _module_files(project) - names
    assert not missing, f"{wheel.name} lacks {sorted(missing)}"
    assert f"{project.import_name}/py.typed" in names
    assert license_text == (ROOT / "LICENSE").read_bytes()
    if project.name == "flowjob-kernels":  # the CUDA sources are its package data
        assert {n for n in names if n.endswith(".cu")} >= {"flowjob_kernels/cuda/elementwise.cu"}
    assert metadata["Version"] == project.version
    assert metadata["License-Expression"] == "Apache-2.0"
    pins = [Requirement(text) for text in metadata.get_all("Requires-Dist", [])]
    for req in pins:
        target = BY_NAME.get(canonicalize_name(req.name))
        if target is not None:
            assert req.specifier.contains(target.version), f"{wheel.name}: {req} excludes {target.version}"
