"""``whileai-datasets show-mask``: one row with its supervised tokens highlighted.

The terminal view colours what the trainer trains on (green) and dims the rest;
``--html`` writes the same view as a standalone page. The summary line says how
many tokens the naive ``messages`` route would train instead.
"""

from __future__ import annotations

import argparse
import html
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from whileai_datasets.cli import bad_rows as bad_rows_cli
from whileai_datasets.errors import SchemaError, TemplateError
from whileai_datasets.tokenize.token_masks import Tokenize, spans_to_token_mask

GREEN, DIM, RESET = "\x1b[30;42m", "\x1b[2m", "\x1b[0m"


@dataclass
class MaskView:
    """A rendered row as runs of (text, supervised) and its counts."""

    runs: list[tuple[str, bool]]
    tokens: int
    supervised: int

    def terminal(self, colour: bool = True) -> str:
        if not colour:
            return "".join(f"[[{text}]]" if sup else text for text, sup in self.runs)
        return "".join(f"{GREEN if sup else DIM}{text}{RESET}" for text, sup in self.runs)

    def html_page(self, title: str) -> str:
        body = "".join(
            f'<span class="{"sup" if sup else "ctx"}">{html.escape(text)}</span>' for text, sup in self.runs
        )
        return (
            "<!doctype html><html><head><meta charset='utf-8'>"
            f"<title>{html.escape(title)}</title><style>"
            "body{font-family:ui-monospace,monospace} pre{white-space:pre-wrap}"
            ".sup{background:#b7f5c4} .ctx{color:#777}</style></head><body>"
            f"<h1>{html.escape(title)}</h1><p>{self.summary()}</p><pre>{body}</pre></body></html>\n"
        )

    def summary(self) -> str:
        share = self.supervised / self.tokens if self.tokens else 0.0
        return (
            f"{self.tokens} tokens, {self.supervised} supervised ({share:.0%}); "
            f"the naive messages route would train all {self.tokens}"
        )


def mask_view(transform: Tokenize, row: dict[str, Any]) -> MaskView:
    """The runs of supervised and unsupervised text of one canonical row."""
    text, spans = transform.row_spans(row["messages"], row.get("tools") or None, row["loss_mask"])
    from whileai_datasets.tokenize.token_encode import encode_texts

    (ids, offsets), = encode_texts(transform.tokenizer, [text])
    mask = spans_to_token_mask(offsets, spans)
    chars = np.zeros(len(text), dtype=bool)
    for (start, end), flag in zip(offsets.tolist(), mask.tolist()):
        if flag:
            chars[start:end] = True
    runs: list[tuple[str, bool]] = []
    start = 0
    for i in range(1, len(text) + 1):
        if i == len(text) or chars[i] != chars[start]:
            runs.append((text[start:i], bool(chars[start])))
            start = i
    return MaskView(runs, len(ids), int(mask.sum()))


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "show-mask", help="show one row with the tokens a trainer trains on highlighted",
        description="Render one row of a whileai export with its chat template, tokenize it, and highlight the "
        "supervised tokens (green) against the context (dim).",
    )
    parser.add_argument("source", metavar="SOURCE", help="a whileai export (.jsonl, .jsonl.gz, .json, .parquet)")
    parser.add_argument("--tokenizer", required=True, help="a local tokenizer directory (AutoTokenizer)")
    parser.add_argument("--template", help="a chat template file or a shipped family (default: the tokenizer's)")
    parser.add_argument("--row", type=int, default=0, help="row index (default 0)")
    parser.add_argument("--system-prompt", help="system prompt the builder prepends")
    parser.add_argument("--tools", help="tool schemas JSON file")
    parser.add_argument("--mask-mode", choices=("assistant", "final"), default="assistant")
    parser.add_argument("--html", type=Path, help="also write the view as an HTML page")
    parser.add_argument("--no-color", action="store_true", help="mark supervised text with [[...]] instead of colour")
    parser.add_argument("--json", action="store_true", help="print runs and counts as JSON")
    bad_rows_cli.add_option(parser)
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
        tools=args.tools, mask_mode=args.mask_mode, on_bad_row=bad_rows_cli.chosen(args),
    )
    if not 0 <= args.row < len(ds):
        raise SchemaError(f"row {args.row} is out of range: the source has {len(ds)} rows", location=args.source,
                          hint=f"Pass --row between 0 and {len(ds) - 1}.")
    transform = Tokenize(AutoTokenizer.from_pretrained(args.tokenizer), _template(args.template))
    try:
        view = mask_view(transform, ds[args.row])
    except TemplateError as err:  # the template's line is known; say which row it could not render
        raise TemplateError(f"{args.source} row {args.row}: {err.problem}", location=err.location,
                            hint=f"{err.hint} Or show another row with --row.") from err
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
