"""``whileai-datasets export IN OUT --engine ray``: the export on Ray Data.

Importing this module does not import Ray, so the ``export`` command can
offer the option whether or not the ``ray`` extra is installed.
``export_cli`` wires it: ``add_engine_option(parser)`` after building the
``export`` parser, and ``run_ray_export(args, training_options(...))``
in place of the local export when ``args.engine == "ray"``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any

from whileai_datasets import _compat
from whileai_datasets._options import TrainingOptions, choices
from whileai_datasets._typing import Engine
from whileai_datasets.errors import ExportFormatError

#: What ``--engine ray`` changes for the ``export`` command.
EXPORT_NOTE = "With ray, OUT is a directory of part files (Parquet; JSONL when OUT ends in .jsonl)"


def add_engine_option(parser: argparse.ArgumentParser, note: str = EXPORT_NOTE) -> argparse.ArgumentParser:
    """Add ``--engine {local,ray}`` and ``--ray-address`` to a command's parser (`note`: what ray changes)."""
    parser.add_argument(
        "--engine",
        choices=choices(Engine),
        default="local",
        help="local: datasets in this process (default); ray: Ray Data, on the cluster --ray-address names "
        f"or a local runtime. {note}",
    )
    parser.add_argument(
        "--ray-address",
        metavar="ADDRESS",
        help="with --engine ray: the Ray cluster to run on (ray://host:10001, host:6379 or auto; "
        "default: $RAY_ADDRESS, else a local runtime)",
    )
    return parser


def run_ray_export(args: argparse.Namespace, options: TrainingOptions) -> dict[str, Any]:
    """The export ``args`` asks for (``options``: ``export_cli.training_options``),
    on Ray; returns ``export_dataset``'s report.

    Starts (or connects to) Ray when this process has no runtime yet, and shuts
    down what it started.

    Raises:
        ExportFormatError: ``--preference`` or ``--push-to``, which the Ray
            engine does not do, or anything the export raises.
        UnsupportedVersionError: Ray Data is not installed.
    """
    for flag, value in (("--preference", args.preference), ("--push-to", args.push_to)):
        if value:
            raise ExportFormatError(
                f"{flag} is not available with --engine ray",
                location=flag,
                hint="Run it with --engine local (preference pairs are small), or publish the Ray output directory "
                "with whileai_datasets.publish.",
            )
    with runtime(args.ray_address):
        from whileai_datasets.export.exporters import run_training

        return run_training(str(args.source), str(args.output), options, engine="ray")


@contextlib.contextmanager
def runtime(address: str | None) -> Iterator[None]:
    """Ray, started (or connected to) when this process has no runtime yet, and shut down if started here.

    While it runs, whatever is written to this process's stdout goes to stderr (Ray's own lines, the
    workers' prints it forwards, "Raylet is terminated" when a node is lost), so the command's output
    (``--json``) stays alone on stdout."""
    ray = _import_ray()
    started = not ray.is_initialized()
    with stdout_to_stderr():
        if started:
            ray.init(address=address)
        try:
            yield
        finally:
            if started:
                ray.shutdown()


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """This process's stdout, both Python's ``sys.stdout`` and file descriptor 1 (what Ray's threads and
    its C++ core write to), sent to stderr, and put back afterwards."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _import_ray() -> Any:
    _compat.require_ray("--engine ray")
    import ray

    return ray
