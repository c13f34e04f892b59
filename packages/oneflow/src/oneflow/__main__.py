"""``python -m oneflow``: ``info`` (versions, plugins and their hooks, backends, devices, ops),
``data`` (fetch a dataset), ``dump`` (print a script's jobs, before or after a pass) and ``compat``
(the legacy API coverage page; ``info --api NAME`` answers for one name)."""
from __future__ import annotations

import argparse
import platform
import sys
from importlib import metadata

DISTRIBUTIONS = ("flowjob", "flowjob-core", "flowjob-ops", "flowjob-typing", "flowjob-watch", "flowjob-optim",
                 "flowjob-data", "flowjob-gpu", "flowjob-kernels", "flowjob-mpi")

DISTRIBUTIONS += ("flowjob-ofrecord",)  # the OFRecord data path (flowjob[data])
DISTRIBUTIONS += ("flowjob-serving",)  # saved models and serving (flowjob[serving])


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def info() -> int:
    import numpy

    from flowjob_core import Session
    from flowjob_core.plugins.host import describe_plugins
    from flowjob_core.switches import current

    print(f"python {platform.python_version()}  numpy {numpy.__version__}")
    print("distributions:")
    for dist in DISTRIBUTIONS:
        version = _version(dist)
        print(f"  {dist:<16} {version or 'not installed'}")
    session = Session()
    try:
        print("plugins:")
        for row in describe_plugins(session.pm):
            print(f"  {row['name']:<16} {row['distribution']:<22} {', '.join(row['hooks'])}")
        print("backends:")
        for backend in session.registries.backends:
            print(f"  {backend.tag:<5} {backend.name:<8} devices: {backend.device_count()}  {backend.description}")
        print(f"default device: {session.backend.tag} ({session.backend.name})")
        ops = session.registries.ops
        owners: dict[str, int] = {}
        for op in ops:
            owner = ops.owner(op.name)
            owners[owner] = owners.get(owner, 0) + 1
        print(f"ops: {len(ops)} (" + ", ".join(f"{k}: {v}" for k, v in sorted(owners.items())) + ")")
        from flowjob_ops.export.onnx_coverage import describe as onnx_coverage

        print(*onnx_coverage(op.name for op in ops), sep="\n")
        print(f"watch sinks: {', '.join(session.registries.watch_sinks.names()) or 'none'}")
        print(f"passes: {' -> '.join(p.name for p in session.registries.passes.ordered())}")
    finally:
        session.close()
    from flowjob_core.backends.numpy_backend import malloc_tuned

    print(f"allocator tuning: {'on' if malloc_tuned() else 'off'} (opt-in with FLOWJOB_MALLOC_TUNING=1)")
    from flowjob_core.backends.host_threads import HostThreads, cpu_count

    host = HostThreads()
    blas = ", ".join(f"{api} ({path.rsplit('/', 1)[-1]})" for api, path, _ in host.blas.describe()) or "none found"
    print(f"threads per step: {host.threads} of {cpu_count()} CPUs this process may use (FLOWJOB_HOST_THREADS, "
          f"else a program's flow.config.compute_thread_pool_size); BLAS: {blas}")
    print("switches:")
    for variable, value, doc in current().describe():
        print(f"  {variable:<32} {value:<8} {doc}")
    from flowjob_core.config.options import recorded_options

    # legacy options that only tuned CUDA or the legacy runtime: accepted, recorded, no effect
    recorded = recorded_options()
    print(f"recorded options (no effect here): {'none set' if not recorded else len(recorded)}")
    for name, value in sorted(recorded.items()):
        print(f"  {name} = {value!r}")
    return 0


def data(args: argparse.Namespace) -> int:
    from oneflow._lazy import require

    if args.dataset == "folder":  # an ImageNet-style folder of JPEGs to OFRecord parts
        if args.src is None or args.ofrecord is None:
            raise SystemExit("python -m oneflow data folder needs --src FOLDER and --ofrecord DIR")
        convert = require("flowjob_ofrecord.convert", "flowjob-ofrecord", "python -m oneflow data folder")
        try:
            parts = 1 if args.parts is None else args.parts
            paths = convert.write_image_folder(args.src, args.ofrecord, parts=parts)
        except (OSError, ValueError) as exc:  # a missing folder, no images, a part count that does not fit
            print(f"python -m oneflow data folder: {exc}", file=sys.stderr)
            return 2
        print(*paths, sep="\n")
        return 0
    flowjob_data = require("flowjob_data", "flowjob-data", "python -m oneflow data")
    path = flowjob_data.fetch_mnist(args.out_dir)
    print(path)
    if args.ofrecord is not None:  # and as OFRecord parts laid out as --layout says
        convert = require("flowjob_ofrecord.convert", "flowjob-ofrecord", "python -m oneflow data --ofrecord")
        try:
            paths = convert.write_mnist_layout(path, args.ofrecord, layout=args.layout, parts=args.parts,
                                               split=args.split, raw=args.raw)
        except ValueError as exc:  # a part count that does not fit, --raw with the img2ofrecord features
            print(f"python -m oneflow data mnist: {exc}", file=sys.stderr)
            return 2
        print(*paths, sep="\n")
    return 0


def dump(args: argparse.Namespace) -> int:
    from oneflow._dump import DumpError
    from oneflow._dump import dump as dump_jobs

    try:
        dump_jobs(args.script, job=args.job, after=args.after, run_main=args.run_main, cuda=args.cuda)
    except DumpError as exc:
        print(f"python -m oneflow dump: {exc}", file=sys.stderr)
        return 2
    return 0


