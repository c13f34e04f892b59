"""The ops the data-parallel passes insert: a rank's slice of a fed batch, the all-gather of a
returned value, and the bucketed all-reduce of gradients (and of values reduced over the batch).

They run inside the generated straight-line step like any kernel, on host buffers (a device
backend's arrays are copied to the host and back), except on GPU ranks whose world chose NCCL:
there they stay on the device (``flowjob_mpi.nccl_boxing``, ``flowjob_mpi.nccl``). Every rank runs
the same nodes in the same order, so the collectives match.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from flowjob_core import BlobSpec, Effects, GradContext, KernelContext, OpDef, ShapeError

from flowjob_mpi import nccl_boxing
from flowjob_mpi.faults import WAITING
from flowjob_mpi.nccl import VARIABLE, DeviceBucket, Nccl, requested
from flowjob_mpi.errors import MpiError
from flowjob_mpi.world import world


def _split_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (x,) = inputs
    axis, count = attrs["axis"], attrs["count"]
    if not 0 <= attrs["start"] <= attrs["start"] + count <= x.shape[axis]:
        raise ShapeError(f"rows [{attrs['start']}, {attrs['start'] + count}) are not inside axis {axis} of {x.shape}")
    shape = list(x.shape)
    shape[axis] = count
    return [BlobSpec(tuple(shape), x.dtype)]


def _split_kernel(ctx: KernelContext) -> Callable[[Any], Any]:
    axis, start, stop = ctx.attrs["axis"], ctx.attrs["start"], ctx.attrs["start"] + ctx.attrs["count"]
    index = (slice(None),) * axis + (slice(start, stop),)
    return lambda x: x[index]  # a view: this rank reads its rows of the fed global batch


def _gather_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (x,) = inputs
    shape = list(x.shape)
    shape[attrs["axis"]] = sum(attrs["counts"])
    return [BlobSpec(tuple(shape), x.dtype)]


def _gather_kernel(ctx: KernelContext) -> Callable[[Any], Any]:
    nccl = _nccl_for(ctx)
    if nccl is not None:  # GPU ranks: on the device through NCCL
        return nccl_boxing.gather_kernel(ctx, nccl)
    comm = world().comm
    axis, counts = ctx.attrs["axis"], ctx.attrs["counts"]
    out_spec = ctx.outputs[0]
    inner = out_spec.size // max(out_spec.shape[axis], 1)
    moved = (out_spec.shape[axis],) + tuple(d for k, d in enumerate(out_spec.shape) if k != axis)
    received = np.empty(moved, dtype=out_spec.dtype)  # rank-major rows: the global value along axis 0
    sizes = [c * inner for c in counts]
    host, device = ctx.backend.to_host, ctx.backend.from_host
    out = ctx.out(0)
    what = f"the all-gather of node {ctx.node_name!r}"

    def run(x: Any) -> Any:
        piece = np.ascontiguousarray(np.moveaxis(host(x), axis, 0))
        WAITING.enter(what)
        comm.Allgatherv(piece, [received, sizes])
        WAITING.leave()
        value = np.moveaxis(received, 0, axis)
        if ctx.backend.host_arrays:
            np.copyto(out, value)
        else:
            out[...] = device(np.ascontiguousarray(value))
        return out

    return run


def _allreduce_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    dtypes = {x.dtype for x in inputs}
    if len(dtypes) != 1 or next(iter(dtypes)).kind != "f":
        raise ShapeError(f"a bucket holds floating blobs of one dtype, got {sorted(map(str, dtypes))}")
    return list(inputs)


def _allreduce_kernel(ctx: KernelContext) -> Callable[..., Any]:
    nccl = _nccl_for(ctx)
    if nccl is not None:  # GPU ranks: on the device through NCCL
        return nccl_boxing.allreduce_kernel(ctx, nccl)
    from mpi4py import MPI

    comm = world().comm
    dtype = ctx.inputs[0].dtype
    weight = dtype.type(ctx.attrs["weight"])
    sizes = [x.size for x in ctx.inputs]
    offsets = np.cumsum([0] + sizes).tolist()
    bucket = np.empty(offsets[-1], dtype=dtype)  # one message per bucket, reused every step
    pieces = [bucket[offsets[i]:offsets[i + 1]].reshape(x.shape) for i, x in enumerate(ctx.inputs)]
    outs = [ctx.out(i) for i in range(len(sizes))]
    host, device, host_arrays = ctx.backend.to_host, ctx.backend.from_host, ctx.backend.host_arrays
    single = len(sizes) == 1
    what = f"the all-reduce of node {ctx.node_name!r}"

    def run(*grads: Any) -> Any:
        for piece, grad in zip(pieces, grads):
            np.multiply(host(grad), weight, out=piece)
        WAITING.enter(what)
        comm.Allreduce(MPI.IN_PLACE, bucket, op=MPI.SUM)
        WAITING.leave()
        for out, piece in zip(outs, pieces):
            if host_arrays:
                np.copyto(out, piece)
            else:
                out[...] = device(piece)
        return outs[0] if single else tuple(outs)

    return run


def _reduce_scatter_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (x,) = inputs
    axis, ranks = attrs["axis"], attrs["ranks"]
    if x.dtype.kind != "f":
        raise ShapeError(f"a reduce-scatter sums floating values, got {x.dtype}")
    if not 0 <= axis < len(x.shape) or x.shape[axis] % ranks:
        raise ShapeError(f"axis {axis} of {x.shape} does not split evenly over {ranks} ranks")
    shape = list(x.shape)
    shape[axis] //= ranks
    return [BlobSpec(tuple(shape), x.dtype)]


def _reduce_scatter_kernel(ctx: KernelContext) -> Callable[[Any], Any]:
    nccl = _nccl_for(ctx)
    if nccl is not None:  # GPU ranks: on the device through NCCL
        return nccl_boxing.reduce_scatter_kernel(ctx, nccl)
    from mpi4py import MPI

    comm = world().comm
    axis = ctx.attrs["axis"]
    received = np.empty(np.moveaxis(np.empty(ctx.outputs[0].shape, dtype=np.int8), axis, 0).shape,
                        dtype=ctx.outputs[0].dtype)
    out, host, device, host_arrays = ctx.out(0), ctx.backend.to_host, ctx.backend.from_host, ctx.backend.host_arrays
    what = f"the reduce-scatter of node {ctx.node_name!r}"

    def run(x: Any) -> Any:
        pieces = np.ascontiguousarray(np.moveaxis(host(x), axis, 0))  # rank r's piece: the r-th block of rows
        WAITING.enter(what)
        comm.Reduce_scatter_block(pieces, received, op=MPI.SUM)
        WAITING.leave()
        value = np.moveaxis(received, 0, axis)
        if host_arrays:
            np.copyto(out, value)
        else:
            out[...] = device(np.ascontiguousarray(value))
        return out

    return run


def _all_to_all_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (x,) = inputs
    split_axis, concat_axis, ranks = attrs["split_axis"], attrs["concat_axis"], attrs["ranks"]
    for name, axis in (("split_axis", split_axis), ("concat_axis", concat_axis)):
        if not 0 <= axis < len(x.shape):
            raise ShapeError(f"{name} {axis} is out of range for a piece of shape {x.shape}")
    if split_axis == concat_axis:
        raise ShapeError(f"an all-to-all moves a split from one axis to another, got axis {split_axis} twice")
    if x.shape[split_axis] % ranks:
        raise ShapeError(f"axis {split_axis} of {x.shape} does not split evenly over {ranks} ranks")
    shape = list(x.shape)
    shape[split_axis] //= ranks
    shape[concat_axis] *= ranks
    return [BlobSpec(tuple(shape), x.dtype)]


def _all_to_all_grad(ctx: GradContext) -> list[Any]:
    # the adjoint moves the split back: what this rank sent to rank j along split_axis comes back from it
    attrs = ctx.attrs
    return [ctx.apply("mpi_all_to_all", [ctx.dy], {"split_axis": attrs["concat_axis"],
                                                    "concat_axis": attrs["split_axis"], "ranks": attrs["ranks"]})]


def _all_to_all_kernel(ctx: KernelContext) -> Callable[[Any], Any]:
    """The kernel's collective, chosen per kernel as the gradient buckets choose theirs (``_start_kernel``): a
    device path for the world's device communicator goes before the host one, which every backend can run."""
    nccl = _nccl_for(ctx)
    if nccl is not None:  # GPU ranks: on the device through NCCL (grouped sends and receives)
        return nccl_boxing.all_to_all_kernel(ctx, nccl)
    return _host_all_to_all(ctx)


