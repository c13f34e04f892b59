"""A fresh virtual environment holding only the flowjob distributions a test names, built offline.

The flowjob distributions (and a scaffolded plugin) are installed into it from their source
folders by pip (built into wheels, as from an index); their third-party dependencies (numpy, pluggy,
threadpoolctl, pytest, hypothesis, and hatchling to build) are not downloaded: the distributions of the test's
own interpreter are linked into one folder that the new environment reads through a ``.pth``
file. That folder holds nothing of flowjob, so the new environment sees exactly the flowjob
distributions installed into it (``python -m oneflow info`` lists those and no other).
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import venv
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

# what the new environment needs besides flowjob: the packages' runtime and test dependencies,
# and the build backend pip runs for the editable installs (--no-build-isolation: nothing fetched)
THIRD_PARTY = ("numpy", "pluggy", "threadpoolctl", "protobuf", "pytest", "hypothesis", "hatchling")


def _closure(names: tuple[str, ...]) -> list[metadata.Distribution]:
    """These distributions of the running interpreter and everything they require (no extras)."""
    seen: dict[str, metadata.Distribution] = {}
    todo = list(names)
    while todo:
        name = canonicalize_name(todo.pop())
        if name in seen or name.startswith("flowjob"):
            continue
        dist = metadata.distribution(name)
        seen[name] = dist
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return list(seen.values())


def _link_distributions(dists: list[metadata.Distribution], folder: Path) -> None:
    """Symlink each distribution's top-level entries (packages, modules, its .dist-info) into ``folder``."""
    folder.mkdir(parents=True)
    for dist in dists:
        root = Path(str(dist.locate_file("")))
        tops = {Path(str(f)).parts[0] for f in dist.files or [] if not str(f).startswith("..")}
        for top in tops:
            link = folder / top
            if not link.exists() and (root / top).exists():
                link.symlink_to(root / top)


class FreshVenv:
    """A venv at ``path`` (no pip of its own: the running pip installs into it with ``--python``)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        venv.EnvBuilder(with_pip=False).create(path)
        site = next((path / "lib").glob("python3*/site-packages"))
        deps = path / "third-party"
        _link_distributions(_closure(THIRD_PARTY), deps)
        (site / "_third_party.pth").write_text(f"{deps}\n")

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"

    def pip_install(self, *folders: Path, timeout: float = 300) -> None:
        """Install these project folders (built into wheels, as from an index), offline; then ``pip check``.

        Not editable: hatchling's editable wheels need ``editables``, which a test env need not have.
        """
        self._pip("install", "--no-index", "--no-deps", "--no-build-isolation", "--force-reinstall", "--quiet",
                  *map(str, folders), timeout=timeout)
        self._pip("check", timeout=60)

    def _pip(self, *args: str, timeout: float) -> None:
        done = subprocess.run([sys.executable, "-m", "pip", "--python", str(self.python),
                               "--disable-pip-version-check", *args],
                              capture_output=True, text=True, timeout=timeout)
        assert done.returncode == 0, f"pip {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"

    def run(self, *args: str, cwd: Path, extra_env: dict[str, str] | None = None,
            timeout: float = 300) -> subprocess.CompletedProcess:
        """Run this venv's python with ``args`` in ``cwd``, free of this process's flowjob, pytest and CI settings."""
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("FLOWJOB_", "PYTHON", "VIRTUAL_ENV", "HYPOTHESIS_", "PYTEST_", "__TOX", "CI"))}
        env.update(extra_env or {})
        env["PATH"] = f"{self.path / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        env["VIRTUAL_ENV"] = str(self.path)
        return subprocess.run([str(self.python), *args], cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=timeout)

    def flowjob_distributions(self, cwd: Path) -> dict[str, str]:
        """``python -m oneflow info``'s distribution lines, as {name: version} for the installed ones."""
        done = self.run("-m", "oneflow", "info", cwd=cwd)
        assert done.returncode == 0, done.stdout + done.stderr
        lines = done.stdout.split("distributions:\n", 1)[1].split("plugins:\n", 1)[0].splitlines()
        found = dict(re.split(r"\s+", line.strip(), maxsplit=1) for line in lines)
        return {name: version for name, version in found.items() if version != "not installed"}
