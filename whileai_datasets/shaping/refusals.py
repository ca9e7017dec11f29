"""What makes an export refuse its rows: whileai's checks and gates, in whileai's words.

The problems are whileai's texts (a refusal is compared with whileai's); the hints name each
option as it is passed where the error is shown (``validate=False`` in Python, ``--no-validate``
on the command line: ``whileai_datasets.option_names``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from whileai_datasets import option_names
from whileai_datasets.columnar import _arrow
from whileai_datasets.errors import ExportFormatError


def check_messages(rows: pa.Table, before: int, offset: int) -> None:
    """whileai's ``check(rows, "training")``: every row has messages."""
    if before >= 0:
        return
    first = offset - 1 - before
    raise ExportFormatError(
        f"schema_invalid in training_rows: {first}:messages_missing",
        location=f"row {first}",
        hint=f"A row needs at least one message: pass {option_names.spell('system_prompt')}, or drop rows with no "
        "conversation.",
    )


def gate(report: dict[str, Any], validate: bool) -> None:
    """whileai's two gates, in its order: tool-call round trip, then privileged leaks."""
    roundtrip = report["tool_call_roundtrip"]
    if validate and roundtrip["invalid"]:
        raise ExportFormatError(
            f"tool_call_roundtrip_invalid: {roundtrip['invalid']} of {roundtrip['checked']} tool calls do not "
            f"parse back to structured arguments (rows {roundtrip['rows']}); training on them teaches "
            "string-wrapped arguments",
            location="tool_calls[].function.arguments",
            hint=f"Fix the rows or pass {option_names.spell('validate', False)}.",
        )
    leaks = report["privileged_leaks"]
    if validate and leaks["n_leaked"]:
        raise ExportFormatError(
            f"privileged_leak: {leaks['n_leaked']} of {leaks['n_checked']} rows quote their own privileged "
            "context (reference, principle or hidden state) in an assistant turn; the export scrubs the key, "
            "not the reply, so training on them teaches the model to say what only the grader was told",
            location="assistant turns",
            hint=_leak_hint(),
        )


def check_sides(rows: pa.Table) -> None:
    for side in ("chosen", "rejected"):
        empty = np.flatnonzero(_arrow.lengths(_arrow.column(rows, side)) == 0)
        if len(empty):
            bad = "; ".join(f"{i}:{side}_missing" for i in empty[:5].tolist())
            raise ExportFormatError(
                f"schema_invalid in export_preference: {bad}",
                location=f"pair {int(empty[0])}, {side}",
                hint=f"Each side needs at least one message: pass {option_names.spell('system_prompt')}, or drop "
                "the pair.",
            )


def _leak_hint() -> str:
    if option_names.in_command_line():
        return (f"Drop those rows, or pass {option_names.spell('validate', False)} (with --json, the report's "
                "privileged_leaks.leaked then names them).")
    return "Drop those rows (report['privileged_leaks']['leaked'] names them) or pass validate=False."
