"""``flow.nn.PixelShuffle`` and ``PixelShufflev2`` (legacy v0.4): channel blocks moved into space by a
reshape, a transpose and a reshape."""
from __future__ import annotations

from flowjob_core import Blob, apply

from flowjob_ops.api._common import build_error, job_blob, op_name, positive_int


__all__ = ["PixelShuffle", "PixelShufflev2"]


def PixelShufflev2(input: Blob, h_upscale_factor: int, w_upscale_factor: int,  # noqa: N802, A002
                   name: str | None = None) -> Blob:
    """Moves channel blocks into space: (N, C * h * w, H, W) to (N, C, H * h, W * w).

    Args:
        input: a 4-D (N, C, H, W) blob; C must be a multiple of h_upscale_factor * w_upscale_factor.
        h_upscale_factor: the height factor h, a positive int.
        w_upscale_factor: the width factor w, a positive int.
        name: the node name prefix; default ``PixelShufflev2_<n>``.
    """
    what = "flow.nn.PixelShufflev2"
    job_blob(what, "input", input)
    h = positive_int(what, "h_upscale_factor", h_upscale_factor)
    w = positive_int(what, "w_upscale_factor", w_upscale_factor)
    if len(input.shape) != 4:
        raise build_error(what, f"input must be a 4-D (N, C, H, W) blob, got shape {tuple(input.shape)}")
    batch, channels, height, width = input.shape
    if channels % (h * w):
        raise build_error(what, f"the {channels} channels of input must be a multiple of "
                                f"h_upscale_factor * w_upscale_factor = {h * w}")
    node = op_name(name, "PixelShufflev2")
    out = apply("reshape", [input], {"shape": (batch, channels // (h * w), h, w, height, width)},
                name=f"{node}_reshape1")
    out = apply("transpose", [out], {"perm": (0, 1, 4, 2, 5, 3)}, name=f"{node}_transpose")
    return apply("reshape", [out], {"shape": (batch, channels // (h * w), height * h, width * w)},
                 name=f"{node}_reshape2")


def PixelShuffle(input: Blob, upscale_factor: int, name: str | None = None) -> Blob:  # noqa: N802, A002
    """PixelShufflev2 with one factor r for height and width: (N, C * r * r, H, W) to (N, C, H * r, W * r).

    Args:
        input: a 4-D (N, C, H, W) blob; C must be a multiple of upscale_factor ** 2.
        upscale_factor: r, a positive int.
        name: the node name prefix; default ``PixelShufflev2_<n>``.
    """
    positive_int("flow.nn.PixelShuffle", "upscale_factor", upscale_factor)
    return PixelShufflev2(input, upscale_factor, upscale_factor, name=name)
