"""The audit's worst rows, fetched again and rendered whole for the HTML report.

The audit keeps only row numbers while it counts (its memory is flat in the row count), so the
few rows it names as the least supervised or the most cut are read again here: one more pass
over the source that keeps just those rows, through the same export pipeline and the same
``tokenize`` transform, and each is turned into the view ``show-mask`` prints.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from whileai_datasets.auditing.html import RowExample
from whileai_datasets.auditing.report import Audit
from whileai_datasets.auditing.template_drops import resolve
from whileai_datasets.export import pipeline, sources
from whileai_datasets.tokenize.token_masks import Tokenize
from whileai_datasets.tokenize.views import table_views

#: Rows shown from each of the audit's "worst" lists.
SHOWN = 3
TITLES = {"least_supervised": "least supervised", "most_cut": "most cut by max_length"}


def _wanted(found: Audit, shown: int) -> dict[int, str]:
    """Row number -> title, the least supervised first, each row once."""
    wanted: dict[int, str] = {}
    for name, worst in found.worst.items():
        for row in worst.rows[:shown].tolist():
            wanted.setdefault(int(row), TITLES.get(name, name))
    return wanted


def worst_examples(source: Any, found: Audit, *, tokenizer: Any, template: Any = None,
                   tools: Sequence[dict[str, Any]] | None = None, shown: int = SHOWN) -> list[RowExample]:
    """The rows ``found`` names as worst, rendered with the audit's options (``found.options``)."""
    wanted = _wanted(found, shown)
    if tokenizer is None or not wanted:
        return []
    options = found.options
    transform = Tokenize(tokenizer, resolve(tokenizer, template), on_bad_row="skip")
    src = sources.Source(source, options["system_prompt"], tools)
    shaped = {**options, "format": "openai"}
    examples: dict[int, RowExample] = {}
    offset = 0
    for chunk in src.chunks():
        numbers = offset + np.arange(chunk.num_rows)
        offset += chunk.num_rows
        hits = np.flatnonzero(np.isin(numbers, list(wanted)))
        if not len(hits):
            continue
        for at in hits.tolist():
            examples[int(numbers[at])] = _example(chunk.slice(at, 1), int(numbers[at]), wanted, transform,
                                                  src.tools_json, shaped, found)
    return [examples[row] for row in wanted if row in examples and examples[row] is not None]


def _example(row: pa.Table, number: int, wanted: dict[int, str], transform: Tokenize, tools_json: str | None,
             shaped: dict[str, Any], found: Audit) -> RowExample:
    rows, _, _ = pipeline.training_chunk(row, 0, None, tools_json, shaped, False)
    sample = rows.slice(rows.num_rows - 1, 1)  # unrolled: the last sample holds the whole conversation
    view, = table_views(transform, sample, shaped.get("max_length"))
    where = found.locations.get(number, {})
    at = f"{where['file']} line {where['line']}" if where.get("file") else ""
    return RowExample(wanted[number], number, view, at)
