"""``whileai-datasets show-mask``: rows as the trainer will see them, supervised tokens highlighted.

It previews the real pipeline, not the file: the rows go through what ``export`` does to them
(think blocks stripped unless ``--keep-think``, tool output cut, the mask recomputed, unrolled),
then through ``tokenize`` with ``--max-length`` (the cut is drawn). ``--row``/``--rows`` pick
rows by their number in the source; ``--worst`` picks the least supervised (or the most cut)
rows of an audit of the whole source. Each row comes with notes on what the template drops or
adds. The terminal view colours what the trainer trains on (green), dims the rest and marks
what the cut drops (red); ``--html`` writes the same rows as a page.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from whileai_datasets._options import TrainingOptions
from whileai_datasets.auditing.examples import TITLES, WORST
from whileai_datasets.cli import bad_rows as bad_rows_cli
from whileai_datasets.cli import export as export_cli
from whileai_datasets.cli import hub_sources
from whileai_datasets.cli import push as push_cli
from whileai_datasets.errors import SchemaError

WORST_CHOICES = tuple(kind.replace("_", "-") for kind in WORST)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "show-mask", help="show rows as the trainer will see them, the supervised tokens highlighted",
        description="Run rows of a whileai export through the export's pipeline (the same options as export) and "
        "tokenize, and highlight the supervised tokens (green) against the context (dim) and what --max-length "
        "cuts (red).",
    )
    parser.add_argument("source", metavar="SOURCE", help="a whileai export (.jsonl, .jsonl.gz, .json, .parquet), "
                        + hub_sources.SOURCE_HELP)
    hub_sources.add_options(parser)
    parser.add_argument("--tokenizer", required=True, help="a local tokenizer directory (AutoTokenizer)")
    parser.add_argument("--template", help="a chat template file or a shipped family (default: the tokenizer's)")
    parser.add_argument("--row", type=int, default=0, help="the first row to show, by its number in SOURCE (default 0)")
    parser.add_argument("--rows", metavar="N", type=int, default=1, help="how many rows to show (default 1)")
    parser.add_argument("--worst", nargs="?", const=WORST_CHOICES[0], choices=WORST_CHOICES,
                        help="show the rows an audit of all of SOURCE finds least supervised (the default) or most "
                        "cut by --max-length, instead of --row")
    parser.add_argument("--max-length", metavar="N", type=int, help="cut rows to N tokens, as tokenize does")
    export_cli.add_row_options(parser, think_kept=True)
    parser.add_argument("--unroll", action="store_true", help="one sample per assistant turn, as export --unroll")
    parser.add_argument("--salvage", action="store_true",
                        help="a row with one turn the template cannot take shows the turns before it, as "
                        "tokenize(salvage=True) trains it (a note names the turns kept and cut)")
    parser.add_argument("--html", type=Path, help="also write the rows as an HTML page")
    parser.add_argument("--no-color", action="store_true", help="mark supervised text with [[...]] instead of colour")
    parser.add_argument("--json", action="store_true", help="print each row's runs, counts and notes as JSON")
    bad_rows_cli.add_option(parser)
    parser.set_defaults(run=run)
    return parser


def _options(args: argparse.Namespace, system: str | None) -> TrainingOptions:
    """The rows' training options, as ``audit`` makes them (``load_dataset`` + ``tokenize``'s defaults)."""
    return TrainingOptions(
        system_prompt=system, strip_think=not args.keep_think, mask_mode=args.mask_mode, unroll=args.unroll,
        max_tool_output_chars=args.max_tool_output_chars, max_length=args.max_length, salvage=args.salvage)


def _wanted(args: argparse.Namespace, rows: Any, tokenizer: Any, options: TrainingOptions,
            tools: Any) -> tuple[dict[int, str], Any]:
    """Row number -> title, and the audit that chose them (``--worst``) or None."""
    if args.rows < 1:
        raise SchemaError(f"--rows must be 1 or more, got {args.rows}", location="show-mask", hint="Pass --rows 1.")
    if args.worst is None:
        if args.row < 0:
            raise SchemaError(f"--row must be 0 or more, got {args.row}", location="show-mask", hint="Pass --row 0.")
        return {row: f"row {row}" for row in range(args.row, args.row + args.rows)}, None
    from whileai_datasets.auditing import audit
    from whileai_datasets.auditing.examples import worst_rows

    found = audit(rows, tokenizer=tokenizer, template=args.template, tools=tools, on_bad_row=bad_rows_cli.chosen(args),
                  system_prompt=options.system_prompt, strip_think=options.strip_think, mask_mode=options.mask_mode,
                  unroll=options.unroll, max_tool_output_chars=options.max_tool_output_chars,
                  max_length=options.max_length, salvage=options.salvage)
    kind = args.worst.replace("-", "_")
    wanted = worst_rows(found, (kind,), shown=args.rows)
    if not wanted:
        raise SchemaError(f"no row is {TITLES[kind]}", location=args.source,
                          hint="Pass --max-length for --worst most-cut." if kind == "most_cut" else
                          "The audit tokenized no row; run whileai-datasets audit to see why.")
    return wanted, found


def run(args: argparse.Namespace) -> int:
    from whileai_datasets import _files
    from whileai_datasets.auditing.examples import out_of_range, row_examples
    from whileai_datasets.auditing.html import rows_page
    from whileai_datasets.shaping.overwrite import refuse_overwrite

    refuse_overwrite(args.html, [args.source, args.tools, args.template, args.system_prompt_file])
    from whileai_datasets.export import sources

    system, tools = export_cli.row_inputs(args)
    rows, label = hub_sources.resolve(args)
    src = sources.Source(rows, system, tools, bad_rows_cli.chosen(args))  # the rows first: their errors
    if args.worst is None and args.row + args.rows > src.n_raw:
        raise out_of_range(max(args.row, src.n_raw), src.n_raw, src.path)
    tokenizer = push_cli.load_tokenizer(args.tokenizer, SchemaError)
    options = _options(args, system)
    wanted, found = _wanted(args, rows, tokenizer, options, tools)
    examples = row_examples(src, wanted, tokenizer=tokenizer, template=args.template, options=options,
                            locations=found.locations if found is not None else None)
    if args.html:
        _files.write_text(args.html, rows_page(f"{label}: {len(examples)} row(s)", examples))
    if args.json:
        print(json.dumps([{"row": e.row, "title": e.title, "tokens": e.view.tokens, "supervised": e.view.supervised,
                           "tokens_cut": e.view.tokens_cut, "supervised_cut": e.view.supervised_cut, "notes": e.notes,
                           "runs": [{"text": t, "supervised": s} for t, s in e.view.runs]} for e in examples],
                         indent=2))
        return 0
    colour = not args.no_color and sys.stdout.isatty()
    for example in examples:
        print(f"== {example.title}" + (f" ({example.where})" if example.where else ""))
        print(example.view.terminal(colour))
        print(f"\nrow {example.row}: {example.view.summary()}")
        for note in example.notes:
            print(f"  note: {note}")
        print()
    if args.html:
        print(f"HTML: {args.html}")
    return 0
