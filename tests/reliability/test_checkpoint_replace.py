"""Safe replacement of a checkpoint: ``save(path, overwrite=True)`` through both swaps, a kill between
the fallback's two renames, and the removal of what killed saves left (only when the writer is gone)."""
import errno
import logging
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core import CheckpointError, get_default_session
from flowjob_core.checkpoint import atomic_replace as checkpoint_files

SHAPE = (3, 4)


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


def define_job():
    @flow.global_function(type="predict")
    def scale(x: tp.Numpy.Placeholder(SHAPE)) -> tp.Numpy:
        w = flow.get_variable("w", shape=SHAPE, initializer=flow.constant_initializer(1.0))
        b = flow.get_variable("b", shape=(4,), initializer=flow.constant_initializer(0.0))
        return x * w + b

    return scale


def set_values(value: float) -> None:
    flow.load_variables({"w": np.full(SHAPE, value, np.float32), "b": np.full((4,), value, np.float32)})


def saved_value(path) -> float:
    values = flow.checkpoint.get(str(path))
    assert sorted(values) == ["b", "w"]
    found = {float(v) for v in np.unique(np.concatenate([a.ravel() for a in values.values()]))}
    assert len(found) == 1, found
    return found.pop()


def hidden(folder) -> list[str]:
    return sorted(e for e in os.listdir(folder) if e.startswith("."))


@pytest.mark.parametrize("swap", ["exchange", "fallback"])
def test_overwrite_replaces_a_checkpoint_and_leaves_nothing_beside(tmp_path, monkeypatch, swap):
    if swap == "fallback":
        monkeypatch.setattr(checkpoint_files, "exchange", lambda a, b: False)
    job = define_job()
    flow.train.CheckPoint().init()
    set_values(2.0)
    flow.train.CheckPoint().save(str(tmp_path / "m"))
    set_values(3.0)
    with pytest.raises(CheckpointError, match="not empty.*overwrite=True"):
        flow.train.CheckPoint().save(str(tmp_path / "m"))
    assert saved_value(tmp_path / "m") == 2.0
    flow.train.CheckPoint().save(str(tmp_path / "m"), overwrite=True)
    assert saved_value(tmp_path / "m") == 3.0
    set_values(4.0)
    flow.checkpoint.save(str(tmp_path / "m"), overwrite=True)
    assert saved_value(tmp_path / "m") == 4.0
    assert os.listdir(tmp_path) == ["m"]
    assert sorted(os.listdir(tmp_path / "m")) == ["b", "snapshot_done", "w"]
    set_values(0.0)
    flow.train.CheckPoint().load(str(tmp_path / "m"))
    np.testing.assert_array_equal(job(np.ones(SHAPE, np.float32)), np.full(SHAPE, 8.0, np.float32))


def test_overwrite_never_replaces_a_folder_that_is_not_a_checkpoint(tmp_path):
    define_job()
    flow.train.CheckPoint().init()
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    with pytest.raises(CheckpointError, match="'.*mine' with overwrite=True: the folder is not a checkpoint"):
        flow.train.CheckPoint().save(str(tmp_path / "mine"), overwrite=True)
    assert os.listdir(tmp_path / "mine") == ["notes.txt"]
    (tmp_path / "file").write_text("x")
    with pytest.raises(CheckpointError, match="'.*file': it exists and is not a folder"):
        flow.checkpoint.save(str(tmp_path / "file"), overwrite=True)
    assert hidden(tmp_path) == []


def test_an_error_between_the_fallback_renames_puts_the_old_checkpoint_back(tmp_path, monkeypatch):
    define_job()
    flow.train.CheckPoint().init()
    set_values(2.0)
    flow.train.CheckPoint().save(str(tmp_path / "m"))
    set_values(3.0)
    monkeypatch.setattr(checkpoint_files, "exchange", lambda a, b: False)
    real_replace = os.replace

    def failing_second_rename(src, dst):
        if str(src).endswith(".tmp") and not os.path.lexists(dst):
            raise OSError(5, "Input/output error")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", failing_second_rename)
    with pytest.raises(CheckpointError, match="saving the checkpoint .* failed.*Input/output error.*is unchanged"):
        flow.train.CheckPoint().save(str(tmp_path / "m"), overwrite=True)
    monkeypatch.undo()
    assert os.listdir(tmp_path) == ["m"]
    assert saved_value(tmp_path / "m") == 2.0