def _host_all_to_all(ctx: KernelContext) -> Callable[[Any], Any]:
    """``MPI_Alltoall`` on host copies: block j of this rank's piece (along split_axis) goes to rank j, and the
    blocks received from ranks 0, 1, ... are laid side by side along concat_axis."""
    comm = world().comm
    split_axis, concat_axis, ranks = ctx.attrs["split_axis"], ctx.attrs["concat_axis"], ctx.attrs["ranks"]
    x_spec = ctx.inputs[0]
    block = list(x_spec.shape)
    block[split_axis] //= ranks
    sent = np.empty((ranks, *block), dtype=x_spec.dtype)  # rank-major: block j is contiguous
    received = np.empty_like(sent)
    out, host, device, host_arrays = ctx.out(0), ctx.backend.to_host, ctx.backend.from_host, ctx.backend.host_arrays
    step = block[split_axis]
    what = f"the all-to-all of node {ctx.node_name!r}"

    def run(x: Any) -> Any:
        value = host(x)
        for j in range(ranks):
            np.copyto(sent[j], value[(slice(None),) * split_axis + (slice(j * step, (j + 1) * step),)])
        WAITING.enter(what)
        comm.Alltoall(sent, received)
        WAITING.leave()
        whole = np.concatenate(list(received), axis=concat_axis)
        if host_arrays:
            np.copyto(out, whole)
        else:
            out[...] = device(whole)
        return out

    return run


