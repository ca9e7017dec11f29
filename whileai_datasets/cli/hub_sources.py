"""``--config``, ``--split`` and ``--revision``: the commands that read rows (``audit``, ``show-mask``) take a
repo this package published as SOURCE (``namespace/name``, ``hf://datasets/namespace/name``), and these say
which of its rows."""

from __future__ import annotations

import argparse
from typing import Any

SOURCE_HELP = ("or a Hub repo this package published (namespace/name, hf://datasets/namespace/name[@revision]: "
               "its rows through the whileai/export builder)")


def add_options(parser: argparse.ArgumentParser) -> None:
    """Add the options that pick a Hub repo SOURCE's rows."""
    parser.add_argument("--config", default="canonical",
                        help="with a Hub repo SOURCE: the config read (default: %(default)s, the rows as exported)")
    parser.add_argument("--split", default="train", help="with a Hub repo SOURCE: the split read (default: %(default)s)")
    parser.add_argument("--revision", help="with a Hub repo SOURCE: a branch, tag or commit")


def resolve(args: argparse.Namespace) -> tuple[Any, str]:
    """SOURCE's rows (a Hub repo loaded, anything else as given) and how a report names them."""
    from whileai_datasets.hub.hub_source import resolve as resolve_source

    rows, label = resolve_source(args.source, config=args.config, split=args.split, revision=args.revision)
    return rows, label or str(args.source)


def hub_options(args: argparse.Namespace) -> dict[str, Any]:
    """The options as ``audit()`` takes them."""
    return {"config": args.config, "split": args.split, "revision": args.revision}