def api(name: str) -> int:
    from oneflow._coverage_report import describe

    status, lines = describe(name)
    print("\n".join(lines))
    return status


def compat(args: argparse.Namespace) -> int:
    from pathlib import Path

    from oneflow._coverage_report import page

    text = page()
    if args.write is None:
        print(text, end="")
    else:
        Path(args.write).write_text(text, encoding="utf-8")
    return 0


DUMP_HELP = """print the jobs SCRIPT defines, one line per node, without running a step.
SCRIPT runs as a module named __flowjob_dump__ (not __main__), so the work under its
'if __name__ == "__main__":' (checkpoint init, data, training loop, saving) does not run;
any job call that still happens stops the script right there. Each job is traced from its
placeholders' annotations. What the script prints goes to stderr. For a script that defines
its jobs inside main(), --run-main runs it as __main__ up to its first job call (what comes
before that call, e.g. loading data, does run)."""


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["launch"]:  # its own parser: what follows the script is the script's
        from oneflow._lazy import require

        return int(require("flowjob_mpi.launch", "flowjob-mpi", "python -m oneflow launch").main(argv[1:]))
    parser = argparse.ArgumentParser(prog="python -m oneflow", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    info_parser = sub.add_parser("info", help="versions, plugins and hooks, backends, devices and ops")
    info_parser.add_argument("--api", default=None, metavar="NAME",
                             help="instead: the status of one legacy name or option (flow.math.top_k, "
                                  "function_config.enable_cudnn): supported, no effect, refused or missing")
    compat_parser = sub.add_parser("compat", help="the legacy API coverage page (docs/compatibility.md)")
    compat_parser.add_argument("--write", default=None, metavar="PATH", help="write it there (default: print it)")
    sub.add_parser("launch", help="run a program on N MPI ranks: launch [-n N] [--hosts H,..] script.py [args] "
                                  "(flowjob-mpi)", add_help=False)
    data_parser = sub.add_parser("data", help="fetch and verify a dataset")
    data_parser.add_argument("dataset", choices=["mnist", "folder"])
    data_parser.add_argument("--src", default=None, metavar="FOLDER",
                             help="folder: one subfolder of images per class (ImageNet style), for --ofrecord")
    data_parser.add_argument("--out-dir", default=None)
    data_parser.add_argument("--ofrecord", default=None, metavar="DIR",
                             help="also write it as OFRecord files DIR/train/part-00000..., DIR/test/... "
                                  "(features encoded, class/label; flowjob-ofrecord with Pillow)")
    data_parser.add_argument("--parts", type=int, default=None,
                             help="OFRecord part files per split (default 1; 5 for --layout img2ofrecord)")
    data_parser.add_argument("--layout", choices=["splits", "flat", "img2ofrecord"], default="splits",
                             help="mnist --ofrecord: splits (DIR/train/part-00000..., DIR/test/...; encoded, "
                                  "class/label), flat (DIR/part-00000... of --split, the same features: the "
                                  "documentation's of_data_pipeline.py) or img2ofrecord (DIR/part-0..., images "
                                  "and labels: what its img2ofrecord.py writes for img_to_ofrecord/lenet_train.py)")
    data_parser.add_argument("--split", choices=["train", "test"], default="train",
                             help="the split a flat layout holds (default train)")
    data_parser.add_argument("--raw", action="store_true",
                             help="OFRecord records also hold images (float pixels / 255) and labels (int64)")
    dump_parser = sub.add_parser("dump", help="print the jobs a script defines, before or after a pass",
                                 description=DUMP_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    dump_parser.add_argument("script", help="a Python program defining @flow.global_function jobs")
    dump_parser.add_argument("--job", default=None, help="only this job (default: every job, in definition order)")
    dump_parser.add_argument("--after", default=None, metavar="PASS",
                             help="the job after this pass ('autodiff', 'fuse-dense', ...; 'all': as planned); "
                                  "default: as traced, before any pass")
    dump_parser.add_argument("--run-main", action="store_true",
                             help="run the script as __main__ up to its first job call (for jobs defined in main())")
    dump_parser.add_argument("--cuda", action="store_true",
                             help="also the CUDA source the gpu backend generates for each elementwise_chain node, "
                                  "or why it keeps the xp kernel (flowjob-gpu; no GPU needed); implies --after all")
    plugin_parser = sub.add_parser("new-plugin", help="write a ready op-plugin package (src layout, an example op, "
                                                      "tests running the gradient kit, tox.ini, a CI workflow)")
    plugin_parser.add_argument("name", help="the distribution name (flowjob-acme: import flowjob_acme, plugin acme)")
    plugin_parser.add_argument("--op", default=None, help="the example op's name (default: <plugin>_softsign)")
    plugin_parser.add_argument("--dir", default=None, help="where to write it, a new or empty folder (default: ./NAME)")
    args = parser.parse_args(argv)
    if args.command == "info":
        return api(args.api) if args.api else info()
    if args.command == "dump":
        return dump(args)
    if args.command == "compat":
        return compat(args)
    if args.command == "new-plugin":
        from oneflow._scaffold import command as new_plugin

        return new_plugin(args.name, args.op, args.dir)
    return data(args)


if __name__ == "__main__":
    sys.exit(main())
