"""``whileai-datasets show-mask``: one row with its supervised tokens highlighted.

The terminal view colours what the trainer trains on (green) and dims the rest;
``--html`` writes the same view as a standalone page. The summary line says how
many tokens the naive ``messages`` route would train instead.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from whileai_datasets.errors import SchemaError
from whileai_datasets.tokenize.token_masks import Tokenize
from whileai_datasets.tokenize.views import mask_view


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "show-mask", help="show one row with the tokens a trainer trains on highlighted",
        description="Render one row of a whileai export with its chat template, tokenize it, and highlight the "
        "supervised tokens (green) against the context (dim).",
    )
    parser.add_argument("source", metavar="SOURCE", help="a whileai export (.jsonl, .jsonl.gz, .parquet)")
    parser.add_argument("--tokenizer", required=True, help="a local tokenizer directory (AutoTokenizer)")
    parser.add_argument("--template", help="a chat template file or a shipped family (default: the tokenizer's)")
    parser.add_argument("--row", type=int, default=0, help="row index (default 0)")
    parser.add_argument("--system-prompt", help="system prompt the builder prepends")
    parser.add_argument("--tools", help="tool schemas JSON file")
    parser.add_argument("--mask-mode", choices=("assistant", "final"), default="assistant")
    parser.add_argument("--html", type=Path, help="also write the view as an HTML page")
    parser.add_argument("--no-color", action="store_true", help="mark supervised text with [[...]] instead of colour")
    parser.add_argument("--json", action="store_true", help="print runs and counts as JSON")
    parser.set_defaults(run=run)
    return parser


def _template(spec: str | None) -> Any:
    from whileai_datasets.chat_template import ChatTemplate

    if spec is None:
        return None
    return ChatTemplate.from_file(spec) if Path(spec).exists() else ChatTemplate.shipped(spec)


def run(args: argparse.Namespace) -> int:
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise SchemaError("show-mask needs transformers", hint="pip install transformers") from None
    from datasets import load_dataset

    import whileai_datasets  # noqa: F401
    from whileai_datasets import _files
    from whileai_datasets.export.overwrite import refuse_overwrite

    refuse_overwrite(args.html, [args.source, args.tools, args.template])
    ds = load_dataset(
        "whileai/export", data_files=args.source, split="train", system_prompt=args.system_prompt,
        tools=args.tools, mask_mode=args.mask_mode,
    )
    if not 0 <= args.row < len(ds):
        raise SchemaError(f"row {args.row} is out of range: the source has {len(ds)} rows", location=args.source,
                          hint=f"Pass --row between 0 and {len(ds) - 1}.")
    transform = Tokenize(AutoTokenizer.from_pretrained(args.tokenizer), _template(args.template))
    view = mask_view(transform, ds[args.row])
    if args.html:
        _files.write_text(args.html, view.html_page(f"{args.source} row {args.row}"))
    if args.json:
        print(json.dumps({"tokens": view.tokens, "supervised": view.supervised,
                          "runs": [{"text": t, "supervised": s} for t, s in view.runs]}, indent=2))
        return 0
    colour = not args.no_color and sys.stdout.isatty()
    print(view.terminal(colour))
    print(f"\nrow {args.row}: {view.summary()}" + (f"; HTML: {args.html}" if args.html else ""))
    return 0
