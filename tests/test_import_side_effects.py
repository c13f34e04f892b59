"""Nothing is created at import: a fresh interpreter imports every module of every distribution, and no module
of the tree registers an exit handler, installs a signal handler or an exception hook, starts a thread, replaces
a module in ``sys.modules``, sets an environment variable, adds a logging handler, swaps a standard stream or
writes a file. Handlers and threads are registered by what a program does first (the first session, the first
summary writer, the first reader), never by an import."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from flowjob_core.testing import import_graph as _graph

REPO = Path(__file__).resolve().parents[1]
SOURCE_TREES = sorted(p for p in [*REPO.glob("packages/*/src"), *REPO.glob("kernels/src")] if p.is_dir())

# Runs in the fresh interpreter: argv[1] is a JSON list of (module, file); prints a JSON report.
PROBE = textwrap.dedent('''
    import atexit, importlib, json, logging, os, signal, sys, threading, types

    MODULES = json.loads(sys.argv[1])
    OURS = tuple(sorted({name.split(".")[0] for name, _ in MODULES}))

    def ours(module_name):
        return bool(module_name) and module_name.split(".")[0] in OURS

    def caller(depth=2):
        frame = sys._getframe(depth)
        while frame is not None and not ours(frame.f_globals.get("__name__", "")):
            frame = frame.f_back
        return frame.f_globals["__name__"] if frame is not None else None

    found = []
    importing = [None]

    def note(what):
        found.append({"import": importing[0], "what": what})

    real_register = atexit.register
    def register(func, *args, **kwargs):
        who = caller()
        if who is not None:
            note(f"{who} registered the exit handler {getattr(func, '__qualname__', func)!r}")
        return real_register(func, *args, **kwargs)
    atexit.register = register

    real_signal = signal.signal
    def install(signum, handler):
        who = caller()
        if who is not None:
            note(f"{who} installed a handler of signal {signum}")
        return real_signal(signum, handler)
    signal.signal = install

    real_start = threading.Thread.start
    def start(self):
        who = caller()
        if who is not None:
            note(f"{who} started the thread {self.name!r}")
        return real_start(self)
    threading.Thread.start = start

    hooks = (sys.excepthook, threading.excepthook, sys.stdout, sys.stderr, sys.stdin)
    environ = dict(os.environ)
    cwd = os.getcwd()

    def handlers():
        loggers = [logging.getLogger()] + [logging.getLogger(n) for n in list(logging.root.manager.loggerDict)
                                           if ours(n)]
        return {logger.name: len(logger.handlers) for logger in loggers}

    logging_before = handlers()
    left_out = []
    for name, path in MODULES:
        importing[0] = name
        before = {key: value for key, value in sys.modules.items() if ours(key)}
        try:
            importlib.import_module(name)
        except ImportError as exc:
            missing = getattr(exc, "name", None) or ""
            if missing and not ours(missing):  # an optional third-party dependency this environment lacks
                left_out.append(f"{name} (needs {missing})")
                continue
            raise
        module = sys.modules.get(name)
        spec = getattr(module, "__spec__", None)
        if type(module) is not types.ModuleType or spec is None or spec.name != name:
            note(f"sys.modules[{name!r}] is not the module imported from {path} (it replaced itself)")
        for key, value in before.items():
            if sys.modules.get(key) is not value:
                note(f"sys.modules[{key!r}] was replaced")
        if (sys.excepthook, threading.excepthook, sys.stdout, sys.stderr, sys.stdin) != hooks:
            note("an exception hook or a standard stream was replaced")
            hooks = (sys.excepthook, threading.excepthook, sys.stdout, sys.stderr, sys.stdin)
        if dict(os.environ) != environ:
            changed = sorted(set(os.environ.items()) ^ set(environ.items()))
            note(f"the environment changed: {changed}")
            environ = dict(os.environ)
        now = handlers()
        if now != {key: logging_before.get(key, 0) for key in now}:
            note(f"logging handlers were added: {now}")
            logging_before = now
        if os.listdir(cwd):
            note(f"files were written in the working folder: {sorted(os.listdir(cwd))}")
    print(json.dumps({"found": found, "left_out": left_out, "imported": len(MODULES) - len(left_out)}))
''')


def _importable(src: Path) -> list[tuple[str, str]]:
    return [(name, str(path)) for name, path in _graph.modules(src).items()
            if name.split(".")[-1] != "__main__"]  # a __main__ runs its program when imported


def _probe(modules: list[tuple[str, str]], cwd: Path) -> dict:
    result = subprocess.run([sys.executable, "-c", PROBE, json.dumps(modules)], cwd=cwd, capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0, f"importing the tree's modules failed:\n{result.stderr[-4000:]}"
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_importing_every_module_creates_nothing(tmp_path):
    modules = [entry for src in SOURCE_TREES for entry in _importable(src)]
    report = _probe(modules, tmp_path)
    assert not report["found"], "import-time side effects:\n" + "\n".join(
        f"importing {item['import']}: {item['what']}" for item in report["found"])
    assert report["imported"] > len(modules) // 2, f"most modules were left out: {report['left_out']}"


def test_the_probe_sees_each_kind_of_side_effect(tmp_path):
    src = tmp_path / "src"
    pkg = src / "flowjob_probe_sample"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "exits.py").write_text("import atexit\natexit.register(print)\n")
    (pkg / "threads.py").write_text("import threading\nthreading.Thread(target=print).start()\n")
    (pkg / "replaces.py").write_text("import sys, types\nsys.modules[__name__] = types.ModuleType(__name__)\n")
    (pkg / "signals.py").write_text("import signal\nsignal.signal(signal.SIGUSR1, signal.SIG_IGN)\n")
    (pkg / "environ.py").write_text("import os\nos.environ['FLOWJOB_PROBE_SAMPLE'] = '1'\n")
    (pkg / "logs.py").write_text("import logging\nlogging.getLogger('flowjob_probe_sample').addHandler("
                                 "logging.NullHandler())\n")
    (pkg / "writes.py").write_text("open('written.txt', 'w').close()\n")
    (pkg / "clean.py").write_text("import functools\n@functools.cache\ndef made_on_first_use():\n    return {}\n")
    work = tmp_path / "work"
    work.mkdir()
    modules = _importable(src)
    script_path = f"import sys; sys.path.insert(0, {str(src)!r})\n"
    result = subprocess.run([sys.executable, "-c", script_path + PROBE, json.dumps(modules)], cwd=work,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    found = {item["import"]: item["what"] for item in json.loads(result.stdout.strip().splitlines()[-1])["found"]}
    assert set(found) == {f"flowjob_probe_sample.{name}" for name in
                          ("exits", "threads", "replaces", "signals", "environ", "logs", "writes")}, found
    assert "exit handler" in found["flowjob_probe_sample.exits"]
    assert "started the thread" in found["flowjob_probe_sample.threads"]
    assert "replaced itself" in found["flowjob_probe_sample.replaces"]
