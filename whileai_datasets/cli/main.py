"""The ``whileai-datasets`` console command."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from collections.abc import Sequence

from whileai_datasets import option_names
from whileai_datasets.cli import audit as audit_cli
from whileai_datasets.cli import export as export_cli
from whileai_datasets.cli import push as hub_cli
from whileai_datasets.cli import show_mask
from whileai_datasets.cli import template as template_cli
from whileai_datasets.errors import WhileaiError


def _demo(args: argparse.Namespace) -> int:
    from whileai_datasets.cli.demo import render, run_demo

    summary = run_demo(args.out)
    print(json.dumps(summary, indent=2) if args.json else render(summary))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="whileai-datasets",
        description="whileai agent rollouts as Hugging Face datasets: load, transform, publish.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    demo = commands.add_parser("demo", help="load the bundled sample through the builder and write Parquet")
    demo.add_argument("--out", default="whileai-sample.parquet", help="Parquet file to write (default: %(default)s)")
    demo.add_argument("--json", action="store_true", help="print the summary as JSON")
    demo.set_defaults(run=_demo)
    export_cli.add_parser(commands)
    hub_cli.add_parser(commands)
    template_cli.add_parser(commands)
    show_mask.add_parser(commands)
    audit_cli.add_parser(commands)
    return parser


def _own_flags(parser: argparse.ArgumentParser, command: str) -> set[str]:
    """The flags ``command`` takes (its subparser's), so no message advises another command's."""
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {flag for flag in commands.choices[command]._option_string_actions if flag.startswith("--")}


def _terminated(signum: int, frame: object) -> None:
    """SIGTERM as an exit: the writers' cleanup runs (temp files removed,
    parse workers stopped) instead of the process vanishing mid-write."""
    raise SystemExit(128 + signum)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    import whileai_datasets  # noqa: F401  (registers the builder)

    handles_signals = threading.current_thread() is threading.main_thread()
    before = signal.signal(signal.SIGTERM, _terminated) if handles_signals else None
    try:
        with option_names.command_line(args.command, _own_flags(parser, args.command)):  # messages name its flags
            code: int = args.run(args)
    except (WhileaiError, OSError) as err:  # an OSError in the file system's own words, with the path
        print(f"whileai-datasets {args.command}: {err}", file=sys.stderr)
        return 1
    finally:
        if handles_signals and before is not None:  # None: a handler installed outside Python, left as it was
            signal.signal(signal.SIGTERM, before)
    return code


if __name__ == "__main__":
    sys.exit(main())
