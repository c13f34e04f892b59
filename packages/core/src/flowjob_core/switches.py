"""Every ``FLOWJOB_*`` environment switch, declared once, read into one ``Switches`` object.

Switches are read when they are used (a session is made, a job is planned), never at import,
so a test or a program may set them any time before. A value that is not understood is a
``ConfigError`` naming the variable, never a silent default. ``python -m oneflow info`` prints
the table with the values in effect.
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any, Mapping

from flowjob_core.errors import ConfigError

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")

CONV_ALGORITHMS = ("auto", "im2col", "winograd")


def _switch(env: str, default: Any, doc: str, *, choices: tuple[str, ...] = ()) -> Any:
    return field(default=default, metadata={"env": env, "doc": doc, "choices": choices})


@dataclass(frozen=True)
class Switches:
    """The values of the ``FLOWJOB_*`` switches; ``Switches()`` holds the defaults."""

    fusion: bool = _switch("FLOWJOB_FUSION", True, "graph fusion passes (0 gives the unfused reference graph)")
    conv_algorithm: str = _switch(
        "FLOWJOB_CONV_ALGORITHM", "auto", "convolution algorithm on the cpu backend", choices=CONV_ALGORITHMS)
    blas_fusion: bool = _switch(
        "FLOWJOB_BLAS_FUSION", True, "plain SGD folded into its gradient's GEMM on the cpu backend")
    malloc_tuning: bool = _switch(
        "FLOWJOB_MALLOC_TUNING", False,
        "opt-in: tune glibc malloc for the whole process (faster steps, freed memory kept by the process)")
    amp_on_cpu: bool = _switch(
        "FLOWJOB_AMP_ON_CPU", False,
        "enable_auto_mixed_precision runs its float16 ops on the cpu backend too (legacy: GPU ops only; slow)")
    host_threads: int = _switch(
        "FLOWJOB_HOST_THREADS", 0,
        "threads one step keeps busy on the cpu backend: nodes side by side, kernel splits and BLAS together "
        "(0: OMP_NUM_THREADS or OPENBLAS_NUM_THREADS if set, else the CPUs this process may run on)")
    mpi_gradients: str = _switch(
        "FLOWJOB_MPI_GRADIENTS", "",
        "flowjob-mpi's gradient all-reduce: nccl or mpi (unset: NCCL where every rank can)", choices=("nccl", "mpi"))
    mpi_feed_check: bool = _switch(
        "FLOWJOB_MPI_FEED_CHECK", True,
        "flowjob-mpi's step check compares a fingerprint (CRC-32) of each array fed to a consistent-view argument "
        "across the ranks (0: only in debug mode, which compares SHA-256 digests)")
    checkpoint_split_save: str = _switch(
        "FLOWJOB_CHECKPOINT_SPLIT_SAVE", "rows",
        "how a save on several ranks writes a split variable: rows (each rank its rows, into the file, where the "
        "ranks share the folder; else gathered) or gather (always gathered onto rank 0, which writes it)",
        choices=("rows", "gather"))
    device: str = _switch("FLOWJOB_DEVICE", "", "force the device tag every job runs on (cpu, gpu, ...)")
    disable_plugin_autoload: bool = _switch(
        "FLOWJOB_DISABLE_PLUGIN_AUTOLOAD", False, "load no entry-point plugins, only core's built-ins")
    plugins: tuple[str, ...] = _switch("FLOWJOB_PLUGINS", (), "load only these entry-point plugins (a,b)")
    blocked_plugins: tuple[str, ...] = _switch(
        "FLOWJOB_BLOCKED_PLUGINS", (), "block these plugins by name, built-ins included (a,b)")
    kernel_dir: str = _switch("FLOWJOB_KERNEL_DIR", "", "folder of CUDA sources replacing flowjob-kernels' own")
    gpu_emulation: bool = _switch(
        "FLOWJOB_GPU_EMULATION", False,
        "flowjob-gpu's backend on an emulated CuPy (numpy behind CuPy's names; the default device, no GPU needed)")
    cuda_graphs: bool = _switch(
        "FLOWJOB_CUDA_GRAPHS", True,
        "the gpu backend records each step's device work as CUDA graphs once and replays them (0: launch every kernel "
        "each step)")
    numerics_check: bool = _switch(
        "FLOWJOB_NUMERICS_CHECK", False,
        "stop a step at the first op whose output holds NaN, or Inf its record does not make on purpose "
        "(flow.config.enable_numerics_check; function_config.enable_numerics_check per job)")
    data_home: str = _switch(
        "FLOWJOB_DATA_HOME", "", "dataset cache folder (flowjob-data; default ${XDG_CACHE_HOME:-~/.cache}/flowjob)")

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> "Switches":
        """The settings the environment asks for; an unreadable value is a ConfigError naming it."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            raw = env.get(f.metadata["env"])
            if raw is not None and raw.strip():  # set but empty: the default, as if unset
                values[f.name] = _parse(f, raw)
        return cls(**values)

    def describe(self) -> list[tuple[str, str, str]]:
        """(variable, value in effect, what it does) for every switch."""
        rows = []
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            shown = ",".join(value) if isinstance(value, tuple) else ("1" if value is True else "0" if value is False
                                                                      else value)
            rows.append((f.metadata["env"], shown or "-", f.metadata["doc"]))
        return rows


def _parse(f: "dataclasses.Field[Any]", raw: str) -> Any:
    env, text = f.metadata["env"], raw.strip()
    if isinstance(f.default, bool):
        lowered = text.lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
        raise ConfigError(f"{env}={raw!r}: expected one of 1/0, true/false, yes/no, on/off")
    if isinstance(f.default, tuple):
        return tuple(n.strip() for n in text.split(",") if n.strip())
    if isinstance(f.default, int):
        try:
            number = int(text)
        except ValueError:
            number = -1
        if number < 0:
            raise ConfigError(f"{env}={raw!r}: expected a whole number >= 0")
        return number
    choices = f.metadata["choices"]
    if choices:
        text = text.lower()
        if text not in choices:
            raise ConfigError(f"{env}={raw!r}: expected one of {', '.join(choices)}")
    return text


def current() -> Switches:
    """The settings of the process environment now (read afresh on every call)."""
    return Switches.from_environ()
