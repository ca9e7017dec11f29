"""Rows rendered whole through the real pipeline: the audit's worst rows, and what ``show-mask`` shows.

The audit keeps only row numbers while it counts (its memory is flat in the row count), so the
rows it names as the least supervised or the most cut are read again here: one more pass over
the source that keeps just those rows, through the export's own pipeline (think blocks stripped
unless kept, tool output cut, the mask recomputed, unrolled) and the same ``tokenize`` transform,
each turned into the view ``show-mask`` prints, with notes on what the template drops or adds.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from whileai_datasets import option_names
from whileai_datasets._options import TrainingOptions
from whileai_datasets.auditing.audit_report import Audit
from whileai_datasets.auditing.counting import recorded
from whileai_datasets.auditing.html import RowExample
from whileai_datasets.auditing.message_figures import source_flags
from whileai_datasets.auditing.template_drops import TemplateFacts, resolve, template_facts
from whileai_datasets.errors import SchemaError, TemplateError
from whileai_datasets.export import sources
from whileai_datasets.shaping import pipeline
from whileai_datasets.tokenize.row_failures import dashed
from whileai_datasets.tokenize.token_masks import Tokenize
from whileai_datasets.tokenize.template_input import template_messages
from whileai_datasets.tokenize.token_rows import decode_table
from whileai_datasets.tokenize.views import MaskView, table_views, think_in_render

#: Rows shown from each of the audit's "worst" lists.
SHOWN = 3
TITLES = {"least_supervised": "least supervised", "most_cut": "most cut by max_length"}
WORST = tuple(TITLES)


def worst_rows(found: Audit, kinds: Sequence[str] = WORST, shown: int = SHOWN) -> dict[int, str]:
    """Row number -> title: the first ``shown`` rows of each of the audit's ``kinds`` of worst, each once."""
    wanted: dict[int, str] = {}
    for name in kinds:
        for row in found.worst[name].rows[:shown].tolist():
            wanted.setdefault(int(row), TITLES[name])
    return wanted


def worst_examples(source: Any, found: Audit, *, tokenizer: Any, template: Any = None,
                   tools: Sequence[dict[str, Any]] | None = None, shown: int = SHOWN) -> list[RowExample]:
    """The rows ``found`` names as worst, rendered with the audit's own options (``found.options``)."""
    wanted = worst_rows(found, shown=shown)
    if tokenizer is None or not wanted:
        return []
    return row_examples(source, wanted, tokenizer=tokenizer, template=template, options=recorded(found),
                        tools=tools, locations=found.locations)


def row_examples(source: Any, wanted: Mapping[int, str], *, tokenizer: Any, template: Any, options: TrainingOptions,
                 tools: Sequence[dict[str, Any]] | None = None, locations: Mapping[int, dict[str, Any]] | None = None,
                 on_bad_row: str = "raise") -> list[RowExample]:
    """The source rows ``wanted`` (row number -> title) through the export's pipeline and ``tokenize``.

    ``source`` is what the export takes, or a ``sources.Source`` already read (with its system prompt
    and tools). ``options`` are the export's (``system_prompt``, ``strip_think``, ``mask_mode``,
    ``unroll``, ``max_tool_output_chars``, ``max_length``; the ``format`` is read as ``"openai"``). An unrolled row gives one example per sample.

    Raises:
        SchemaError: a wanted row is past the end of the source.
        TemplateError: the template cannot render a row (the row is named).
    """
    src = source if isinstance(source, sources.Source) else sources.Source(
        source, options.system_prompt, tools, on_bad_row, patterns=True)
    chat = resolve(tokenizer, template)
    transform = Tokenize(tokenizer, chat, on_bad_row="skip", salvage=options.salvage)
    facts = template_facts(chat) if chat is not None else None
    found: dict[int, list[RowExample]] = {}
    offset = 0
    for chunk in src.chunks():
        numbers = offset + np.arange(chunk.num_rows)
        offset += chunk.num_rows
        for at in np.flatnonzero(np.isin(numbers, list(wanted))).tolist():
            number = int(numbers[at])
            where = (locations or {}).get(number, {})
            line = f"{where['file']} line {where['line']}" if where.get("file") else ""
            found[number] = _examples(chunk.slice(at, 1), number, wanted[number], line, transform, src.tools_json,
                                      options, facts)
    missing = [row for row in wanted if row not in found]
    if missing:
        raise out_of_range(missing[0], offset, src.path)
    return [example for row in wanted for example in found[row]]


def out_of_range(row: int, count: int, path: str) -> SchemaError:
    """The error for a row number past the end of a source of ``count`` rows."""
    return SchemaError(f"row {row} is out of range: the source has {count} rows", location=path or None,
                       hint=f"Ask for rows 0 to {count - 1}." if count else "The source has no row to show.")


