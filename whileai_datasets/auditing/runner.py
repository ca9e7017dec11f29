"""``audit(source, ...)``: the export's own pipeline and ``tokenize``, run once over a dataset, counted.

The rows go through what ``export_dataset`` does to them (``shaping.pipeline.training_chunk``: think
blocks stripped, tool output cut, the mask recomputed, unrolled), a chunk at a time, then through
``tokenize`` with ``max_length``; only counters, histograms and the first few row numbers are kept, so
memory stays flat in the row count. No row is changed or written.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from whileai_datasets import _storage
from whileai_datasets._options import check_choice
from whileai_datasets._typing import Engine, ExportFormat, MaskMode, OnBadRow, Truncation
from whileai_datasets.auditing import counting
from whileai_datasets.auditing.audit_report import Audit
from whileai_datasets.auditing.locations import count_unreadable, locate, named_rows
from whileai_datasets.builders.whileai_export import BadRowsWarning
from whileai_datasets.errors import ExportFormatError
from whileai_datasets.export import sources
from whileai_datasets.hub import hub_source

Progress = Callable[[int, int | None], None]


def audit(
    source: Any,
    *,
    tokenizer: Any = None,
    template: Any = None,
    max_length: int | None = None,
    truncation: Truncation = "cut",
    system_prompt: str | None = None,
    tools: Sequence[dict[str, Any]] | None = None,
    strip_think: bool = False,
    mask_mode: MaskMode = "assistant",
    unroll: bool = False,
    max_tool_output_chars: int | None = None,
    format: ExportFormat = "openai",
    on_bad_row: OnBadRow = "raise",
    salvage: bool = False,
    trl_default: bool = False,
    engine: Engine = "local",
    progress: Progress | None = None,
    config: str = "canonical",
    split: str = "train",
    revision: str | None = None,
    filesystem: Any = None,
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
        truncation: ``tokenize``'s: ``"cut"`` at ``max_length``, ``"whole_turns"`` after the last trained turn
            that fits, or ``"split_turns"`` (a longer row split into several at its user turns); the
            ``truncated`` and ``supervision_truncated`` findings count what each loses.
        system_prompt, tools, strip_think, mask_mode, unroll, max_tool_output_chars, format: The
            options that turn rows into training rows, with ``load_dataset`` + ``tokenize``'s defaults
            (``<think>`` kept, each row's own tools kept), so the audit counts what that path trains;
            pass ``strip_think=True`` to count an ``export_dataset`` file made with whileai's default. They
            and ``max_length`` make one ``TrainingOptions``, recorded in ``Audit.options``.
        on_bad_row: The ``tokenize`` you will train with: ``"raise"`` stops at a row the template cannot
            render or mask, ``"skip"`` leaves it out. The audit never stops on such a row: it counts it
            (``bad_rows``, and one finding per cause: ``roles_must_alternate``, ``content_type``, ...,
            ``tokenize.row_failures.CAUSES``) and its figures are what ``"skip"`` trains.
        salvage: Count what ``tokenize(salvage=True)`` trains: a row the template cannot take whole trains
            adapted to what it takes (``parallel_calls_serialized``, ``partial_turns_as_context``) or the turns
            before the one it cannot take (``prefix_salvaged``); all such rows are ``salvaged``. Off, the rows
            it would keep are counted (``salvageable``, with the turns it would keep).
        trl_default: Also measure what TRL's default ``SFTTrainer`` labels on the default config ``publish``
            makes of the rows (trainer ``trl-default``: its own prompt/completion tokenization, every trained
            turn's prompt rendered and encoded again, as TRL does: the audit took 2-3x as long on whileai's
            demo rows, 6-14x on rows of six trained turns; BENCHMARKS.md). Off, that trainer says it was not
            measured; ``publish`` always measures it for the card. The rows ``publish`` refuses
            (``opens_with_marked_turn``) are counted either way.
        engine: ``"local"`` (this process, chunk by chunk) or ``"ray"``: Ray Data actors count the blocks
            and this process adds them up (``on_ray.audit_on_ray``; files only, the same figures). A
            ``tokenizer`` may then also be a directory or a zero-argument factory, built once per actor.
        progress: Called with (source rows done in the chunk, total) after each chunk (on Ray: after
            each block, the total None).
        config, split, revision: For a Hub repo source: the config (its ``canonical`` rows by
            default), split and revision read.
    Returns:
        An ``Audit`` (``.to_dict()``, ``.format()``).
    Raises:
        OptionError: an option has a value it cannot take (``mask_mode``, ``engine``, ``on_bad_row``, ...).
        ExportFormatError: a source the export cannot read.
        SchemaError: ``max_length`` without a tokenizer.
        TemplateError: the template itself is refused (its syntax, the sandbox), before any row.
    Example:
        >>> audit("run.jsonl", tokenizer=tok, max_length=4096, format="trl").format()  # doctest: +SKIP
    """
    options = counting.checked_options(
        tokenized=tokenizer is not None, system_prompt=system_prompt, tools=tools, strip_think=strip_think,
        mask_mode=mask_mode, unroll=unroll, max_tool_output_chars=max_tool_output_chars, format=format,
        max_length=max_length, salvage=salvage, truncation=truncation, on_bad_row=on_bad_row)
    check_choice(engine, "engine", Engine)
    if engine == "ray" and hub_source.hub_repo(source) is not None:
        raise ExportFormatError(f"the Ray audit reads files, and {source!r} names a Hub repo", location="engine",
                                hint="Audit a published repo with engine='local' (it streams the split from "
                                     "the datasets cache), or pass the files it was published from.")
    if engine == "ray":
        from whileai_datasets.auditing.on_ray import audit_on_ray

        return audit_on_ray(source, tokenizer=tokenizer, template=template, options=options, on_bad_row=on_bad_row,
                            progress=progress, filesystem=filesystem, trl_default=trl_default)
    name = counting.source_name(source)
    uri = os.fspath(source) if _storage.is_uri(source) and hub_source.hub_repo(source) is None else None
    if uri is not None:  # read from a local copy; the audit names the objects
        source = _storage.local_copy(uri, filesystem)
    source, label = hub_source.resolve(source, config=config, split=split, revision=revision)
    with warnings.catch_warnings():  # an audit counts unreadable rows (the finding "unreadable"), it does not stop
        warnings.simplefilter("ignore", BadRowsWarning)
        src = sources.Source(source, system_prompt, tools, "skip", patterns=True)
    _, transform, facts = counting.prepare(tokenizer, template, options)
    found = counting.new_audit(label or name, options, on_bad_row, src.n_raw, transform is not None, facts)
    unread = count_unreadable(found, src.bad_rows)
    run = counting.Run(found, options, src.tools_json, transform, facts, trl_default=trl_default)
    offset = 0
    for chunk in src.chunks():
        run.chunk(chunk, offset)
        offset += chunk.num_rows
        if progress is not None:
            progress(chunk.num_rows, src.n_raw)
    run.finish()
    if isinstance(source, (str, os.PathLike)):
        found.locations = locate(source, named_rows(found), src.bad_rows if unread else None)
        if uri is not None:
            for where in found.locations.values():
                where["file"] = _storage.named_as_given(where["file"], uri)
    return found

