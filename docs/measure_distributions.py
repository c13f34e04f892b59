"""Measure what each flowjob distribution costs: wheel size, installed size and import time.

Run from the repository root in an environment with every package installed (the dev venv)::

    python docs/measure_distributions.py

It builds each wheel offline (``pip wheel --no-build-isolation``, so ``hatchling`` must be
installed), sums the files a wheel installs, and times ``import <module>`` in fresh interpreters
with ``-X importtime`` (the module's cumulative time, which includes what it imports: numpy for
all of them), median of seven runs. The table in docs/custom-distribution.md is its output.
"""
from __future__ import annotations

import re
import statistics
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {  # folder -> import name
    "packages/core": "flowjob_core", "packages/ops": "flowjob_ops", "packages/typing": "flowjob_typing",
    "packages/watch": "flowjob_watch", "packages/optim": "flowjob_optim", "packages/data": "flowjob_data",
    "kernels": "flowjob_kernels", "packages/gpu": "flowjob_gpu", "packages/oneflow": "oneflow",
}
RUNS = 7


def import_ms(module: str, then: str = "") -> float:
    """Median cumulative ``-X importtime`` of ``module`` in ms (plus ``then``'s wall time if given)."""
    times = []
    for _ in range(RUNS):
        code = f"import time, {module}\nt = time.perf_counter()\n{then}\nprint('THEN', time.perf_counter() - t)"
        done = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True,
                              check=True)
        last = [line for line in done.stderr.splitlines() if re.search(rf"\|\s*{re.escape(module)}$", line)]
        cumulative_us = int(last[-1].split("|")[1])
        then_s = float(done.stdout.split("THEN", 1)[1])
        times.append(cumulative_us / 1000 + (then_s * 1000 if then else 0.0))
    return statistics.median(times)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                        "--no-index", "-w", tmp, *(str(ROOT / p) for p in PACKAGES)], check=True)
        wheels = {w.name.split("-")[0].replace("_", "-"): w for w in Path(tmp).glob("*.whl")}
        print("| distribution | import | wheel | installed | import time |")
        print("|---|---|---:|---:|---:|")
        for folder, module in PACKAGES.items():
            name = Path(folder).name
            dist = "flowjob" if name == "oneflow" else f"flowjob-{name}"
            wheel = wheels[dist]
            installed = sum(i.file_size for i in zipfile.ZipFile(wheel).infolist())
            print(f"| {dist} | `{module}` | {wheel.stat().st_size / 1024:.0f} KiB | {installed / 1024:.0f} KiB "
                  f"| {import_ms(module):.0f} ms |")
    print(f"| numpy (every package needs it) | `numpy` | | | {import_ms('numpy'):.0f} ms |")
    session = import_ms("flowjob_core", "flowjob_core.Session().close()")
    print(f"\nimport flowjob_core + first Session() (loads every installed plugin): {session:.0f} ms")


if __name__ == "__main__":
    main()