def _nccl_for(ctx: KernelContext) -> Nccl | None:
    """The world's NCCL communicator where it serves this kernel's backend; None: the host MPI path."""
    nccl = world().nccl
    if nccl is not None and nccl.serves(ctx.backend):
        return nccl
    if requested() == "nccl":
        reason = "the world has no NCCL communicator" if nccl is None else "NCCL reads device arrays only"
        raise MpiError(f"node {ctx.node_name!r}: {VARIABLE}=nccl, but this job runs on the {ctx.backend.name} "
                       f"backend (device tag {ctx.backend.tag!r}) and {reason}; place the job on the gpu "
                       f"devices or set {VARIABLE}=mpi")
    return None


class _Bucket:
    """One bucket in flight: its host buffer, the views of each gradient in it, and the pending request."""

    def __init__(self, inputs: Sequence[BlobSpec]) -> None:
        dtype = inputs[0].dtype
        offsets = np.cumsum([0] + [x.size for x in inputs]).tolist()
        self.buffer = np.empty(offsets[-1], dtype=dtype)
        self.pieces = [self.buffer[offsets[i]:offsets[i + 1]].reshape(x.shape) for i, x in enumerate(inputs)]
        self.request: Any = None


def _start_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    _allreduce_infer(inputs, attrs)
    if len(attrs["weights"]) != len(inputs):
        raise ShapeError(f"{len(inputs)} inputs need as many weights, got {len(attrs['weights'])}")
    return [BlobSpec((1,), np.dtype(np.int8))]  # a token: the wait node reads it, so it runs after the start


def _start_kernel(ctx: KernelContext) -> Callable[..., Any]:
    from mpi4py import MPI

    comm = world().comm
    weights = [ctx.inputs[0].dtype.type(w) for w in ctx.attrs["weights"]]
    nccl = _nccl_for(ctx)
    if nccl is not None:  # GPU ranks: the bucket stays on the device (flowjob_mpi.nccl)
        on_device = ctx.shared[("mpi-bucket", ctx.node_name)] = nccl.bucket(ctx.inputs)
        token = ctx.out(0)

        def run_on_device(*grads: Any) -> Any:
            on_device.start(grads, weights)
            return token

        return run_on_device
    bucket = ctx.shared[("mpi-bucket", ctx.node_name)] = _Bucket(ctx.inputs)
    host = ctx.backend.to_host
    token = ctx.out(0)

    def run(*grads: Any) -> Any:
        for piece, grad, weight in zip(bucket.pieces, grads, weights):
            np.multiply(host(grad), weight, out=piece)
        bucket.request = comm.Iallreduce(MPI.IN_PLACE, bucket.buffer, op=MPI.SUM)
        return token

    return run


