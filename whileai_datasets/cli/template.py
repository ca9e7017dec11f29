"""``whileai-datasets template inspect|patch``: the chat-template console commands.

The console entry point (``whileai_datasets.cli:main``) calls ``add_parser``
to register the ``template`` subcommand and ``run`` to execute it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, TextIO

from whileai_datasets.chat_template.template import ChatTemplate
from whileai_datasets.errors import ExportFormatError, TemplateError


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``template`` (with ``inspect`` and ``patch``) on an argparse subparsers object."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "template", help="inspect chat templates and add {%% generation %%} blocks",
        description="Inspect a chat template, or write a copy with {% generation %} blocks around "
                    "assistant output (verified by rendering).")
    actions = parser.add_subparsers(dest="template_command", metavar="{inspect,patch}")
    actions.required = True
    source_help = "a .jinja file, a tokenizer_config.json / chat_template.json, or a model directory"
    inspect = actions.add_parser("inspect", help="report what the template does")
    inspect.add_argument("source", help=source_help)
    inspect.add_argument("--json", action="store_true", help="print the report as JSON")
    inspect.add_argument("--variant", help="named template variant (default: 'default')")
    patch = actions.add_parser("patch", help="write the template with generation blocks to OUT")
    patch.add_argument("source", help=source_help)
    patch.add_argument("out", help="where to write the patched .jinja file")
    patch.add_argument("--variant", help="named template variant (default: 'default')")
    parser.set_defaults(run=run)  # whileai_datasets.cli.main calls args.run(args)
    return parser


def _inspect(args: argparse.Namespace, out: TextIO) -> int:
    report = ChatTemplate.from_file(args.source, variant=args.variant).inspect()
    out.write((report.to_json() if args.json else report.format()) + "\n")
    return 1 if report.syntax_error else 0


def _patch(args: argparse.Namespace, out: TextIO) -> int:
    from whileai_datasets.shaping.overwrite import refuse_overwrite

    refuse_overwrite(args.out, _template_files(Path(args.source)))
    template = ChatTemplate.from_file(args.source, variant=args.variant)
    patched = template.with_generation()
    target = patched.save(Path(args.out))
    blocks = patched.inspect().generation_blocks
    verb = "already had" if patched is template else "wrote"
    out.write(f"{verb} {len(blocks)} generation block(s): {target}\n")
    return 0


def _template_files(source: Path) -> list[Path]:
    """The files a template source may be read from (OUT must be none of them)."""
    if source.is_dir():
        return [source / name for name in ("chat_template.jinja", "chat_template.json", "tokenizer_config.json")]
    return [source]


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Execute ``template inspect`` or ``template patch``; returns the exit status."""
    out, err = out or sys.stdout, err or sys.stderr
    try:
        if args.template_command == "inspect":
            return _inspect(args, out)
        return _patch(args, out)
    except (TemplateError, ExportFormatError) as error:
        err.write(f"error: {error}\n")
        if args.template_command == "patch" and getattr(error, "refusal_class", "classifier") != "classifier":
            err.write("  No patched copy was written (the refusal says what tokenize does instead).\n")
        return 1
