"""``python -m oneflow``: ``info`` (versions, plugins and their hooks, backends, devices, ops)."""
from __future__ import annotations

import argparse
import platform
import sys
from importlib import metadata

DISTRIBUTIONS = ("flowjob", "flowjob-core", "flowjob-ops", "flowjob-typing", "flowjob-watch", "flowjob-optim",
                 "flowjob-data", "flowjob-gpu")


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def info() -> int:
    import numpy

    from flowjob_core import Session
    from flowjob_core.plugin import describe_plugins

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
        print(f"watch sinks: {', '.join(session.registries.watch_sinks.names()) or 'none'}")
        print(f"passes: {' -> '.join(p.name for p in session.registries.passes.ordered())}")
    finally:
        session.close()
    return 0


def data(args: argparse.Namespace) -> int:
    from oneflow._lazy import require

    flowjob_data = require("flowjob_data", "flowjob-data", "python -m oneflow data")
    path = flowjob_data.fetch_mnist(args.out_dir)
    print(path)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m oneflow", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("info", help="versions, plugins and hooks, backends, devices and ops")
    data_parser = sub.add_parser("data", help="fetch and verify a dataset")
    data_parser.add_argument("dataset", choices=["mnist"])
    data_parser.add_argument("--out-dir", default=None)
    args = parser.parse_args(argv)
    if args.command == "info":
        return info()
    return data(args)


if __name__ == "__main__":
    sys.exit(main())