# a child saving with the fallback swap that dies (os._exit: no cleanup runs) right after the first rename
KILLED_BETWEEN_RENAMES = textwrap.dedent("""
    import os, sys
    import numpy as np
    from flowjob_core import BlobSpec
    from flowjob_core.checkpoint import save_load as ckpt
    from flowjob_core.checkpoint import atomic_replace as checkpoint_files
    from flowjob_core.runtime.session import Session

    checkpoint_files.exchange = lambda a, b: False
    real_fsync_dir = checkpoint_files.fsync_dir

    def die_once_set_aside(path):
        real_fsync_dir(path)
        if any(e.endswith(".old") for e in os.listdir(path)):
            os._exit(0)

    session = Session()
    session.variables.declare("w", BlobSpec((3, 4), np.float32), lambda s, d, r: np.full(s, 9.0, d))
    session.variables.declare("b", BlobSpec((4,), np.float32), lambda s, d, r: np.full(s, 9.0, d))
    checkpoint_files.fsync_dir = die_once_set_aside
    ckpt.save(sys.argv[1], session, overwrite=True)
    sys.exit("the save finished: the child was not killed between the renames")
""")


def killed_between_renames(tmp_path) -> subprocess.CompletedProcess:
    define_job()
    flow.train.CheckPoint().init()
    set_values(2.0)
    flow.train.CheckPoint().save(str(tmp_path / "m"))
    env = {**os.environ, "FLOWJOB_DISABLE_PLUGIN_AUTOLOAD": "1"}
    proc = subprocess.run([sys.executable, "-c", KILLED_BETWEEN_RENAMES, str(tmp_path / "m")], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    entries = os.listdir(tmp_path)
    assert "m" not in entries and len(entries) == 2, entries  # only the .tmp (new) and the .old (old)
    return proc


def test_a_kill_between_the_fallback_renames_is_recovered_by_the_next_load(tmp_path, caplog):
    killed_between_renames(tmp_path)
    caplog.set_level(logging.WARNING, logger="flowjob.checkpoint")
    set_values(0.0)
    flow.train.CheckPoint().load(str(tmp_path / "m"))  # the new checkpoint is complete: it is renamed in
    store = get_default_session().variables
    np.testing.assert_array_equal(store.get("w"), np.full(SHAPE, 9.0, np.float32))
    assert os.listdir(tmp_path) == ["m"]
    messages = [r.getMessage() for r in caplog.records if r.name == "flowjob.checkpoint"]
    assert any("was missing" in m and "restored the complete new checkpoint" in m for m in messages), messages
    assert any(m.startswith("removed what an interrupted checkpoint save of") and ".old" in m for m in messages)


def test_a_load_while_the_writer_is_alive_between_the_renames_reads_the_old_one(tmp_path, monkeypatch):
    killed_between_renames(tmp_path)
    monkeypatch.setattr(checkpoint_files, "_writer_gone", lambda pid, start, host: False)  # as if still running
    set_values(0.0)
    flow.train.CheckPoint().load(str(tmp_path / "m"))
    np.testing.assert_array_equal(get_default_session().variables.get("w"), np.full(SHAPE, 2.0, np.float32))
    assert len(os.listdir(tmp_path)) == 2 and "m" not in os.listdir(tmp_path)  # nothing of a live writer touched


# a child that dies halfway through writing the variables of a save
KILLED_MIDWAY = textwrap.dedent("""
    import os, sys
    import numpy as np
    from flowjob_core import BlobSpec
    from flowjob_core.checkpoint import save_load as ckpt
    from flowjob_core.runtime.session import Session

    session = Session()
    for i in range(6):
        session.variables.declare(f"v{i}", BlobSpec((1000,), np.float32))
    real_write, written = ckpt._write, []

    def die_midway(path, data):
        real_write(path, data)
        written.append(path)
        if len(written) == 5:
            os._exit(0)

    ckpt._write = die_midway
    ckpt.save(sys.argv[1], session, overwrite=True)
""")


def test_stale_folders_of_a_dead_writer_are_removed_and_logged(tmp_path, caplog):
    env = {**os.environ, "FLOWJOB_DISABLE_PLUGIN_AUTOLOAD": "1"}
    subprocess.run([sys.executable, "-c", KILLED_MIDWAY, str(tmp_path / "a")], env=env, check=True, timeout=120)
    first = hidden(tmp_path)
    assert len(first) == 1 and first[0].startswith(".a.") and first[0].endswith(".tmp"), first
    # the next save in the folder, by another process, removes it before dying the same way
    proc = subprocess.run([sys.executable, "-c", KILLED_MIDWAY, str(tmp_path / "b")], env=env, check=True,
                          timeout=120, capture_output=True, text=True)
    assert f"removed what an interrupted checkpoint save of {tmp_path / 'a'} left: {first[0]}" in proc.stderr
    stale = hidden(tmp_path)
    assert len(stale) == 1 and stale[0].startswith(".b.") and stale[0].endswith(".tmp"), stale
    # a save in progress of this (live) process, another host's, and an older flowjob's: kept
    live = checkpoint_files.begin(str(tmp_path / "c"))
    other_host = tmp_path / ".d.0123abcd-1-0-ffffffff.tmp"
    other_host.mkdir()
    legacy = tmp_path / ".e.k3j2h1g0.tmp"
    legacy.mkdir()
    caplog.set_level(logging.WARNING, logger="flowjob.checkpoint")
    define_job()
    flow.train.CheckPoint().init()
    flow.train.CheckPoint().save(str(tmp_path / "new"))
    left = hidden(tmp_path)
    assert left == sorted([os.path.basename(live.path("tmp")), other_host.name, legacy.name])
    messages = [r.getMessage() for r in caplog.records if r.name == "flowjob.checkpoint"]
    removed = [m for m in messages if m.startswith("removed what an interrupted checkpoint save")]
    assert len(removed) == 1 and f"save of {tmp_path / 'b'} left: {stale[0]} (" in removed[0], removed
    assert all("bytes); its writer, pid" in m and "is gone" in m for m in removed)
    assert sum(legacy.name in m and "not removed" in m for m in messages) == 1
    flow.train.CheckPoint().load(str(tmp_path / "new"))  # reported once per process, not on every load
    messages = [r.getMessage() for r in caplog.records if r.name == "flowjob.checkpoint"]
    assert sum(legacy.name in m for m in messages) == 1
    checkpoint_files.finish(live)
    assert hidden(tmp_path) == sorted([other_host.name, legacy.name])


def test_a_file_on_the_way_is_a_checkpoint_error(tmp_path):
    define_job()
    flow.train.CheckPoint().init()
    (tmp_path / "a_file").write_text("x")
    with pytest.raises(CheckpointError, match="'.*a_file/sub'.*'.*a_file' is a file, not a folder"):
        flow.train.CheckPoint().save(str(tmp_path / "a_file" / "sub"))
    with pytest.raises(CheckpointError, match="a_file' is a file, not a folder"):
        flow.checkpoint.save(str(tmp_path / "a_file" / "deeper" / "sub"), overwrite=True)
    assert os.listdir(tmp_path) == ["a_file"]
    flow.train.CheckPoint().save(str(tmp_path / "ok"))  # the session goes on


@pytest.mark.parametrize("code, says", [
    (errno.ENOSPC, "the file system holding '{parent}' is full"),
    (errno.EROFS, "'{parent}' is on a read-only file system"),
])
def test_a_save_failing_on_the_file_system_names_the_target_and_keeps_the_old(tmp_path, monkeypatch, code, says):
    from flowjob_core.checkpoint import save_load as ckpt_module

    flow.clear_default_session()

    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        return x * flow.get_variable("w", shape=(100, 2), initializer=flow.ones_initializer())[0]

    target = str(tmp_path / "ckpt")
    flow.checkpoint.save(target)
    real_write = ckpt_module._write

    def failing(path, data):
        if path.endswith("out"):
            raise OSError(code, os.strerror(code), path)
        return real_write(path, data)

    monkeypatch.setattr(ckpt_module, "_write", failing)
    with pytest.raises(CheckpointError) as excinfo:
        flow.checkpoint.save(target, overwrite=True)
    message = str(excinfo.value)
    assert says.format(parent=str(tmp_path)) in message and f"'{target}' is unchanged" in message
    assert ".tmp" not in message  # the hidden folder is not what the user asked about
    assert sorted(os.listdir(tmp_path)) == ["ckpt"]  # nothing left beside it
    monkeypatch.undo()
    np.testing.assert_array_equal(flow.checkpoint.get(target)["w"].numpy(), np.ones((100, 2), np.float32))
    flow.clear_default_session()


def test_a_read_only_folder_is_named_when_the_save_cannot_even_start(tmp_path, monkeypatch):
    from flowjob_core.checkpoint import atomic_replace as checkpoint_files

    flow.clear_default_session()

    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        return x * flow.get_variable("w", shape=(2,), initializer=flow.ones_initializer())

    def read_only(target):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(tmp_path / ".ckpt.x.tmp"))

    monkeypatch.setattr(checkpoint_files, "begin", read_only)
    target = str(tmp_path / "ckpt")
    with pytest.raises(CheckpointError, match=rf"cannot save the checkpoint '{target}': '{tmp_path}' is on a "
                                              rf"read-only file system; '{target}' is unchanged"):
        flow.checkpoint.save(target)
    flow.clear_default_session()
