"""The static geometry of one 2-D convolution (``ConvGeometry``: batch, channels, filters, groups and the
2-D window over the plane, validated once) and the activation layout views the 2-D im2col kernels share.

Layouts (legacy OneFlow):

* ``data_format="NCHW"``: x (N, C, H, W), w (F, C/groups, kh, kw), y (N, F, OH, OW)
* ``data_format="NHWC"``: x (N, H, W, C), w (F, kh, kw, C/groups), y (N, OH, OW, F)
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from flowjob_ops.kernels.window2d import Window2d, check_data_format


@dataclass(frozen=True)
class ConvGeometry:
    """Static shapes of one convolution (validated)."""

    data_format: str
    N: int
    C: int
    H: int
    W: int
    F: int
    groups: int
    window: Window2d

    @classmethod
    def create(
        cls,
        x_shape: Sequence[int],
        w_shape: Sequence[int],
        strides: Any = 1,
        pads: Any = 0,
        dilation: Any = 1,
        groups: int = 1,
        data_format: str = "NCHW",
    ) -> "ConvGeometry":
        fmt = check_data_format(data_format)
        if len(x_shape) != 4:
            raise ValueError(f"conv2d input must be 4-d ({fmt}), got shape {tuple(x_shape)}")
        if len(w_shape) != 4:
            raise ValueError(f"conv2d weight must be 4-d, got shape {tuple(w_shape)}")
        if fmt == "NCHW":
            N, C, H, W = (int(v) for v in x_shape)
            F, wc, kh, kw = (int(v) for v in w_shape)
        else:
            N, H, W, C = (int(v) for v in x_shape)
            F, kh, kw, wc = (int(v) for v in w_shape)
        if isinstance(groups, bool) or not isinstance(groups, (int, np.integer)) or groups < 1:
            raise ValueError(f"groups must be a positive int, got {groups!r}")
        if C % groups or F % groups:
            raise ValueError(
                f"groups={groups} must divide both the input channels ({C}) and the "
                f"number of filters ({F})"
            )
        if wc != C // groups:
            raise ValueError(
                f"weight shape {tuple(w_shape)} ({fmt}) has {wc} input channels per "
                f"filter, expected C/groups = {C}/{groups} = {C // groups}"
            )
        if min(N, C, H, W, F, kh, kw) < 1:
            raise ValueError(
                f"conv2d shapes must be positive, got x {tuple(x_shape)}, w {tuple(w_shape)}"
            )
        window = Window2d.create((H, W), (kh, kw), strides, dilation, pads, fmt)
        return cls(fmt, N, C, H, W, F, int(groups), window)

    def with_batch(self, n: int) -> "ConvGeometry":
        """This convolution over ``n`` images (a part of the batch)."""
        return dataclasses.replace(self, N=int(n))

    @property
    def Cg(self) -> int:
        return self.C // self.groups

    @property
    def Fg(self) -> int:
        return self.F // self.groups

    @property
    def M(self) -> int:
        """GEMM rows: one per output pixel."""
        oh, ow = self.window.out_hw
        return self.N * oh * ow

    @property
    def Kg(self) -> int:
        """GEMM reduction length per group."""
        kh, kw = self.window.ksize
        return self.Cg * kh * kw

    @property
    def x_shape(self) -> tuple[int, int, int, int]:
        return self._act(self.C, (self.H, self.W))

    @property
    def y_shape(self) -> tuple[int, int, int, int]:
        return self._act(self.F, self.window.out_hw)

    @property
    def w_shape(self) -> tuple[int, int, int, int]:
        kh, kw = self.window.ksize
        if self.data_format == "NCHW":
            return (self.F, self.Cg, kh, kw)
        return (self.F, kh, kw, self.Cg)

    def _act(self, c: int, hw: tuple[int, int]) -> tuple[int, int, int, int]:
        if self.data_format == "NCHW":
            return (self.N, c, hw[0], hw[1])
        return (self.N, hw[0], hw[1], c)


def check_shape(name: str, a: Any, expected: tuple[int, ...]) -> None:
    if tuple(a.shape) != expected:
        raise ValueError(f"{name} has shape {tuple(a.shape)}, this kernel was built for {expected}")


def to_nhwc(a: Any, fmt: str) -> Any:
    """NHWC view of a 4-d activation (no copy)."""
    return a if fmt == "NHWC" else a.transpose(0, 2, 3, 1)


def to_nchw(a: Any, fmt: str) -> Any:
    """NCHW view of a 4-d activation (no copy)."""
    return a if fmt == "NCHW" else a.transpose(0, 3, 1, 2)
