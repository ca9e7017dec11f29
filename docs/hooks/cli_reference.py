"""MkDocs hook: the CLI reference, generated from the real argparse parsers at build time.

``docs/reference/cli.md`` holds the marker ``<!-- cli-reference -->``; this hook replaces it with one
section per command (and per sub-command, e.g. ``template inspect``): its help line, description,
usage and every argument, all read from ``whileai_datasets.cli.build_parser()``. A flag added to a
command shows up on the next build; nothing is copied by hand, so the page cannot drift.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from typing import Any

MARKER = "<!-- cli-reference -->"


def _subcommands(parser: argparse.ArgumentParser) -> Iterator[tuple[str, str, argparse.ArgumentParser]]:
    """(name, one-line help, parser) of each sub-command, in the order they were added."""
    for action in parser._actions:  # argparse keeps no public list of its sub-parsers
        if isinstance(action, argparse._SubParsersAction):
            # argparse %-formats help text: a literal % is written %%
            helps = {choice.dest: (choice.help or "").replace("%%", "%") for choice in action._choices_actions}
            for name, sub in action.choices.items():
                yield name, helps.get(name, ""), sub


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _arguments(parser: argparse.ArgumentParser) -> list[str]:
    rows = []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)) or action.help == argparse.SUPPRESS:
            continue
        names = ", ".join(f"`{name}`" for name in action.option_strings) or f"`{action.metavar or action.dest}`"
        if action.option_strings and action.nargs != 0 and not action.choices:
            names += f" `{action.metavar or action.dest.upper()}`"
        help_text = action.help or ""
        if "%" in help_text:  # as argparse formats it: %(default)s and friends, %% for a literal %
            help_text = help_text % {**vars(action), "prog": parser.prog}
        if action.choices and not isinstance(action.choices, dict):
            help_text += f" (one of: {', '.join(f'`{choice}`' for choice in action.choices)})"
        rows.append(f"| {names} | {_cell(help_text)} |")
    if not rows:
        return []
    return ["| argument | what it does |", "| --- | --- |", *rows, ""]


def _section(words: list[str], summary: str, parser: argparse.ArgumentParser, level: int) -> list[str]:
    lines = [f"{'#' * level} `{' '.join(words)}`", ""]
    if summary:
        lines += [summary[:1].upper() + summary[1:] + ".", ""]
    if parser.description:
        lines += [parser.description, ""]
    usage = parser.format_usage().strip()
    lines += ["```text", usage, "```", "", *_arguments(parser)]
    for name, help_text, sub in _subcommands(parser):
        lines += _section([*words, name], help_text, sub, min(level + 1, 4))
    return lines


def cli_reference() -> str:
    """The Markdown of every command of ``whileai-datasets``."""
    os.environ["COLUMNS"] = "100"  # argparse wraps usage to the terminal; fixed so every build is the same
    from whileai_datasets.cli import build_parser

    root = build_parser()
    lines = [root.description or "", "", "```text", root.format_usage().strip(), "```", ""]
    for name, help_text, sub in _subcommands(root):
        lines += _section(["whileai-datasets", name], help_text, sub, 2)
    return "\n".join(lines)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, cli_reference())
