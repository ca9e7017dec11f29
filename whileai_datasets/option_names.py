"""How an option is named in a message: as the user can pass it where the error is shown.

An error raised while ``load_dataset("whileai/export", ...)`` or ``export_dataset`` runs in
Python says ``on_bad_row='skip'``; the same error printed by ``whileai-datasets export`` says
``--on-bad-row skip``, which is what a shell can take. Hints build the wording through
:func:`spell` (one option) or :func:`files_hint` (which files are read) instead of writing
either spelling by hand, and the command line sets the surface once, around the command it
runs (:func:`command_line`). The surface is a module global, not a context variable: parse
workers forked by the command inherit it, and spawned ones are told it with their work
(``parallel.Job.surface``), so their errors are worded for the shell too.

It lives below every stage, so each can word its hints (and the option checks their errors) through it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

#: Each option's command-line flag, or per value the flags that give it (``validate=False`` is
#: ``--no-validate``); None: the commands have no flag for it.
CLI_FLAGS: dict[str, str | dict[Any, str] | None] = {
    "on_bad_row": "--on-bad-row",
    "system_prompt": "--system-prompt",
    "tools": "--tools",
    "mask_mode": "--mask-mode",
    "max_tool_output_chars": "--max-tool-output-chars",
    "format": "--format",
    "push_to": "--push-to",
    "engine": "--engine",
    "weights": "--weights",
    "validate": {False: "--no-validate"},
    "strip_think": {False: "--keep-think"},
    "drop_ties": {False: "--keep-ties"},
    "unroll": {True: "--unroll"},
    "salvage": {True: "--salvage"},
    "tokenizer": "--tokenizer",
    "parse_workers": None,
    "chunk_rows": None,
    "download_mode": None,
}
_NO_VALUE = object()
_FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")

#: "python" or the command running (e.g. "export"); set by :func:`command_line`
_surface = "python"


@contextmanager
def command_line(command: str) -> Iterator[None]:
    """While the block runs, messages name options as ``command``'s flags ("python": as keywords)."""
    global _surface
    before, _surface = _surface, command
    try:
        yield
    finally:
        _surface = before


def in_command_line() -> bool:
    return _surface != "python"


def current() -> str:
    """The surface messages are worded for: "python" or the command running (what a worker
    process that was not forked is told, so its errors read like its parent's)."""
    return _surface


def spell(name: str, value: Any = _NO_VALUE) -> str:
    """``name`` (with ``value``, when given) as the user passes it here: ``on_bad_row='skip'``
    in Python, ``--on-bad-row skip`` in the command line; ``system_prompt=`` and
    ``--system-prompt`` without a value.

    An option the commands have no flag for is named as the keyword in both: the caller words
    its hint for the command line with :func:`has_flag` (``CLI_FLAGS``)."""
    if in_command_line():
        flag = CLI_FLAGS.get(name)
        if isinstance(flag, dict) and value in flag:
            return flag[value]
        if isinstance(flag, str):
            return flag if value is _NO_VALUE else f"{flag} {value}"
    return f"{name}=" if value is _NO_VALUE else f"{name}={value!r}"


def has_flag(name: str, value: Any = _NO_VALUE) -> bool:
    """Whether the surface the message is shown in can take ``name`` (set to ``value``)."""
    flag = CLI_FLAGS.get(name)
    if not in_command_line() or isinstance(flag, str):
        return True
    return isinstance(flag, dict) and value in flag


def flags_named(text: str) -> list[str]:
    """The ``--flags`` a message names (what the command-line test checks exist)."""
    return sorted(set(_FLAG.findall(text)))


def files_hint() -> str:
    """How to say which files are read: ``data_files=`` in Python, the command's input in the shell."""
    if in_command_line():
        return f"Pass whileai rows (.jsonl, .json, .parquet, optionally compressed) as the input of `{_surface}`."
    return 'Pass data_files="run.jsonl" (or a dict of splits) to load_dataset("whileai/export", ...).'


def leave_out_hint() -> str:
    """How to leave a file out of what is read."""
    return "or pass another input file" if in_command_line() else "or leave the file out of data_files"


#: the commands that read preference pairs, and how each is told a file holds them
_PREFERENCE_FLAGS = {"export": "--preference", "push": "--preference PAIRS"}


def preference_hint() -> str:
    """How to read a file of preference pairs here: the ``preference`` config in Python, the
    command's own flag in a command that has one, the command that reads them in any other."""
    if not in_command_line():
        return ('load the file with the \'preference\' config (load_dataset("whileai/export", "preference", ...)) '
                "or export_preference")
    flag = _PREFERENCE_FLAGS.get(_surface)
    if flag is not None:
        return f"pass the file as pairs with {flag}"
    return "pairs are read by `whileai-datasets export` and `push` (see their --help)"