def _wait_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    return [BlobSpec(tuple(shape), np.dtype(attrs["dtype"])) for shape in attrs["shapes"]]


def _wait_kernel(ctx: KernelContext) -> Callable[..., Any]:
    bucket = ctx.shared[("mpi-bucket", ctx.attrs["start"])]
    outs = [ctx.out(i) for i in range(len(ctx.outputs))]
    device, host_arrays = ctx.backend.from_host, ctx.backend.host_arrays
    single = len(outs) == 1
    what = f"the all-reduce of node {ctx.attrs['start']!r}"
    if isinstance(bucket, DeviceBucket):

        def run_on_device(token: Any) -> Any:
            bucket.finish(what)
            for out, piece in zip(outs, bucket.pieces):
                out[...] = piece  # on the compute stream, after the sum
            return outs[0] if single else tuple(outs)

        return run_on_device

    def run(token: Any) -> Any:
        WAITING.enter(what)
        bucket.request.Wait()
        WAITING.leave()
        for out, piece in zip(outs, bucket.pieces):
            if host_arrays:
                np.copyto(out, piece)
            else:
                out[...] = device(piece)
        return outs[0] if single else tuple(outs)

    return run


MPI_SPLIT = OpDef("mpi_split", _split_infer, kernel=_split_kernel, not_differentiable=True,
                  doc="this rank's rows [start, start + count) of a fed global batch, along axis",
                  effects=Effects(view=True))
MPI_ALLGATHER = OpDef("mpi_allgather", _gather_infer, kernel=_gather_kernel, not_differentiable=True,
                      doc="every rank's piece concatenated in rank order along axis (counts: each rank's rows)",
                      effects=Effects(ordered=True))
MPI_ALLREDUCE = OpDef("mpi_allreduce", _allreduce_infer, kernel=_allreduce_kernel, not_differentiable=True,
                      doc="sum over ranks of weight * input, for each input, in one message (a bucket)",
                      effects=Effects(ordered=True))
MPI_REDUCE_SCATTER = OpDef("mpi_reduce_scatter", _reduce_scatter_infer, kernel=_reduce_scatter_kernel,
                           not_differentiable=True,
                           doc="the sum over ranks of the input, of which this rank keeps its even slice along axis "
                               "(attrs axis, ranks)", effects=Effects(ordered=True))
MPI_ALL_TO_ALL = OpDef("mpi_all_to_all", _all_to_all_infer, kernel=_all_to_all_kernel, grad=_all_to_all_grad,
                       doc="a value split along concat_axis made split along split_axis (attrs split_axis, "
                           "concat_axis, ranks): block j of this rank's piece goes to rank j, MPI_Alltoall",
                       effects=Effects(ordered=True))

MPI_ALLREDUCE_START = OpDef("mpi_allreduce_start", _start_infer, kernel=_start_kernel, not_differentiable=True,
                            doc="starts the sum over ranks of weights[i] * input i, all in one non-blocking message",
                            effects=Effects(ordered=True))
MPI_ALLREDUCE_WAIT = OpDef("mpi_allreduce_wait", _wait_infer, kernel=_wait_kernel, not_differentiable=True,
                           doc="waits for the bucket its start node (attr start) sent; outputs the sums",
                           effects=Effects(ordered=True))

# the collectives are ``ordered``: each rank issues them on its step's own thread in schedule order, so every
# rank sends and waits for the same messages in the same order whatever runs beside them
OPS = (MPI_SPLIT, MPI_ALLGATHER, MPI_ALLREDUCE, MPI_REDUCE_SCATTER, MPI_ALL_TO_ALL, MPI_ALLREDUCE_START,
       MPI_ALLREDUCE_WAIT)
