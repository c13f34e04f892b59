"""The record stream behind an ``ofrecord_reader`` node: sharded, seeded, looping over epochs, read ahead.

A ``Reader`` indexes its shard's part files once (headers only), then a background thread walks the
records epoch after epoch, shuffles them as asked, parses each batch and runs the registered
decoders on it, and puts the finished batch into a bounded queue. The step only takes the next batch,
so reading and decoding overlap compute. The thread stops when the reader is closed or dropped (its
plan given up), when the session that traced it closes, and at interpreter exit; it never blocks
longer than ``POLL`` seconds without checking.
"""
from __future__ import annotations

import atexit
import queue
import threading
import weakref
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence, TypeVar

import numpy as np

from flowjob_core.runtime.session import finish_all_sessions
from flowjob_core.runtime.world import world_of

from flowjob_ofrecord.errors import OFRecordError
from flowjob_ofrecord.files import RecordRef, index_file, parse, part_paths, read_payload
from flowjob_ofrecord.onerec_format import index_onerec_file, parse_example, read_onerec_payload
from flowjob_ofrecord.record_pb2 import OFRecord

POLL = 0.1
# decoder(records, refs, decoded) -> the batch's values: an array, or a list of arrays of differing shapes
# (decoded images); ``decoded`` holds what the decoders registered before it made of the same batch
Decoder = Callable[[list[OFRecord], list[RecordRef], dict[str, Any]], Any]


def shard(session: Any) -> tuple[int, int]:
    """This process's (rank, world) for sharding a reader traced in ``session``: the world its
    ``flowjob_world`` plugin describes (flowjob-mpi's MPI world), else (0, 1)."""
    world = world_of(session)
    rank, size = world.rank, world.size
    if not (isinstance(rank, int) and isinstance(size, int) and 0 <= rank < size):
        raise OFRecordError(f"the flowjob_world hook gave rank={rank!r}, size={size!r}; need 0 <= rank < size")
    return rank, size


def onerec_paths(files: Sequence[str], op: str) -> list[Path]:
    """A OneRec reader's files, checked to exist (an ``OFRecordError`` naming the missing ones)."""
    if not files:
        raise OFRecordError(f"{op}: files is empty (legacy Wide&Deep globs '<dir>/*.onerec': is the folder right?)")
    paths = [Path(f) for f in files]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise OFRecordError(f"{op}: OneRec file(s) {missing[:8]} do not exist")
    return paths


@dataclass(frozen=True)
class ReaderConfig:
    op: str
    data_dir: str
    data_part_num: int
    batch_size: int  # records per step in this process (the legacy batch_size over world)
    part_name_prefix: str = "part-"
    part_name_suffix_length: int = -1
    random_shuffle: bool = False
    shuffle_buffer_size: int = 1024
    shuffle_after_epoch: bool = False
    seed: int | None = None
    rank: int = 0
    world: int = 1
    # a OneRec reader (onerec_reader) lists its files instead of naming a folder of parts
    files: tuple[str, ...] = ()
    format: str = "ofrecord"  # or "onerec"
    shuffle_mode: str = "instance"  # onerec: "batch" shuffles whole batches of consecutive records

    def shard_parts(self) -> tuple[list[Path], list[Path]]:
        """The part files before this rank's and this rank's own (a contiguous range, as legacy split the
        parts over devices); record ids count from the folder's first record."""
        if self.format == "onerec":
            paths = onerec_paths(self.files, self.op)
        else:
            paths = part_paths(self.data_dir, self.data_part_num, self.part_name_prefix,
                               self.part_name_suffix_length)
        if self.world > len(paths):
            raise OFRecordError(f"{self.op}: {len(paths)} part file(s) cannot be shared by {self.world} processes")
        lo, hi = self.rank * len(paths) // self.world, (self.rank + 1) * len(paths) // self.world
        return paths[:lo], paths[lo:hi]


@dataclass
class Batch:
    refs: list[RecordRef]
    ids: np.ndarray
    decoded: dict[str, Any] = field(default_factory=dict)


class _Stop(Exception):
    pass