def _examples(row: pa.Table, number: int, title: str, where: str, transform: Tokenize, tools_json: str | None,
              options: TrainingOptions, facts: TemplateFacts | None) -> list[RowExample]:
    shaped = dataclasses.replace(options, format="openai", weights=None)
    notes = _notes(row, shaped, facts)
    rows, _, _ = pipeline.training_chunk(row, 0, None, tools_json, shaped, False)
    if rows.num_rows == 0 or not len(rows.column("messages")[0]):
        raise SchemaError(f"row {number} has no message to show", location=where or None,
                          hint="Show another row; `whileai-datasets audit` counts such rows.")
    try:
        views = table_views(transform, rows, shaped.max_length)
    except TemplateError as err:  # the template's line is known; say which row it could not render
        problem = re.sub(r"^row \d+(?:, |: )", "", err.problem)  # numbered in the sample, not the source
        raise TemplateError(f"row {number}: {problem}", location=err.location, hint=err.hint) from err
    n = len(views)
    thinks = _think_notes(transform, rows, views) if not options.strip_think else [[]] * n
    salvaged = _salvage_notes(transform, n)
    return [RowExample(title if n == 1 else f"{title}, sample {k + 1} of {n}", number, view, where,
                       (*salvaged[k], *think, *notes)) for k, (view, think) in enumerate(zip(views, thinks))]


def _salvage_notes(transform: Tokenize, samples: int) -> list[list[str]]:
    """Per sample, what ``salvage`` kept of it (``table_views`` named the samples it salvaged), as
    ``SalvagedRowsWarning`` says it."""
    said: list[list[str]] = [[] for _ in range(samples)]
    for failure in transform.failures.take_salvaged():
        if failure.salvage is None:  # a salvaged row always says what salvage trains of it
            continue
        said[failure.position].append(
            f"salvaged ({option_names.spell('salvage', True)}): the template cannot take the whole conversation "
            f"({dashed(failure.cause)}), so it trains what the template takes: {failure.salvage.describe()}")
    return said


def _think_notes(transform: Tokenize, rows: pa.Table, views: Sequence[MaskView]) -> list[list[str]]:
    """Per sample, what of its ``<think>`` blocks trains, measured on the view (``views.think_in_render``):
    the characters a supervised token covers, in the messages as the template was handed them."""
    messages, _, masks = decode_table(rows, "messages", {})
    out = []
    for view, row, mask in zip(views, messages, masks):
        spans, at = [], 0
        for text, supervised in view.runs:
            if supervised:
                spans.append((at, at + len(text)))
            at += len(text)
        rendered = "".join(text for text, _ in view.runs)
        holding, trained, lost = think_in_render(template_messages(row, transform.form), mask, rendered, spans)
        said = []
        if trained:
            said.append(f"{trained} turn(s) with <think> blocks kept and trained, as load_dataset + tokenize keep "
                        "them (--strip-think strips them, as export does)")
        if lost:
            said.append(f"{lost} turn(s) with <think> blocks that do not train: the template leaves them out of "
                        "the render, or renders them outside the trained span")
        if holding - trained - lost:
            said.append(f"{holding - trained - lost} turn(s) with <think> blocks rendered as context (their turn "
                        "carries no loss)")
        out.append(said)
    return out


def _notes(row: pa.Table, options: TrainingOptions, facts: TemplateFacts | None) -> list[str]:
    """What happens to this row between the file and the tokens, said in words."""
    flags = {name: value[0] if isinstance(value, np.ndarray) else value
             for name, value in source_flags(row, options).items()}
    notes = []
    if flags["think"] and options.strip_think:  # kept, what trains of them is measured on the render
        notes.append(f"{int(flags['think'])} <think> block(s) stripped (--strip-think), as export does")
    if flags["duplicate_system"]:
        notes.append("the row opens with two system messages (--system-prompt given on a row that has its own)")
    if facts is not None:
        if flags["has_system"] and facts.renders_system is False:
            notes.append("the template leaves the system message out of the render: the model never sees it")
        if not flags["has_system"] and facts.default_system_prompt:
            notes.append(f"the template adds its own default system prompt: {facts.default_system_prompt[:80]!r}")
        if flags["has_tools"] and facts.renders_tools is False:
            notes.append("the template leaves the tool schemas out of the render")
        if flags["reasoning"] and facts.renders_reasoning_content is False:
            notes.append("the template leaves reasoning_content out of the render")
        if flags["parts"] and facts.renders_content_parts is False or flags["image_parts"] and \
                facts.image_parts == "dropped":
            notes.append("the template leaves content parts out of the render, or writes their data, not their text")
        if flags["image_parts"] and facts.image_parts == "text_only":
            notes.append("the template writes nothing for the row's image part(s): the model never sees them")
    return notes
