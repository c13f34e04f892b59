"""Legacy's ``blob.parallel_conf``: the device tag and devices of the placement that made a blob."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ParallelConf:
    """Read as legacy's (``blob.parallel_conf.device_tag()``, ``device_name()``): accessor methods, not fields.

    ``device_names``: the placement's ``machine_device_ids`` (``"0:0-1"``: machine 0, devices 0 and 1)."""

    tag: str
    device_names: tuple[str, ...]

    def device_tag(self) -> str:
        return self.tag

    def device_name(self) -> list[str]:
        return list(self.device_names)

    def __str__(self) -> str:
        names = "".join(f'\ndevice_name: "{name}"' for name in self.device_names)
        return f'device_tag: "{self.tag}"{names}'
