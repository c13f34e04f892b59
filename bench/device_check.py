"""The GPU device check: everything a few minutes on a lent GPU machine can tell, in the order of what it tells
per second, under one deadline. From the repository root:

    python bench/device_check.py --prepare     # here, with a package index: wheels into .whl/
    python bench/device_check.py [STEP...]     # there (bash bench/device_check.sh says the same)
    python bench/device_check.py --emulated    # anywhere: the same steps on the emulated CuPy (CI runs it)

``--prepare`` builds the project's wheels and downloads the wheels of what the tests import that the GPU machine's
image lacks (``EXTRA_WHEELS``, for Python 3.12; nvidia-cudnn-frontend, the ``flowjob-gpu[cudnn]`` extra, among
them) into ``.whl/``; the machine fetches nothing. There, the check installs those wheels (into a folder on
``PYTHONPATH``, skipping any distribution the image has, except ours and ``ALWAYS_INSTALLED``) and runs the
steps, each under its own limit trimmed to what is left of the deadline (``--deadline``, 420 s: the whole run
well inside 8 minutes; a step with under 10 s left is not started):

  environment  the GPU, driver, Python, numpy, CuPy, torch, ``python -m oneflow info`` on the GPU
  smoke        bench/device_smoke.py: CuPy, NVRTC (every hand-kernel family, the chain templates), one cuBLAS
               and one cuDNN call, one convolution with its gradients on cuDNN through flowjob_gpu's
               cudnn_convolution (not its im2col fallback), a recorded training step; it fails where one is
               missing, never skips
  facts        bench/cupy_facts.py: the CuPy behaviours the kernels rely on (device only)
  nccl         bench/nccl_boxing_check.py: flowjob-mpi's NCCL boxing collectives on a one-rank communicator,
               and a CUDA graph of them (one GPU: a world of one)
  bench        bench/gpu.py: flowjob, flowjob without graphs and torch (LeNet, MLP, ResNet-50 batch 32), with
               each flowjob step's recording, graphs, live pieces, peak memory over every pool and where its
               convolutions ran (cuDNN or im2col)
  gpu_tests    the gpu and kernels packages' tests with FLOWJOB_REQUIRE_GPU=1 (a missing device fails them)
  graphs       bench/graph_overhead.py: a recorded step's cost an op against launching every kernel
  profile      bench/profile_plan.py: where a ResNet-50 training step's device time goes, node by node
  accounting   bench/step_accounting.py: graphs, live pieces, host traffic per step per workload (emulated only)
  suite        the whole test suite with the GPU as every job's default device (SUITE_PATHS: a file of paths)

Each step's log is ``$OUT/<step>.log`` (``--out``; default ``$OUT`` or ./device-check) and ``$OUT/results.json``
is rewritten as each step ends (every step's status, seconds, limit, last line and failures; the benchmark's
runs), so a machine taken back mid-run leaves what had finished. The results block (each step, the benchmark
table, each failure, the facts) is printed last. Exit status 1 if a step failed or did not run.

``--emulated`` runs every step but the suite on flowjob-gpu's emulated CuPy with small sizes (its times mean
nothing): tox's gpu-emulation environment runs it, so a script error or a crash in a bench script is found on
every CPU run.
"""
from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Callable

ROOT = pathlib.Path(__file__).resolve().parent.parent
WHEELS = ROOT / ".whl"
SITE = pathlib.Path("/tmp/flowjob-site")
PROJECTS = ["packages/core", "packages/ops", "packages/typing", "packages/watch", "packages/optim", "packages/data",
            "packages/ofrecord", "packages/oneflow", "kernels", "packages/gpu", "packages/mpi"]
# what the tests import beyond the GPU machine's image (CuPy for CUDA 13, PyTorch, pytest with xdist and
# timeout, hypothesis, pluggy, numpy 2, cuDNN 9, NCCL, mpi4py, onnx, onnxruntime), with their own dependencies
EXTRA_WHEELS = ["threadpoolctl", "tqdm", "pooch", "platformdirs", "packaging", "requests", "idna", "urllib3",
                "certifi", "charset-normalizer", "tensorboardX", "protobuf", "Pillow", "tensorboard",
                "tensorboard-data-server", "absl-py", "markdown", "werkzeug", "MarkupSafe", "grpcio", "six",
                # the cudnn extra: convolutions on the image's cuDNN 9 (its own dependencies, cutlass-dsl and
                # tvm-ffi, serve other parts of the frontend; its graph API imports without them)
                "nvidia-cudnn-frontend>=1.32"]
# installed from .whl/ even where the image has a version: the one flowjob_gpu.cudnn_convolution is written to
ALWAYS_INSTALLED = {"nvidia_cudnn_frontend"}
DEVICE_PYTHON = "3.12"
DEVICE_PLATFORMS = ["manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64"]
DEADLINE = 420.0
LEAST = 10.0  # seconds a step needs left to start
ORDER = ["environment", "smoke", "facts", "nccl", "bench", "gpu_tests", "graphs", "profile", "accounting", "suite"]


