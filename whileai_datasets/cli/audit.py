"""``whileai-datasets audit SOURCE``: what every row will train, before training.

Takes the ``export`` command's row options (same flags, same defaults) plus ``--tokenizer`` /
``--template`` and ``--max-length``, and prints the audit as text (``--json``: ``Audit.to_dict()``).
``--fail-on NAMES`` makes it a gate: the exit status is ``EXIT_PROBLEMS`` when any named finding
has rows, and stderr says which.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import warnings
from pathlib import Path
from typing import Any

from whileai_datasets._options import one_of
from whileai_datasets._typing import ExportFormat, OnBadRow
from whileai_datasets.auditing.audit_report import FINDINGS, GROUPS
from whileai_datasets.cli import bad_rows as bad_rows_cli
from whileai_datasets.cli import export as export_cli
from whileai_datasets.cli import hub_sources
from whileai_datasets.cli import push as push_cli
from whileai_datasets.cli import ray_options as ray_cli
from whileai_datasets.errors import SchemaError

EXIT_OK = 0
#: The exit status when a finding named by ``--fail-on`` has rows (1 is an error, 2 a usage error).
EXIT_PROBLEMS = 3
#: What ``--engine ray`` changes for the ``audit`` command.
RAY_NOTE = ("With ray, Ray actors count the rows (each builds the tokenizer once) and this process adds "
            "the counts up: the same figures; --html still reads its few worst rows again here")
KNOWN = sorted(name.replace("_", "-") for name in (*FINDINGS, *GROUPS))


def fail_names(text: str) -> list[str]:
    """argparse type: comma-separated finding names (hyphens or underscores), each known."""
    names = [n.strip().replace("_", "-") for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in KNOWN]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown finding {', '.join(map(repr, unknown)) or repr(text)}; known: {', '.join(KNOWN)}")
    return names


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "audit", help="count what every row will train (rows that train nothing, what max_length cuts, "
        "what the template drops), before training",
        description="Run SOURCE through the export's pipeline (the same options as export) and, given a "
        "tokenizer, through tokenize; report every row that trains nothing and why, the supervised tokens, "
        "what max_length cuts and what the template leaves out.",
    )
    parser.add_argument("source", metavar="SOURCE", help="whileai rows (.jsonl, .jsonl.gz, .parquet, or a glob), an agent's session "
                        "folder (~/.claude/projects), "
                        + hub_sources.SOURCE_HELP)
    hub_sources.add_options(parser)
    parser.add_argument("--tokenizer", metavar="DIR", help="a local tokenizer directory (AutoTokenizer)")
    parser.add_argument("--template", metavar="FILE",
                        help="a chat template file or a shipped family (default: the tokenizer's own)")
    parser.add_argument("--max-length", metavar="N", type=int, help="cut rows to N tokens, as tokenize does")
    export_cli.add_row_options(parser, think_kept=True)
    parser.add_argument("--format", metavar=one_of(ExportFormat), default="openai",
                        help="the export's wire shape (default: %(default)s)")
    parser.add_argument("--unroll", action="store_true", help="one sample per assistant turn")
    parser.add_argument("--salvage", action="store_true",
                        help="count a row the template cannot take whole as tokenize(salvage=True) trains it: "
                        "parallel calls serialized, a turn it renders partly kept as context, else the turns before "
                        "the one it cannot take (without it, the audit says what salvage would keep)")
    parser.add_argument("--trl-default", action="store_true",
                        help="also measure what TRL's default SFTTrainer labels on the config publish makes (trainer "
                        "trl-default; it renders every trained turn's prompt again, so the audit takes 2-3x as long "
                        "on short rows and more on long ones); without it, that trainer says it was not measured")
    parser.add_argument(bad_rows_cli.FLAG, metavar=one_of(OnBadRow), default=None,
                        help="the tokenize you will train with: skip (leave out the rows the template cannot render "
                        "or mask) or raise (its default: stop at them). The audit counts those rows by cause either "
                        "way and never stops on one; rows it cannot read are counted as unreadable")
    parser.add_argument("--skip-bad-rows", action="store_true", help=argparse.SUPPRESS)  # the old spelling
    parser.add_argument("--json", action="store_true", help="print the audit as JSON (Audit.to_dict())")
    parser.add_argument("--html", metavar="PATH", type=Path,
                        help="also write the audit as one self-contained HTML page (plots, the worst rows); "
                        "needs matplotlib: pip install 'whileai-datasets[report]'")
    parser.add_argument("--fail-on", metavar="NAMES", type=fail_names, default=[],
                        help=f"exit {EXIT_PROBLEMS} when any of these comma-separated findings has rows: "
                        f"{', '.join(KNOWN)}")
    ray_cli.add_engine_option(parser, note=RAY_NOTE)
    parser.set_defaults(run=run)
    return parser


def _write_html(args: argparse.Namespace, found: Any, tokenizer: Any, tools: Any) -> None:
    """The HTML page of the audit, with its worst rows fetched again and rendered whole."""
    from whileai_datasets import _files
    from whileai_datasets.auditing.examples import worst_examples
    from whileai_datasets.auditing.html import audit_html

    rows, _ = hub_sources.resolve(args)  # a Hub repo is in the datasets cache by now
    examples = worst_examples(rows, found, tokenizer=tokenizer, template=args.template, tools=tools)
    _files.write_text(args.html, audit_html(found.to_dict(), examples=examples))


def _on_bad_row(args: argparse.Namespace) -> str:
    """``--on-bad-row``, or the ``--skip-bad-rows`` it replaces (with a FutureWarning)."""
    if args.skip_bad_rows:
        warnings.warn(f"--skip-bad-rows is deprecated and goes away in 0.2: use {bad_rows_cli.FLAG} skip (the "
                      "spelling every command takes)", FutureWarning, stacklevel=2)
        return "skip"
    return bad_rows_cli.chosen(args)


def run(args: argparse.Namespace) -> int:
    from whileai_datasets.auditing import audit
    from whileai_datasets.shaping.overwrite import refuse_overwrite

    if args.html:  # before anything is read: the page may not be written over an input
        refuse_overwrite(args.html, [args.source, args.template, args.tools, args.system_prompt_file])
    system, tools = export_cli.row_inputs(args)
    tokenizer = push_cli.load_tokenizer(args.tokenizer, SchemaError)
    template = args.template
    if template is not None and Path(template).exists():
        template = str(Path(template))
    runtime = ray_cli.runtime(args.ray_address) if args.engine == "ray" else contextlib.nullcontext()
    with runtime, export_cli.Progress(enabled=not args.json, desc="audit") as progress:
        found = audit(
            args.source, tokenizer=tokenizer, template=template, max_length=args.max_length,
            system_prompt=system, tools=tools, strip_think=not args.keep_think, mask_mode=args.mask_mode,
            unroll=args.unroll, max_tool_output_chars=args.max_tool_output_chars, format=args.format,
            on_bad_row=_on_bad_row(args), salvage=args.salvage, trl_default=args.trl_default, engine=args.engine,
            progress=progress,
            **hub_sources.hub_options(args),
        )
    # the report first: an --html page that cannot be written (no matplotlib: the report extra) loses nothing
    print(json.dumps(found.to_dict(), indent=2, default=str) if args.json else found.format(), flush=True)
    if args.html:
        _write_html(args, found, tokenizer, tools)
    if args.html and not args.json:
        print(f"\nHTML report: {args.html}")
    failed = [name for name in args.fail_on if found.count(name)]
    if failed:
        said = ", ".join(f"{name} ({found.count(name):,} rows)" for name in failed)
        print(f"whileai-datasets audit: --fail-on: {said}", file=sys.stderr)
        return EXIT_PROBLEMS
    return EXIT_OK
