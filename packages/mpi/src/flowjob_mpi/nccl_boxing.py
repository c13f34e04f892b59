"""Boxing on GPU ranks: the consistent view's collectives (all-gather, reduce-scatter, all-reduce, broadcast,
all-to-all) on device arrays through the world's NCCL communicator (``flowjob_mpi.nccl``).

Where the world chose NCCL (``nccl.choose``, the same world-wide rule as the gradient buckets, so every rank takes
the same path) and the job keeps its arrays on the device, the boxing ops' kernels (``flowjob_mpi.ops``) build
these instead of their MPI host collectives: nothing is copied to the host. Each collective keeps ``nccl.py``'s
stream discipline: an event recorded on the compute stream (the current one, the step's) orders it on NCCL's own
stream after the work that made its input, and the compute stream waits for an event recorded after it. The host
never waits: the next kernels are ordered on the device. So a boxing node can be recorded into the step's CUDA
graph (NCCL 2.9 and later capture collectives; the NCCL stream joins the capture through the first event and
rejoins it through the second, CUDA's fork and join), and its kernel says so (``host_state = False``).

NCCL concatenates and scatters along memory, that is along axis 0 of C-contiguous buffers: a split along another
axis is staged through a buffer made once per kernel, rank-major (block j of axis ``a`` is block j of the
buffer), by one device copy before or after the collective. NCCL has no all-to-all: it is a group of sends and
receives, one pair per rank (``groupStart``/``groupEnd``). Collectives that only move values move bytes
(``NCCL_UINT8``, any dtype); sums use the blob's float type.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from flowjob_core import Kernel, KernelContext

from flowjob_mpi.errors import MpiError
from flowjob_mpi.nccl import Nccl


class DeviceBoxing:
    """The collectives of one boxing node on this rank's NCCL communicator, for arrays of array module ``xp``
    (CuPy): two events made once, re-recorded at every call, order them with the compute stream."""

    def __init__(self, nccl: Nccl, xp: Any, what: str) -> None:
        self.nccl, self.xp, self.what = nccl, xp, what
        cuda = nccl.runtime.cp.cuda
        self.ready = cuda.Event(disable_timing=True)  # the compute stream reached the collective
        self.done = cuda.Event(disable_timing=True)  # the collective ended, on NCCL's stream
        self.size = nccl.size

    # the stream discipline -------------------------------------------------------------------------
    def _begin(self) -> Any:
        """NCCL's stream ordered after the work issued so far on the compute stream; returns that stream's handle
        and the compute stream."""
        nccl = self.nccl
        compute = nccl.runtime.cp.cuda.get_current_stream()
        self.ready.record(compute)
        nccl.stream.wait_event(self.ready)
        return nccl.runtime.stream_pointer(nccl.stream), compute

    def _end(self, compute: Any) -> None:
        """The compute stream's later work ordered after the collective, on the device: the host does not wait."""
        self.done.record(self.nccl.stream)
        compute.wait_event(self.done)

    def _bytes(self, array: Any) -> tuple[int, Any]:
        """``array``'s size in bytes and NCCL's byte type (the calls used here take their counts as size_t)."""
        return int(array.nbytes), self.nccl.runtime.nccl.NCCL_UINT8

    def _summed(self, dtype: np.dtype) -> Any:
        try:
            return self.nccl.dtype(dtype)
        except MpiError as exc:
            raise MpiError(f"{self.what}: {exc}") from None

    def _contiguous(self, x: Any, staging: Any | None) -> Any:
        if x.flags.c_contiguous:
            return x
        if staging is None:
            staging = self.xp.empty(x.shape, dtype=x.dtype)
        self.xp.copyto(staging, x)
        return staging

    # the collectives ---------------------------------------------------------------------------------
    def all_gather(self, x: Any, out: Any, axis: int, received: Any | None = None, sent: Any | None = None) -> Any:
        """Every rank's ``x`` (the same shape on each) side by side along ``axis``, in rank order, into ``out``
        (C-contiguous). ``received``: a ``(ranks, *x.shape)`` staging buffer, used where ``axis`` is not the
        leading one; ``sent``: where ``x`` is not contiguous."""
        xp, pointer, ranks = self.xp, self.nccl.runtime.pointer, self.size
        piece = self._contiguous(x, sent)
        leading = all(d == 1 for d in x.shape[:axis])  # rank-major memory is then the order along axis already
        if not leading and received is None:
            received = xp.empty((ranks, *x.shape), dtype=x.dtype)
        target = out if leading else received
        count, datatype = self._bytes(piece)
        stream, compute = self._begin()
        self.nccl.comm.allGather(pointer(piece), pointer(target), count, datatype, stream)
        self._end(compute)
        if not leading:
            shape = x.shape
            xp.copyto(out.reshape((*shape[:axis], ranks, *shape[axis:])), xp.moveaxis(received, 0, axis))
        return out

    def all_gather_counts(self, x: Any, out: Any, axis: int, counts: list[int], sent: Any, received: Any) -> Any:
        """``all_gather`` where rank r holds ``counts[r]`` rows along ``axis`` (a batch that does not divide
        evenly): NCCL's allGather takes equal pieces, so it is a group of broadcasts, one from each rank. ``sent``:
        ``x`` with ``axis`` moved first (this rank's rows, contiguous); ``received``: every rank's, rank-major."""
        xp, pointer, module = self.xp, self.nccl.runtime.pointer, self.nccl.runtime.nccl
        xp.copyto(sent, xp.moveaxis(x, axis, 0))
        row = int(received.nbytes) // max(sum(counts), 1)
        start_sent, start_received = pointer(sent), pointer(received)
        stream, compute = self._begin()
        module.groupStart()
        try:
            offset = 0
            for root, rows in enumerate(counts):
                self.nccl.comm.broadcast(start_sent, start_received + offset, rows * row, module.NCCL_UINT8, root,
                                         stream)
                offset += rows * row
        finally:
            module.groupEnd()
        self._end(compute)
        xp.copyto(out, xp.moveaxis(received, 0, axis))
        return out

    def reduce_scatter(self, x: Any, out: Any, axis: int, sent: Any | None = None) -> Any:
        """The sum over ranks of ``x``, of which this rank keeps block ``rank`` of ``ranks`` along ``axis``, into
        ``out`` (C-contiguous). ``sent``: a ``(ranks, *out.shape)`` staging buffer, used where ``axis`` is not the
        leading one or ``x`` is not contiguous."""
        xp, pointer, ranks = self.xp, self.nccl.runtime.pointer, self.size
        leading = all(d == 1 for d in x.shape[:axis])
        if leading and x.flags.c_contiguous:
            piece = x
        else:
            piece = sent if sent is not None else xp.empty((ranks, *out.shape), dtype=x.dtype)
            shape = x.shape
            blocks = x.reshape((*shape[:axis], ranks, shape[axis] // ranks, *shape[axis + 1:]))
            xp.copyto(piece, xp.moveaxis(blocks, axis, 0))
        datatype = self._summed(x.dtype)
        stream, compute = self._begin()
        self.nccl.comm.reduceScatter(pointer(piece), pointer(out), int(out.size), datatype,
                                     self.nccl.runtime.nccl.NCCL_SUM, stream)
        self._end(compute)
        return out

    def all_reduce(self, buffer: Any, op: str = "sum") -> Any:
        """``buffer`` (C-contiguous) summed (``op`` "sum") or maximized ("max") over ranks, in place."""
        module = self.nccl.runtime.nccl
        datatype = self._summed(buffer.dtype)
        address = self.nccl.runtime.pointer(buffer)
        stream, compute = self._begin()
        self.nccl.comm.allReduce(address, address, int(buffer.size), datatype,
                                 module.NCCL_SUM if op == "sum" else module.NCCL_MAX, stream)
        self._end(compute)
        return buffer

    def broadcast(self, x: Any, out: Any, root: int = 0) -> Any:
        """Rank ``root``'s ``x`` into ``out`` (C-contiguous, ``x``'s shape and dtype) on every rank."""
        pointer = self.nccl.runtime.pointer
        piece = self._contiguous(x, None)
        count, datatype = self._bytes(out)
        stream, compute = self._begin()
        self.nccl.comm.broadcast(pointer(piece), pointer(out), count, datatype, root, stream)
        self._end(compute)
        return out

    def all_to_all(self, x: Any, out: Any, split_axis: int, concat_axis: int, sent: Any | None = None,
                   received: Any | None = None) -> Any:
        """Block j of ``x`` along ``split_axis`` (of ``ranks`` equal blocks) goes to rank j; the blocks received
        from ranks 0, 1, ... lie side by side along ``concat_axis`` in ``out`` (C-contiguous). One NCCL group of a
        send and a receive per rank; ``sent`` and ``received``: ``(ranks, *block)`` staging buffers."""
        xp, pointer, ranks, module = self.xp, self.nccl.runtime.pointer, self.size, self.nccl.runtime.nccl
        shape = x.shape
        block = (*shape[:split_axis], shape[split_axis] // ranks, *shape[split_axis + 1:])
        sent = sent if sent is not None else xp.empty((ranks, *block), dtype=x.dtype)
        received = received if received is not None else xp.empty((ranks, *block), dtype=x.dtype)
        blocks = x.reshape((*shape[:split_axis], ranks, shape[split_axis] // ranks, *shape[split_axis + 1:]))
        xp.copyto(sent, xp.moveaxis(blocks, split_axis, 0))
        count, datatype = self._bytes(sent[0])
        start_sent, start_received = pointer(sent), pointer(received)
        stream, compute = self._begin()
        module.groupStart()
        try:
            for peer in range(ranks):
                self.nccl.comm.send(start_sent + peer * count, count, datatype, peer, stream)
                self.nccl.comm.recv(start_received + peer * count, count, datatype, peer, stream)
        finally:
            module.groupEnd()
        self._end(compute)
        joined = out.reshape((*block[:concat_axis], ranks, *block[concat_axis:]))
        xp.copyto(joined, xp.moveaxis(received, 0, concat_axis))
        return out


def _device(run: Callable[..., Any]) -> Kernel:
    """A kernel recorded with the step's graph although its op is ``ordered``: it keeps to the device, on the
    communication stream, in the step's order (``flowjob_core.ir.kernel.runs_live``)."""
    return Kernel(run, host_state=False)


def _boxing(ctx: KernelContext, nccl: Nccl, kind: str) -> DeviceBoxing:
    return DeviceBoxing(nccl, ctx.xp, f"the NCCL {kind} of node {ctx.node_name!r}")


# the boxing ops' kernels on the NCCL path (flowjob_mpi.ops dispatches to them) ---------------------------

def gather_kernel(ctx: KernelContext, nccl: Nccl) -> Kernel:
    """``mpi_allgather`` (attrs axis, counts: each rank's rows along axis) on the device."""
    axis, counts = ctx.attrs["axis"], list(ctx.attrs["counts"])
    if len(counts) != nccl.size:
        raise MpiError(f"node {ctx.node_name!r}: {len(counts)} counts for {nccl.size} ranks")
    boxing = _boxing(ctx, nccl, "all-gather")
    spec, out_spec, xp = ctx.inputs[0], ctx.outputs[0], ctx.xp
    out = ctx.out(0)
    if len(set(counts)) > 1:  # uneven rows (a data-parallel batch's returned values): a group of broadcasts
        moved = (spec.shape[axis], *spec.shape[:axis], *spec.shape[axis + 1:])
        sent = xp.empty(moved, spec.dtype)
        received = xp.empty((out_spec.shape[axis], *moved[1:]), spec.dtype)
        return _device(lambda x: boxing.all_gather_counts(x, out, axis, counts, sent, received))
    received = None if all(d == 1 for d in spec.shape[:axis]) else xp.empty((nccl.size, *spec.shape), spec.dtype)
    sent = xp.empty(spec.shape, spec.dtype)  # used only where the input is a view that is not contiguous
    return _device(lambda x: boxing.all_gather(x, out, axis, received, sent))


def reduce_scatter_kernel(ctx: KernelContext, nccl: Nccl) -> Kernel:
    """``mpi_reduce_scatter`` (attrs axis, ranks) on the device."""
    axis = ctx.attrs["axis"]
    boxing = _boxing(ctx, nccl, "reduce-scatter")
    out_spec = ctx.outputs[0]
    sent = ctx.xp.empty((nccl.size, *out_spec.shape), out_spec.dtype)
    boxing._summed(out_spec.dtype)  # a dtype NCCL cannot sum is refused when the plan is built
    out = ctx.out(0)
    return _device(lambda x: boxing.reduce_scatter(x, out, axis, sent))


def allreduce_kernel(ctx: KernelContext, nccl: Nccl) -> Kernel:
    """``mpi_allreduce`` (attr weight; several inputs: one bucket, one NCCL call) on the device."""
    xp = ctx.xp
    dtype = ctx.inputs[0].dtype
    weight = dtype.type(ctx.attrs["weight"])
    boxing = _boxing(ctx, nccl, "all-reduce")
    boxing._summed(dtype)
    outs = [ctx.out(i) for i in range(len(ctx.outputs))]
    if len(outs) == 1:
        out = outs[0]

        def run_one(x: Any) -> Any:
            if weight == 1:
                xp.copyto(out, x)
            else:
                xp.multiply(x, weight, out=out)
            return boxing.all_reduce(out)

        return _device(run_one)
    offsets = np.cumsum([0] + [x.size for x in ctx.inputs]).tolist()
    bucket = xp.empty(offsets[-1], dtype=dtype)
    pieces = [bucket[offsets[i]:offsets[i + 1]].reshape(x.shape) for i, x in enumerate(ctx.inputs)]

    def run(*xs: Any) -> Any:
        for piece, x in zip(pieces, xs):
            xp.multiply(x, weight, out=piece)
        boxing.all_reduce(bucket)
        for out, piece in zip(outs, pieces):
            xp.copyto(out, piece)
        return tuple(outs)

    return _device(run)


def all_to_all_kernel(ctx: KernelContext, nccl: Nccl) -> Kernel:
    """``mpi_all_to_all`` (attrs split_axis, concat_axis, ranks: block j of this rank's piece along split_axis
    goes to rank j, the blocks received lie side by side along concat_axis) on the device."""
    split_axis, concat_axis = ctx.attrs["split_axis"], ctx.attrs["concat_axis"]
    spec = ctx.inputs[0]
    block = list(spec.shape)
    block[split_axis] //= nccl.size
    sent = ctx.xp.empty((nccl.size, *block), spec.dtype)
    received = ctx.xp.empty((nccl.size, *block), spec.dtype)
    boxing = _boxing(ctx, nccl, "all-to-all")
    out = ctx.out(0)
    return _device(lambda x: boxing.all_to_all(x, out, split_axis, concat_axis, sent, received))



def class_split_softmax_kernel(ctx: KernelContext, nccl: Nccl) -> Kernel:
    """``mpi_sparse_softmax_cross_entropy_class_split`` (flowjob_mpi.class_split) on the device: the row maxima
    all-reduced with ``NCCL_MAX``, the sums of ``exp(x - max)`` and the rows' losses with ``NCCL_SUM``, each into a
    buffer made once; the label's class is picked on the device (no read back of labels or counts)."""
    xp = ctx.xp
    start, stop = ctx.attrs["shard_start"], ctx.attrs["shard_stop"]
    classes = ctx.inputs[1].shape[-1]
    rows = int(np.prod(ctx.inputs[0].shape, dtype=np.int64))
    dtype = ctx.inputs[1].dtype
    boxing = _boxing(ctx, nccl, "class-split softmax")
    boxing._summed(dtype)
    peak, total, loss = (xp.empty(rows, dtype=dtype) for _ in range(3))
    index = xp.arange(rows)
    loss_out, prob_out = ctx.out(0), ctx.out(1)

    def run(labels: Any, logits: Any) -> tuple[Any, Any]:
        x = logits.reshape(rows, classes)
        label = labels.reshape(rows)
        xp.copyto(peak, x.max(axis=1))
        boxing.all_reduce(peak, "max")
        shifted = x - peak[:, None]
        prob = xp.exp(shifted)
        xp.copyto(total, prob.sum(axis=1))
        boxing.all_reduce(total)
        prob /= total[:, None]
        held = (label >= start) & (label < stop)
        picked = shifted[index, xp.where(held, label - start, 0)]
        xp.copyto(loss, xp.where(held, xp.log(total) - picked, 0).astype(dtype))
        boxing.all_reduce(loss)
        xp.copyto(loss_out, loss.reshape(loss_out.shape))
        xp.copyto(prob_out, prob.reshape(prob_out.shape))
        return loss_out, prob_out

    return _device(run)
