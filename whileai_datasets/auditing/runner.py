"""``audit(source, ...)``: the export's own pipeline and ``tokenize``, run once over a dataset, counted.

The rows go through what ``export_dataset`` does to them (``export.pipeline.training_chunk``: think
blocks stripped, tool output cut, the mask recomputed, unrolled), a chunk at a time, then through
``tokenize`` with ``max_length``; only counters, histograms and the first few row numbers are kept, so
memory stays flat in the row count. No row is changed or written.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from whileai_datasets._typing import ON_BAD_ROW
from whileai_datasets.auditing import message_figures, template_drops, token_figures
from whileai_datasets.auditing.locations import count_unreadable, locate
from whileai_datasets.auditing.report import Audit
from whileai_datasets.builders.whileai_export import BadRowsWarning
from whileai_datasets.columnar import _arrow
from whileai_datasets.errors import ExportFormatError, SchemaError
from whileai_datasets.export import exporters, pipeline, sources
from whileai_datasets.hub import hub_source, trainer_gaps
from whileai_datasets.tokenize.token_masks import BadMaskRowsWarning, Tokenize

ENGINES = ("local", "ray")
Progress = Callable[[int, int], None]


def audit(
    source: Any,
    *,
    tokenizer: Any = None,
    template: Any = None,
    max_length: int | None = None,
    system_prompt: str | None = None,
    tools: Sequence[dict[str, Any]] | None = None,
    strip_think: bool = True,
    mask_mode: str = "assistant",
    unroll: bool = False,
    max_tool_output_chars: int | None = None,
    format: str = "openai",
    on_bad_row: str = "raise",
    engine: str = "local",
    progress: Progress | None = None,
    config: str = "canonical",
    split: str = "train",
    revision: str | None = None,
) -> Audit:
    """See what a dataset will train before training it: every row through the export's pipeline and
    ``tokenize``, counted.

    Args:
        source: What ``export_dataset`` takes: a JSONL / Parquet path (or a glob), a canonical
            ``Dataset``, a list of rows, a ``SimulationData``; or a Hub repo this package published
            (``namespace/name``, ``hf://datasets/namespace/name[@revision]``), read with ``load_dataset``.
        tokenizer: A fast tokenizer; without one only the message-level figures are reported.
        template: A ``ChatTemplate``, its text, a template file or a shipped family name; the
            tokenizer's own otherwise. Given without a tokenizer, the template's drops are still found.
        max_length: Cut rows to this many tokens, as ``tokenize`` does; the audit counts what it cuts.
        system_prompt, tools, strip_think, mask_mode, unroll, max_tool_output_chars, format: The
            export's options (``export_dataset``), with its defaults.
        on_bad_row: ``tokenize``'s: ``"raise"`` on a row whose mask fails the check, or ``"skip"``
            (counted as ``bad_rows``).
        engine: ``"local"``; ``"ray"`` is refused for now (the audit runs in this process).
        progress: Called with (source rows done in the chunk, total) after each chunk.
        config, split, revision: For a Hub repo source: the config (its ``canonical`` rows by
            default), split and revision read.
    Returns:
        An ``Audit`` (``.to_dict()``, ``.format()``).
    Raises:
        ExportFormatError: a bad export option or engine, or a source the export cannot read.
        SchemaError: a bad ``on_bad_row``, or ``max_length`` without a tokenizer.
        TemplateError: a row's mask fails the check (``on_bad_row="raise"``).
    Example:
        >>> audit("run.jsonl", tokenizer=tok, max_length=4096, format="trl").format()  # doctest: +SKIP
    """
    exporters._check_options(format, mask_mode, strip_think=strip_think, unroll=unroll,
                             max_tool_output_chars=max_tool_output_chars)
    if on_bad_row not in ON_BAD_ROW:
        raise SchemaError(f"on_bad_row must be one of {', '.join(map(repr, ON_BAD_ROW))}, got {on_bad_row!r}",
                          location="on_bad_row", hint="Pass on_bad_row='raise' or on_bad_row='skip'.")
    if max_length is not None and tokenizer is None:
        raise SchemaError("max_length counts tokens, and no tokenizer was given", location="max_length",
                          hint="Pass tokenizer= (the one you will train with), or leave max_length out.")
    if engine not in ENGINES or engine == "ray":
        raise ExportFormatError(
            f"engine must be 'local' for the audit, got {engine!r}", location="engine",
            hint="Run the audit with engine='local' (it streams chunk by chunk, so memory stays flat); "
                 "the Ray engine audits are not built yet.")
    options = {"system_prompt": system_prompt, "tools": list(tools) if tools is not None else None,
               "strip_think": strip_think, "mask_mode": mask_mode, "unroll": unroll,
               "max_tool_output_chars": max_tool_output_chars, "format": format, "max_length": max_length,
               "on_bad_row": on_bad_row}
    name = _name(source)
    source, label = hub_source.resolve(source, config=config, split=split, revision=revision)
    with warnings.catch_warnings():  # an audit counts unreadable rows (the finding "unreadable"), it does not stop
        warnings.simplefilter("ignore", BadRowsWarning)
        src = sources.Source(source, system_prompt, tools, "skip")
    chat = template_drops.resolve(tokenizer, template)
    transform = (Tokenize(tokenizer, chat, max_length, on_bad_row=on_bad_row, keep_unsupervised=True)  # type: ignore[arg-type]
                 if tokenizer is not None else None)
    own = f"{getattr(tokenizer, 'name_or_path', '') or type(tokenizer).__name__}'s chat template"
    facts = template_drops.template_facts(chat, own if template is None else None) if chat is not None else None
    found = Audit(source=label or name, options={k: v for k, v in options.items() if k != "tools"},
                  rows=src.n_raw, tokenized=transform is not None,
                  template=facts.to_dict() if facts is not None else None)
    unread = count_unreadable(found, src.bad_rows)
    run = _Run(found, options, src.tools_json, transform, facts)
    offset = 0
    for chunk in src.chunks():
        run.chunk(chunk, offset)
        offset += chunk.num_rows
        if progress is not None:
            progress(chunk.num_rows, src.n_raw)
    run.finish()
    if isinstance(source, (str, os.PathLike)):
        wanted = [r for f in found.findings.values() for r in f.first]
        wanted += [int(r) for w in found.worst.values() for r in w.rows]
        found.locations = locate(source, wanted, src.bad_rows if unread else None)
    return found


def _name(source: Any) -> str:
    if isinstance(source, (str, os.PathLike)):
        return os.fspath(source)
    return type(source).__name__


class _Run:
    """The counting, one chunk at a time."""

    def __init__(self, found: Audit, options: dict[str, Any], tools_json: str | None,
                 transform: Tokenize | None, facts: template_drops.TemplateFacts | None) -> None:
        self.found, self.options, self.tools_json = found, options, tools_json
        self.transform, self.facts = transform, facts
        self.gaps: list[Any] = []
        self.marked_rows = self.marked_turns = 0
        self.training_offset = 0
        #: format="trl" messages rows: TRL's default SFTTrainer trains every token of them
        self.naive = options["format"] == "trl" and not options["unroll"] and options["mask_mode"] != "final"

    def add(self, name: str, flags: np.ndarray, rows: np.ndarray, amounts: np.ndarray | None = None) -> None:
        self.found.findings[name].add(flags, rows, amounts)

    def chunk(self, chunk: pa.Table, offset: int) -> None:
        numbers = offset + np.arange(chunk.num_rows, dtype=np.int64)
        flags = message_figures.source_flags(chunk, self.options)
        self.source_findings(flags, numbers)
        keep = ~flags["no_messages"]
        self.found.training_rows += int((~keep).sum())
        self.add("zero_loss", flags["no_messages"], numbers)
        if not keep.any():
            return
        table = chunk.filter(pa.array(keep)) if not keep.all() else chunk
        shaped = {**self.options, "format": "openai"}
        rows, _, _ = pipeline.training_chunk(table, 0, None, self.tools_json, shaped, False)
        sample_source = numbers[keep]
        if self.options["unroll"]:
            sample_source = np.repeat(sample_source, np.maximum(flags["assistant_turns"][keep], 1))
        self.training_findings(rows, sample_source)

    def source_findings(self, flags: dict[str, Any], numbers: np.ndarray) -> None:
        for name in ("no_messages", "only_system", "no_assistant", "duplicate_system", "missing_system",
                     "final_not_last"):
            self.add(name, flags[name], numbers)
        think_name = "think_stripped" if self.options["strip_think"] else "think_kept"
        self.add(think_name, flags["think"] > 0, numbers, flags["think"])
        self.add("emptied_by_think", flags["emptied_by_think"] > 0, numbers, flags["emptied_by_think"])
        facts = self.facts
        if facts is None:
            return
        if facts.renders_system is False:
            self.add("template_drops_system", flags["has_system"], numbers)
        if facts.renders_tools is False:
            self.add("template_drops_tools", flags["has_tools"], numbers)
        reasoning = np.zeros(len(numbers), dtype=bool)
        if facts.renders_reasoning_content is False:
            reasoning |= flags["reasoning"]
        if facts.think_in_history == "drops" and not self.options["strip_think"]:
            reasoning |= flags["think_before_last"]
        self.add("template_drops_reasoning", reasoning, numbers)
        if facts.renders_content_parts is False:
            self.add("template_drops_content_parts", flags["parts"], numbers)
        if facts.default_system_prompt is not None:
            self.add("template_adds_system", ~flags["has_system"] & ~flags["no_messages"], numbers)

    def training_findings(self, rows: pa.Table, sample_source: np.ndarray) -> None:
        found = self.found
        figures = message_figures.training_figures(rows)
        found.training_rows += rows.num_rows
        self.add("tool_output_cut", figures["tool_outputs_cut"] > 0, sample_source, figures["tool_chars_cut"])
        for role, chars in figures["role_chars"].items():
            found.role_chars[role] = found.role_chars.get(role, 0) + chars
        turns = figures["assistant_turns"]
        if self.options["format"] == "trl" and self.options["mask_mode"] == "final" and not self.options["unroll"]:
            self.add("completion_turns_lost", turns > 1, sample_source, np.maximum(turns - 1, 0))
        if self.naive and self.transform is None:
            self.add("trains_every_token", np.ones(rows.num_rows, dtype=bool), sample_source)
        marked = np.asarray(_arrow.flat(_arrow.column(rows, "loss_mask")).to_numpy(zero_copy_only=False))
        per_row = np.bincount(_arrow.parents(_arrow.column(rows, "loss_mask")), weights=marked,
                              minlength=rows.num_rows)
        self.marked_rows += int((per_row > 0).sum())
        self.marked_turns += int(marked.sum())
        self.gaps.append(trainer_gaps.chunk_gaps(rows, "training rows", offset=self.training_offset))
        self.training_offset += rows.num_rows
        zero = per_row == 0
        if self.transform is not None:
            zero |= self.token_findings(rows, sample_source, per_row > 0)
        self.add("zero_loss", zero, sample_source)

    def token_findings(self, rows: pa.Table, sample_source: np.ndarray, marked: np.ndarray) -> np.ndarray:
        """Tokenize the chunk once and count; returns, per training row, whether it has no supervised token."""
        found = self.found
        numbered = _arrow.set_column(rows, token_figures.ROW_COLUMN, pa.array(np.arange(rows.num_rows)))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", BadMaskRowsWarning)  # counted below as bad_rows
            tokenized = self.transform(numbered, indices=sample_source.tolist())  # type: ignore[misc]
        figures = token_figures.token_columns(tokenized)
        position = figures["row"]
        source = sample_source[position]
        skipped = np.ones(rows.num_rows, dtype=bool)
        skipped[position] = False
        self.add("bad_rows", skipped, sample_source)
        found.tokens += int(figures["num_tokens"].sum())
        found.supervised_tokens += int(figures["num_supervised_tokens"].sum())
        found.tokens_before_cut += int((figures["num_tokens"] + figures["tokens_truncated"]).sum())
        amounts = {"truncated": figures["tokens_truncated"], "supervision_truncated":
                   figures["supervised_tokens_truncated"], "truncated_to_nothing": figures["supervised_tokens_truncated"]}
        for name, flags in token_figures.token_flags(figures, marked[position]).items():
            self.add(name, flags, source, amounts.get(name))
        if self.naive:
            self.add("trains_every_token", np.ones(len(position), dtype=bool), source,
                     figures["num_tokens"] - figures["num_supervised_tokens"])
        share = token_figures.supervised_share(figures)
        found.histograms["tokens_per_row"].add(figures["num_tokens"])
        found.histograms["tokens_before_cut_per_row"].add(figures["num_tokens"] + figures["tokens_truncated"])
        found.histograms["supervised_tokens_per_row"].add(figures["num_supervised_tokens"])
        found.histograms["supervised_share_per_row"].add(share)
        found.worst["least_supervised"].add(share, source, num_tokens=figures["num_tokens"],
                                            num_supervised_tokens=figures["num_supervised_tokens"])
        cut = figures["tokens_truncated"] > 0
        found.worst["most_cut"].add(figures["tokens_truncated"][cut], source[cut],
                                    supervised_lost=figures["supervised_tokens_truncated"][cut])
        for method, n in token_figures.mask_methods(tokenized).items():
            found.mask_methods[method] = found.mask_methods.get(method, 0) + n
        zero = np.zeros(rows.num_rows, dtype=bool)
        zero[position] = figures["num_supervised_tokens"] == 0
        return zero

    def finish(self) -> None:
        found = self.found
        report = trainer_gaps.trainer_report(trainer_gaps.merge_gaps(self.gaps),
                                             {"messages": self.marked_rows, "sharegpt": self.marked_turns})
        supervised = found.supervised_tokens if found.tokenized else None
        for entry in report.values():
            entry["trains_tokens"] = supervised
            entry["how"] = "the mask exactly, except the rows listed as inexact"
        fmt, naive = self.options["format"], self.naive
        report["trl"] = {
            "config": "this export (format='trl')" if fmt == "trl" else "tokenized (assistant_masks)",
            "unit": "rows", "rows": found.training_rows, "exact": not naive, "inexact": {},
            "trains_tokens": (found.tokens if naive else supervised) if found.tokenized else None,
            "how": "messages rows: SFTTrainer trains every token (the naive route)" if naive else
            "prompt/completion rows: the last assistant turn and what follows it" if fmt == "trl" else
            "pre-tokenized rows: exactly the assistant_masks",
        }
        found.trainers = report
