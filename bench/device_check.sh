#!/usr/bin/env bash
# The GPU device check, one command on a machine with an NVIDIA GPU, from the repository root:
#
#     bash bench/device_check.sh [STEP...]     # OUT=folder for the logs (default ./device-check)
#
# It installs the project (wheels in .whl/ if that folder exists: a machine without a package index;
# else the working tree, editable) and CuPy for the machine's CUDA if it is missing, then runs the steps
# (all by default), each under its own time limit so the whole stays within about nine minutes:
#   environment  the GPU, CuPy, torch and `python -m oneflow info` with the GPU as default device
#   facts        bench/cupy_facts.py: the CuPy behaviours the kernels rely on
#   gpu_tests    the gpu and kernels packages' tests (the `gpu`-marked ones run on the device)
#   profile      where a ResNet-50 training step's device time goes (bench/profile_plan.py --sync)
#   graphs       bench/graph_overhead.py: a recorded step's cost an op, against launching every kernel
#   suite        the whole test suite with the GPU as every job's default device (seed programs among
#                it); SUITE_PATHS narrows it (a file listing test paths, one a line), SUITE_LIMIT
#                sets its seconds (200)
#   bench        bench/gpu.py: flowjob on CuPy against PyTorch CUDA (BENCH_WORKLOADS narrows it,
#                BENCH_SYSTEMS adds flowjob-nographs (every kernel launched), BENCH_LIMIT sets its seconds: 150)
# Each step's log is in $OUT; the summary (one line a step: exit status, seconds, last line) is
# $OUT/summary.txt and is printed last.
set -u
OUT=${OUT:-$PWD/device-check}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
SUMMARY=$OUT/summary.txt
: >"$SUMMARY"
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1

step() {  # step NAME SECONDS COMMAND...: runs COMMAND under a time limit into $OUT/NAME.log
  local name=$1 limit=$2 start=$SECONDS rc
  shift 2
  echo "--- $name (at most ${limit}s): $*"
  timeout -k 10 "$limit" "$@" >"$OUT/$name.log" 2>&1
  rc=$?
  printf '%-14s rc=%-4s %4ss  %s\n' "$name" "$rc" "$((SECONDS - start))" \
    "$(grep -v '^\s*$' "$OUT/$name.log" | tail -n 1 | cut -c1-150)" | tee -a "$SUMMARY"
}

install() {
  if [ -d .whl ]; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --target /tmp/flowjob-site .whl/*.whl || return
    export PYTHONPATH=/tmp/flowjob-site${PYTHONPATH:+:$PYTHONPATH}
  else
    "$PY" -m pip install -q -e packages/core -e packages/ops -e packages/typing -e packages/watch \
      -e packages/optim -e packages/data -e packages/oneflow -e kernels -e packages/gpu || return
  fi
  "$PY" -c 'import cupy' 2>/dev/null && return
  local major
  major=$(nvidia-smi | sed -n 's/.*CUDA Version: \([0-9]*\).*/\1/p' | head -n 1)
  "$PY" -m pip install -q "cupy-cuda${major}x"
}

environment() {
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  "$PY" -c 'import sys, numpy, cupy; print(sys.version.split()[0], "numpy", numpy.__version__, "cupy", cupy.__version__,
"cuda runtime", cupy.cuda.runtime.runtimeGetVersion(), "devices", cupy.cuda.runtime.getDeviceCount())'
  "$PY" -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name())' || true
  FLOWJOB_DEVICE=gpu "$PY" -m oneflow info
}

# the install exports PYTHONPATH, so it runs in this shell (pip offline takes seconds)
install >"$OUT/install.log" 2>&1; echo "install        rc=$?" | tee -a "$SUMMARY"
export -f environment
export PY
steps=${*:-environment facts gpu_tests graphs profile suite bench}
for name in $steps; do
  case $name in
    environment) step environment 25 bash -c environment ;;
    facts) step facts 30 "$PY" bench/cupy_facts.py ;;
    gpu_tests) step gpu_tests 60 "$PY" -m pytest packages/gpu/tests kernels/tests -q -p no:cacheprovider -rs ;;
    graphs) step graphs 60 "$PY" bench/graph_overhead.py --steps 200 ;;
    profile) step profile 90 env FLOWJOB_DEVICE=gpu "$PY" bench/profile_plan.py resnet50_train --steps 3 \
      --warmup 1 --sync --by-op --top 25 ;;
    suite)
      # failures are appended to suite-failures.log as they come, so a run stopped at its limit names them
      if [ -n "${SUITE_PATHS:-}" ]; then mapfile -t paths <"$SUITE_PATHS"; else
        paths=(packages tests examples/plugins kernels --ignore=tests/minimal --ignore=packages/mpi
               --ignore=tests/test_packaging.py); fi
      step suite "${SUITE_LIMIT:-200}" env FLOWJOB_DEVICE=gpu FAILURE_LOG="$OUT/suite-failures.log" \
        PYTHONPATH="bench:${PYTHONPATH:-}" "$PY" -m pytest "${paths[@]}" -m "not slow" -q -p no:cacheprovider \
        -p failure_log -n 15 --timeout 90 --tb=no -rN ;;
    bench) step bench "${BENCH_LIMIT:-150}" "$PY" bench/gpu.py --rounds 1 --timeout 60 --json "$OUT/bench.json" \
      --systems "${BENCH_SYSTEMS:-flowjob,torch}" \
      --workloads "${BENCH_WORKLOADS:-lenet_train,mlp_train,resnet50_train_b32}" ;;
    *) echo "unknown step $name" | tee -a "$SUMMARY" ;;
  esac
done
echo
echo "=== device check summary"
cat "$SUMMARY"