@dataclass
class Step:
    name: str
    limit: float  # its own limit, seconds, before the deadline trims it
    command: list[str]
    env: dict[str, str] = field(default_factory=dict)


@dataclass
class Outcome:
    name: str
    status: str  # passed, failed, timed out, not run
    rc: int | None
    seconds: float
    limit: float
    last_line: str
    failures: list[str]
    log: str


# preparing ------------------------------------------------------------------------------------------------
def prepare() -> None:
    """Build the project's wheels and download the extra ones into .whl/ (replacing what was there)."""
    if WHEELS.exists():
        shutil.rmtree(WHEELS)
    WHEELS.mkdir()
    pip = [sys.executable, "-m", "pip"]
    subprocess.run([*pip, "wheel", "--quiet", "--no-deps", "--no-build-isolation", "--wheel-dir", str(WHEELS),
                    *(str(ROOT / p) for p in PROJECTS)], check=True)
    platforms = [arg for p in DEVICE_PLATFORMS for arg in ("--platform", p)]
    subprocess.run([*pip, "download", "--quiet", "--no-deps", "--only-binary=:all:", "--python-version",
                    DEVICE_PYTHON, "--implementation", "cp", *platforms, "--dest", str(WHEELS), *EXTRA_WHEELS],
                   check=True)
    wheels = sorted(WHEELS.glob("*.whl"))
    size = sum(w.stat().st_size for w in wheels) / 2**20
    print(f"{len(wheels)} wheels, {size:.1f} MiB, in {WHEELS}:")
    for wheel in wheels:
        print(f"  {wheel.name}")


def install(log: pathlib.Path) -> str:
    """Install .whl/ into SITE (the project's wheels always; another only where the image lacks it); the folder
    goes first on PYTHONPATH for every step. Without .whl/ the environment's own installs serve."""
    if not WHEELS.is_dir():
        return "no .whl/: the environment's installs serve"
    chosen, kept = [], []
    for wheel in sorted(WHEELS.glob("*.whl")):
        name = wheel.name.split("-")[0]
        if not name.startswith("flowjob") and name not in ALWAYS_INSTALLED and _installed(name):
            kept.append(name)
            continue
        chosen.append(str(wheel))
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps",
                           "--no-compile", "--upgrade", "--target", str(SITE), *chosen],
                          capture_output=True, text=True)
    log.write_text(f"installed {len(chosen)}, the image's own kept: {', '.join(kept)}\n{done.stdout}{done.stderr}")
    if done.returncode != 0:
        raise RuntimeError(f"pip install of .whl/ failed: {done.stderr.strip()[-400:]}")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SITE), os.environ.get("PYTHONPATH")]))
    return f"installed {len(chosen)} wheels into {SITE}; kept the image's {len(kept)}"


def _installed(name: str) -> bool:
    try:
        importlib.metadata.version(name.replace("_", "-"))
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


