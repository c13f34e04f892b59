"""flow.summary's ops and the tensorboard sink in a bare session (core + watch only): the event files are
read back record by record (TFRecord framing, tensorboardX's Event proto), as TensorBoard reads them."""
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from flowjob_watch.api import watch
from flowjob_watch.summary import (
    TensorBoardSink, create_summary_writer, flush_summary_writer, histogram, scalar, writer)


@pytest.fixture(autouse=True)
def no_writers():
    writer.close_all()
    yield
    writer.close_all()


def _events(folder: Path) -> list:
    from tensorboardX.proto import event_pb2
    (path,) = folder.glob("events.out.tfevents.*")
    data, pos, events = path.read_bytes(), 0, []
    while pos < len(data):
        (length,) = struct.unpack("<Q", data[pos:pos + 8])
        events.append(event_pb2.Event.FromString(data[pos + 12:pos + 12 + length]))
        pos += 12 + length + 4  # length, its crc, the record, its crc
    return events


def test_writer_ops_and_summary_ops_in_bare_jobs(define, kinds, tmp_path):
    def open_writer():
        create_summary_writer(str(tmp_path))

    def write(x: kinds.Array((4,)), v: kinds.Array((1,))):
        scalar(v, 5, "v")
        histogram(x, 5, "x")
        flush_summary_writer()

    define(open_writer)()
    define(write)(np.arange(4, dtype=np.float32), np.array([2.5], np.float32))
    first, *summaries = _events(tmp_path)
    assert first.file_version == "brain.Event:2"
    values = {v.tag: v for e in summaries for v in e.summary.value}
    assert {e.step for e in summaries} == {5}
    assert values["v"].simple_value == 2.5
    histo = values["x"].histo
    assert (histo.num, histo.min, histo.max, histo.sum) == (4, 0.0, 3.0, 6.0)


def test_tensorboard_sink_steps_and_kinds(define, kinds, tmp_path):
    sink = TensorBoardSink(tmp_path)

    def job(x: kinds.Array((3,)), v: kinds.Array((1,))):
        watch(x, sink)
        watch(v, sink)

    run = define(job)
    for k in range(3):
        run(np.full(3, k, np.float32), np.array([k * 2.0], np.float32))
    sink.flush()
    seen = [(e.step, v.tag, v.WhichOneof("value")) for e in _events(tmp_path)[1:] for v in e.summary.value]
    tags = run.ensure_traced().placeholders
    x_lbn, v_lbn = tags[0].lbn, tags[1].lbn
    assert seen == [(k, tag, kind) for k in range(3) for tag, kind in ((x_lbn, "histo"), (v_lbn, "simple_value"))]


def test_a_folder_has_one_writer_and_one_file(tmp_path):
    a, b = TensorBoardSink(tmp_path), TensorBoardSink(tmp_path / ".." / tmp_path.name)
    assert writer.writer_for(a.logdir) is writer.writer_for(b.logdir)
    assert len(list(tmp_path.glob("events.out.tfevents.*"))) == 1


def test_the_exit_handler_comes_with_the_first_writer_not_the_import(tmp_path):
    # the writer's own imports first (tensorboardX imports torch where it is installed, and torch registers handlers
    # of its own), so the count is the writer's handler alone
    program = ("import atexit, sys\n"
               "import tensorboardX.event_file_writer, tensorboardX.proto.event_pb2\n"
               "from flowjob_watch.summary import writer\n"
               "imported = atexit._ncallbacks()\n"
               "writer.writer_for(sys.argv[1])\n"
               "first = atexit._ncallbacks()\n"
               "writer.writer_for(sys.argv[2])\n"
               "print(imported, first, atexit._ncallbacks())\n")
    result = subprocess.run([sys.executable, "-c", program, str(tmp_path / "a"), str(tmp_path / "b")],
                            capture_output=True, text=True, timeout=120, check=True)
    imported, first, second = map(int, result.stdout.split())
    assert (first - imported, second - first) == (1, 0)
    assert len(list((tmp_path / "a").glob("events.out.tfevents.*"))) == 1
