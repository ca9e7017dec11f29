"""``--on-bad-row {raise,skip}``: the option every command that reads whileai rows takes.

``export``, ``push`` and ``show-mask`` add it with :func:`add_option` (a new command that reads
rows, such as an ``audit``, adds it the same way) and pass :func:`chosen` on as the builder's
``on_bad_row``. While a command runs, the messages it prints name this flag, not the Python
keyword (``whileai_datasets.option_names``: the main entry sets the surface).
"""

from __future__ import annotations

import argparse

from whileai_datasets._options import one_of
from whileai_datasets._typing import OnBadRow

FLAG = "--on-bad-row"


def add_option(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add ``--on-bad-row`` (default: not given, which raises at the first bad row)."""
    parser.add_argument(
        FLAG, metavar=one_of(OnBadRow), default=None,
        help="raise (the default): stop at the first row that cannot be read, naming its file, line and key; "
        "skip: leave such rows out, say how many and where the first was",
    )
    return parser


def chosen(args: argparse.Namespace) -> OnBadRow:
    """What ``--on-bad-row`` asked for (``"raise"`` when it was not given)."""
    value: OnBadRow = getattr(args, "on_bad_row", None) or "raise"
    return value


def given(args: argparse.Namespace) -> bool:
    """Whether ``--on-bad-row`` was given at all."""
    return getattr(args, "on_bad_row", None) is not None