class Reader:
    """One reader node's stream of batches; decoders register before the first ``next()``."""

    def __init__(self, config: ReaderConfig, alive: Callable[[], bool] = lambda: True, prefetch: int = 2) -> None:
        self.config = config
        self.decoders: dict[str, Decoder] = {}
        self.current: Batch | None = None
        self._alive = alive
        self._queue: queue.Queue = queue.Queue(maxsize=max(1, prefetch))
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        # indexing happens here, when the plan is built, so a truncated file fails before any step
        before, parts = config.shard_parts()
        index = index_onerec_file if config.format == "onerec" else index_file
        self._refs = [index(p) for p in parts]
        self._first_id = sum(len(index(p)) for p in before)
        if not any(self._refs):
            raise OFRecordError(f"{config.op}: the part files {[str(p) for p in parts]} hold no record")
        self._finalizer = weakref.finalize(self, self._stop.set)
        self._finalizer.atexit = False  # at exit _close_all stops it, once the sessions finished their steps
        _register_exit_handler()
        _LIVE.add(self)

    def add_decoder(self, key: str, decoder: Decoder) -> None:
        if self._thread is not None:
            raise RuntimeError(f"{self.config.op}: decoder {key!r} registered after reading started")
        self.decoders[key] = decoder

    def next(self) -> Batch:
        """The next batch (raises the error that stopped the stream, every time it is asked again)."""
        if self._error is not None:
            raise self._error
        if self._thread is None:
            self._thread = threading.Thread(
                target=_produce, name=f"flowjob-ofrecord {self.config.op}", daemon=True,
                args=(self.config, self._refs, self._first_id, dict(self.decoders), self._queue, self._stop,
                      self._alive))
            self._thread.start()
        while True:
            try:
                item = self._queue.get(timeout=POLL)
                break
            except queue.Empty:
                if not self._thread.is_alive() and self._queue.empty():
                    self._error = OFRecordError(f"{self.config.op}: the reader thread stopped")
                    raise self._error from None
        if isinstance(item, BaseException):
            self._error = item
            raise item
        self.current = item
        return item

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def close(self, timeout: float = 5.0) -> None:
        """Stop the thread and wait for it (at most ``timeout`` seconds)."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)


_LIVE: "weakref.WeakSet[Reader]" = weakref.WeakSet()
_exit_handler_registered = False


def _register_exit_handler() -> None:
    """Register ``_close_all`` once, with the first reader rather than at import."""
    global _exit_handler_registered
    if not _exit_handler_registered:
        atexit.register(_close_all)
        _exit_handler_registered = True


def _close_all() -> None:
    # steps a program launched asynchronously (async_get) just before it ended still read from these
    # readers, so the sessions finish them first (flowjob-core's own exit handler, which would do so,
    # may run after this one: handlers run last-registered first)
    finish_all_sessions()
    for reader in list(_LIVE):
        reader.close(timeout=1.0)


def _record_order(config: ReaderConfig, refs: list[list[RecordRef]], first_id: int,
                  rng: np.random.Generator) -> Iterator[tuple[int, RecordRef]]:
    """(id, ref) forever: the shard's parts in order (reordered every epoch with shuffle_after_epoch),
    records in file order, through a shuffle buffer with random_shuffle."""
    starts = np.cumsum([0] + [len(r) for r in refs])[:-1] + first_id

    def epochs() -> Iterator[tuple[int, RecordRef]]:
        while True:
            order = rng.permutation(len(refs)) if config.shuffle_after_epoch else range(len(refs))
            for p in order:
                for k, ref in enumerate(refs[p]):
                    yield int(starts[p]) + k, ref

    stream = epochs()
    if not config.random_shuffle:
        yield from stream
        return
    yield from _shuffled(stream, config.shuffle_buffer_size, rng)


T = TypeVar("T")


def _shuffled(stream: Iterator[T], size: int, rng: np.random.Generator) -> Iterator[T]:
    """A buffer of ``size`` items: emit a random one, put the next item in its place."""
    buffer = [next(stream) for _ in range(max(1, size))]
    while True:
        i = int(rng.integers(len(buffer)))
        yield buffer[i]
        buffer[i] = next(stream)


def _batches(config: ReaderConfig, refs: list[list[RecordRef]], first_id: int,
             rng: np.random.Generator) -> Iterator[list[tuple[int, RecordRef]]]:
    """Batches of (id, ref); OneRec's shuffle_mode="batch" shuffles batches of consecutive records through a
    buffer of shuffle_buffer_size batches instead of shuffling records."""
    if config.random_shuffle and config.shuffle_mode == "batch":
        plain = _record_order(replace(config, random_shuffle=False), refs, first_id, rng)
        consecutive = iter(lambda: [next(plain) for _ in range(config.batch_size)], None)
        yield from _shuffled(consecutive, config.shuffle_buffer_size, rng)
        return
    order = _record_order(config, refs, first_id, rng)
    while True:
        yield [next(order) for _ in range(config.batch_size)]


def _produce(config: ReaderConfig, refs: list[list[RecordRef]], first_id: int, decoders: dict[str, Decoder],
             out: queue.Queue, stop: threading.Event, alive: Callable[[], bool]) -> None:
    rng = np.random.default_rng(config.seed)  # None: fresh entropy, as legacy without a seed
    handles: dict[Path, object] = {}
    onerec = config.format == "onerec"
    try:
        for picked in _batches(config, refs, first_id, rng):
            batch_refs = [ref for _, ref in picked]
            records = []
            for ref in batch_refs:
                handle = handles.get(ref.path)
                if handle is None:
                    handle = handles[ref.path] = open(ref.path, "rb")
                if onerec:
                    records.append(parse_example(read_onerec_payload(handle, ref), ref))
                else:
                    records.append(parse(read_payload(handle, ref), ref))
            batch = Batch(batch_refs, np.array([i for i, _ in picked], dtype=np.int64))
            for key, decode in decoders.items():
                batch.decoded[key] = decode(records, batch_refs, batch.decoded)
            _put(out, batch, stop, alive)
    except _Stop:
        pass
    except BaseException as exc:  # handed to the step that asks next, which raises it
        try:
            _put(out, exc, stop, alive)
        except _Stop:
            pass
    finally:
        for handle in handles.values():
            handle.close()  # type: ignore[attr-defined]


def _put(out: queue.Queue, item: object, stop: threading.Event, alive: Callable[[], bool]) -> None:
    while True:
        if stop.is_set() or not alive():
            raise _Stop
        try:
            out.put(item, timeout=POLL)
            return
        except queue.Full:
            continue
