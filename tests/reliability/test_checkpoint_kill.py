"""kill -9 during ``save(path, overwrite=True)``: a subprocess re-saves one checkpoint in a loop and is
killed at a random instant; the target is then always a complete checkpoint, the old or the new one,
and the next load removes what the killed save left beside it."""
import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from flowjob_core import BlobSpec
from flowjob_core.checkpoint import save_load as ckpt
from flowjob_core.runtime.session import Session

VARIABLES = 48  # many small files: a save lasts long enough for the kill to land inside it
SHAPE = (64,)

CHILD = textwrap.dedent("""
    import sys
    import numpy as np
    from flowjob_core import BlobSpec
    from flowjob_core.checkpoint import save_load as ckpt
    from flowjob_core.checkpoint import atomic_replace as checkpoint_files
    from flowjob_core.runtime.session import Session

    target, mode, generation = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if mode == "fallback":  # the two-rename swap of systems without renameat2(RENAME_EXCHANGE)
        checkpoint_files.exchange = lambda a, b: False
    session = Session()
    for i in range({variables}):
        session.variables.declare(f"v{{i:03d}}", BlobSpec({shape}, np.float32))
    print("ready", flush=True)
    while True:
        generation += 1
        for i in range({variables}):
            session.variables.assign(f"v{{i:03d}}", np.full({shape}, generation, np.float32))
        ckpt.save(target, session, overwrite=True)
        print(generation, flush=True)
""").format(variables=VARIABLES, shape=SHAPE)


def generation_of(target: str) -> int:
    """The one generation every variable of the checkpoint holds (get() also cleans up and recovers)."""
    values = ckpt.get(target)
    assert sorted(values) == [f"v{i:03d}" for i in range(VARIABLES)], f"variables lost: {sorted(values)}"
    found = {float(v) for value in values.values() for v in np.unique(value)}
    assert len(found) == 1, f"a checkpoint mixing generations {sorted(found)}"
    return int(found.pop())


def kill_during_save(target: str, mode: str, generation: int, rng: random.Random) -> int:
    """Run the saving loop, kill it at a random instant, return the last generation it finished."""
    env = {**os.environ, "FLOWJOB_DISABLE_PLUGIN_AUTOLOAD": "1"}
    child = subprocess.Popen([sys.executable, "-c", CHILD, target, mode, str(generation)], stdout=subprocess.PIPE,
                             env=env, text=True)
    first = ""
    try:
        assert child.stdout.readline().strip() == "ready"
        # one save finished first: on a slow disk (fsync of every file) a save outlasts the random delay below
        first = child.stdout.readline()
        time.sleep(rng.uniform(0.0, 0.4))
    finally:
        child.send_signal(signal.SIGKILL)
        out, _ = child.communicate(timeout=30)
    assert child.returncode == -signal.SIGKILL
    done = [int(line) for line in (first + out).split()]
    return done[-1] if done else generation


def first_checkpoint(target: str) -> None:
    session = Session()
    for i in range(VARIABLES):
        session.variables.declare(f"v{i:03d}", BlobSpec(SHAPE, np.float32), lambda s, d, r: np.zeros(s, d))
    ckpt.save(target, session)
    session.close()


# "default": the platform's swap (renameat2 exchange on Linux); "fallback": rename aside, rename in
@pytest.mark.parametrize("mode, trials", [("default", 20), ("fallback", 10)])
def test_kill_during_overwrite_leaves_the_old_or_the_new_checkpoint(tmp_path, mode, trials):
    rng = random.Random(1234)
    target = str(tmp_path / "model")
    first_checkpoint(target)
    generation = 0
    outcomes = set()
    for _ in range(trials):
        finished = kill_during_save(target, mode, generation, rng)
        found = generation_of(target)
        # the last save the child finished, or the one it was in when killed (if its swap was done)
        assert found in (finished, finished + 1), f"checkpoint of generation {found}, saves finished up to {finished}"
        outcomes.add("new" if found == finished + 1 else "old")
        assert os.listdir(tmp_path) == ["model"], f"leftovers not removed: {os.listdir(tmp_path)}"
        generation = found
    assert generation > 0, "the child never finished a save: the kills landed before any swap"