# the steps --------------------------------------------------------------------------------------------------
def steps(emulated: bool, out: pathlib.Path) -> dict[str, Step]:
    py = sys.executable
    bench = str(ROOT / "bench")
    gpu = {"FLOWJOB_DEVICE": "gpu"}
    xdist = importlib.util.find_spec("xdist") is not None
    timeout = importlib.util.find_spec("pytest_timeout") is not None
    # failure_log (bench/) appends each failure to $OUT/<step>-failures.log as it happens: a step stopped at its
    # limit still names what failed
    pytest = [py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "failure_log", "-rfE", "--tb=short",
              *(["--timeout", "90"] if timeout else [])]

    def tests(name: str, **extra: str) -> dict[str, str]:
        return {"PYTHONPATH": bench, "FAILURE_LOG": str(out / f"{name}-failures.log"), **extra}
    info = [py, "-c", "import sys, numpy; print('python', sys.version.split()[0], 'numpy', numpy.__version__)"]
    if emulated:
        environment = ["bash", "-c", f"{_quote(info)} && {py} -m oneflow info"]
        return {
            "environment": Step("environment", 60, environment, gpu),
            "smoke": Step("smoke", 120, [py, f"{bench}/device_smoke.py", "--emulated"]),
            "nccl": Step("nccl", 60, [py, f"{bench}/nccl_boxing_check.py", "--emulated"]),
            "bench": Step("bench", 240, [py, f"{bench}/gpu.py", "--emulated", "--rounds", "1", "--timeout", "120",
                                         "--batch", "8", "--steps", "3", "--systems", "flowjob,flowjob-nographs",
                                         "--workloads", "lenet_train,mlp_train", "--json", str(out / "bench.json")]),
            "gpu_tests": Step("gpu_tests", 240, [*pytest, str(ROOT / "packages/gpu/tests/test_step_accounting.py"),
                                                 str(ROOT / "packages/gpu/tests/test_step_graphs.py")],
                              tests("gpu_tests")),
            "graphs": Step("graphs", 120, [py, f"{bench}/graph_overhead.py", "--emulated", "--ops", "20",
                                           "--steps", "5"]),
            "profile": Step("profile", 120, [py, f"{bench}/profile_plan.py", "lenet_train", "--emulated",
                                             "--batch", "8", "--steps", "2", "--warmup", "1", "--sync", "--by-op",
                                             "--top", "10"]),
            "accounting": Step("accounting", 240, [py, f"{bench}/step_accounting.py", "--workloads",
                                                   "lenet_train,mlp_train", "--batch", "8",
                                                   "--json", str(out / "accounting.json")]),
        }
    environment = ["bash", "-c", "nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; "
                   + _quote(info) + "; " + py + " -c 'import cupy; print(\"cupy\", cupy.__version__, \"cuda "
                   "runtime\", cupy.cuda.runtime.runtimeGetVersion(), \"devices\", "
                   "cupy.cuda.runtime.getDeviceCount())'; " + py + " -c 'import torch; print(\"torch\", "
                   "torch.__version__, torch.cuda.get_device_name())'; " + py + " -m oneflow info"]
    if os.environ.get("SUITE_PATHS"):
        paths = pathlib.Path(os.environ["SUITE_PATHS"]).read_text().split()
    else:
        paths = ["packages", "tests", "examples/plugins", "kernels", "--ignore=tests/minimal",
                 "--ignore=packages/mpi", "--ignore=tests/test_packaging.py"]
    workers = ["-n", "12"] if xdist else []
    return {
        "environment": Step("environment", 30, environment, gpu),
        "smoke": Step("smoke", 90, [py, f"{bench}/device_smoke.py"]),
        "facts": Step("facts", 30, [py, f"{bench}/cupy_facts.py"]),
        "nccl": Step("nccl", 30, [py, f"{bench}/nccl_boxing_check.py"]),
        "bench": Step("bench", 170, [py, f"{bench}/gpu.py", "--rounds", "1", "--timeout", "75",
                                     "--systems", "flowjob,flowjob-nographs,torch",
                                     "--workloads", os.environ.get("BENCH_WORKLOADS",
                                                                   "lenet_train,mlp_train,resnet50_train_b32"),
                                     "--json", str(out / "bench.json")]),
        "gpu_tests": Step("gpu_tests", 90, [*pytest, *workers, "packages/gpu/tests", "kernels/tests"],
                          tests("gpu_tests", FLOWJOB_REQUIRE_GPU="1")),
        "graphs": Step("graphs", 45, [py, f"{bench}/graph_overhead.py", "--steps", "200"]),
        "profile": Step("profile", 60, [py, f"{bench}/profile_plan.py", "resnet50_train", "--steps", "3",
                                        "--warmup", "1", "--sync", "--by-op", "--top", "25"], gpu),
        "suite": Step("suite", 240, [*pytest, *workers, *paths, "-m", "not slow"], {**gpu, **tests("suite")}),
    }


def _quote(command: list[str]) -> str:
    return " ".join("'" + part.replace("'", "'\\''") + "'" for part in command)


def run_step(step: Step, limit: float, out: pathlib.Path) -> Outcome:
    log = out / f"{step.name}.log"
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    for key, value in step.env.items():
        env[key] = os.pathsep.join([value, env[key]]) if key == "PYTHONPATH" and env.get(key) else value
    start = time.monotonic()
    with log.open("w") as sink:
        sink.write(f"$ {' '.join(step.command)}  (at most {limit:.0f} s)\n")
        sink.flush()
        process = subprocess.Popen(step.command, stdout=sink, stderr=subprocess.STDOUT, env=env, cwd=ROOT,
                                   start_new_session=True)
        try:
            rc: int | None = process.wait(timeout=limit)
            status = "passed" if rc == 0 else "failed"
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)  # the step's whole process group: pytest's workers, the bench's workers
            process.wait()
            rc, status = None, "timed out"
    seconds = time.monotonic() - start
    text = log.read_text(errors="replace")
    lines = [line for line in text.splitlines() if line.strip()]
    failures = _failures(text) if status != "passed" else []
    logged = out / f"{step.name}-failures.log"  # failure_log's, where the step runs pytest
    if logged.exists():
        failures += [f"FAILED {line[4:]}" for line in logged.read_text(errors="replace").splitlines()
                     if line.startswith("=== ") and not any(line[4:].split(" [")[0] in f for f in failures)]
    return Outcome(step.name, status, rc, round(seconds, 1), round(limit, 1), lines[-1][:200] if lines else "",
                   failures, str(log))


