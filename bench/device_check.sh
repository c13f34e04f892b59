#!/usr/bin/env bash
# The GPU device check, one command (bench/device_check.py says what it runs and writes):
#
#     bash bench/device_check.sh --prepare      # here, with a package index: the wheels into .whl/
#     bash bench/device_check.sh [STEP...]      # on the GPU machine (OUT=folder for the logs and results.json)
#     bash bench/device_check.sh --emulated     # anywhere: the emulated CuPy (tox's gpu-emulation env runs it)
set -u
cd "$(dirname "$0")/.." || exit 1
exec "${PYTHON:-python3}" bench/device_check.py "$@"