def run_steps(plan: list[Step], deadline: float, out: pathlib.Path, after_each: Callable[[list[Outcome]], None]
              ) -> list[Outcome]:
    """Run the steps in order, each under its limit trimmed to what is left before ``deadline`` (a
    ``time.monotonic()`` instant); one with under ``LEAST`` seconds left is not run. ``after_each`` gets the
    outcomes so far after every step (the results file is rewritten then)."""
    outcomes: list[Outcome] = []
    for step in plan:
        left = deadline - time.monotonic()
        if left < LEAST:
            outcomes.append(Outcome(step.name, "not run", None, 0.0, 0.0, f"{left:.0f} s left of the deadline", [],
                                    ""))
        else:
            limit = min(step.limit, left - 2)
            print(f"--- {step.name} (at most {limit:.0f} s)", flush=True)
            outcomes.append(run_step(step, limit, out))
            print(f"    {outcomes[-1].status} in {outcomes[-1].seconds:.0f} s: {outcomes[-1].last_line}", flush=True)
        after_each(outcomes)
    return outcomes


def _failures(text: str) -> list[str]:
    """The lines that name what failed: pytest's FAILED/ERROR lines, the smoke's and the bench's FAIL lines,
    a traceback's last line."""
    found = [line.strip() for line in text.splitlines()
             if re.match(r"\s*(FAILED|ERROR|FAIL)\b", line) or re.match(r"^\w*(Error|Exception): ", line)]
    return found[:40]


def write_results(out: pathlib.Path, mode: str, deadline: float, install_note: str, outcomes: list[Outcome]
                  ) -> None:
    results = {"mode": mode, "deadline_s": deadline, "install": install_note,
               "steps": [asdict(o) for o in outcomes]}
    for name in ("bench", "accounting"):
        path = out / f"{name}.json"
        if path.exists():
            results[name] = json.loads(path.read_text())
    partial = out / "results.json.part"
    partial.write_text(json.dumps(results, indent=1))
    partial.replace(out / "results.json")


def results_block(out: pathlib.Path, outcomes: list[Outcome]) -> str:
    lines = ["", "=== device check results"]
    for o in outcomes:
        lines.append(f"{o.name:12s} {o.status:10s} rc={o.rc!s:5s} {o.seconds:6.1f}s/{o.limit:.0f}s  {o.last_line}")
    for name in ("bench", "accounting"):
        log = out / f"{name}.log"
        if log.exists():
            text = log.read_text(errors="replace")
            if name == "bench" and "medians of" in text:  # the table; else (stopped early) each run's line
                text = "\n".join(line for line in text[text.find("medians of"):].splitlines()
                                  if not line.startswith("round "))
            lines += [f"--- {name}", *text.splitlines()[-30:]]
    failures = [(o.name, f) for o in outcomes for f in o.failures]
    if failures:
        lines.append("--- failures")
        lines += [f"{name}: {failure}" for name, failure in failures]
    env_log = out / "environment.log"
    if env_log.exists():
        lines += ["--- facts", *env_log.read_text(errors="replace").splitlines()[1:12]]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("steps", nargs="*", help=f"steps to run, in the check's order (default: all of {ORDER})")
    parser.add_argument("--prepare", action="store_true", help="build and download the wheels into .whl/")
    parser.add_argument("--emulated", action="store_true", help="the emulated CuPy, small sizes (CI)")
    parser.add_argument("--deadline", type=float, default=DEADLINE, help="seconds for the whole check")
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path(os.environ.get("OUT", "device-check")))
    args = parser.parse_args()
    if args.prepare:
        prepare()
        return
    started = time.monotonic()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    for stale in [*out.glob("*.log"), *out.glob("*.json")]:  # an earlier check's: never read as this one's
        stale.unlink()
    if args.emulated:
        os.environ["FLOWJOB_GPU_EMULATION"] = "1"
    mode = "emulated" if args.emulated else "device"
    try:
        install_note = "emulated: the environment's installs" if args.emulated else install(out / "install.log")
    except RuntimeError as exc:
        install_note = f"FAILED: {exc}"
    print(f"install: {install_note}", flush=True)
    plan = steps(args.emulated, out)
    unknown = sorted(set(args.steps) - set(ORDER))
    if unknown:
        raise SystemExit(f"unknown steps {unknown}; the steps are {ORDER}")
    wanted = [name for name in ORDER if name in plan and (not args.steps or name in args.steps)]
    outcomes = run_steps([plan[name] for name in wanted], started + args.deadline, out,
                         lambda done: write_results(out, mode, args.deadline, install_note, done))
    print(results_block(out, outcomes), flush=True)
    passed = outcomes and all(o.status == "passed" for o in outcomes) and not install_note.startswith("FAILED")
    sys.exit(0 if passed else 1)


if __name__ == "__main__":
    main()
