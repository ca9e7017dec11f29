"""``export_dataset`` / ``export_training`` / ``export_preference``: whileai's
exporters, drop-in, composed of the Arrow transforms.

Same arguments, same rows (JSON-equal), same report keys and values as
``whileai.simulations.export_dataset`` and ``export_preference``; the work is
column-wise and streams a chunk at a time, so memory stays flat with the row
count. Differences, on purpose:

* ``source`` may also be a canonical ``Dataset`` (``load_dataset("whileai/export", ...)``);
  it then carries no ``privileged`` blocks, so the leak report is vacuous and
  says so, as whileai's does for exported rows. ``system_prompt`` is prepended
  to its rows unless a row already opens with exactly that system message
  (the one the dataset was loaded with).
* A path source is read once, by the ``whileai/export`` builder (cached by
  ``datasets``: a second export of the same file skips parsing), which takes
  the leak check's facts from each raw row as it reads it (``leak_facts``).
* ``output`` ending in ``.parquet`` writes Parquet (typed, with the
  ``datasets`` features); anything else writes JSONL.
* A row's own ``tools`` are written when no ``tools=`` is given (whileai drops them; see
  docs/differences.md); ``tools=`` replaces them on every row, as in whileai.
* Rows whileai would silently drop or mangle (a message with an unknown role,
  a non-object tool call) raise ``ExportFormatError`` with their location:
  that is the builder's contract.
* Rows that train nothing (only a system message, no assistant turn) are written as whileai writes
  them, but not in silence: the report gains ``rows_without_loss`` (only when there are some) and a
  ``NothingToTrainWarning`` names the cause and the first row; rows opening with two system messages
  warn (``DuplicateSystemWarning``). See ``shaping.loss_facts``.
* ``push_to`` publishes the exported rows with ``whileai_datasets.hub.publish``
  (a private repo whose default config a trainer trains exactly, with the
  canonical rows beside it and a dataset card) where whileai uploads the file.
"""

from __future__ import annotations

import dataclasses
import json
import os
import posixpath
import tempfile
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from whileai_datasets import _compat, _files, _storage, option_names
from whileai_datasets._options import TrainingOptions, check_choice, check_flag
from whileai_datasets._typing import Engine, ExportFormat, MaskMode, MessageWeights, OnBadRow
from whileai_datasets.columnar import _arrow
from whileai_datasets.errors import ExportFormatError, OptionError
from whileai_datasets.export import pushing, sources
from whileai_datasets.rows import pairs as pair_layouts
from whileai_datasets.shaping import loss_facts, overwrite, pipeline, refusals, reports
from whileai_datasets.shaping import writer as export_writer
from whileai_datasets.transforms import gates, think, wire
from whileai_datasets.transforms import groups as grouping

#: Called with the source rows each finished chunk held, and the total.
Progress = Callable[[int, int], None]


# ---------------------------------------------------------------- training


def export_training(
    source: Any,
    output: str | None = None,
    *,
    system_prompt: str | None = None,
    tools: Sequence[dict[str, Any]] | None = None,
    strip_think: bool = True,
    validate: bool = True,
    mask_mode: MaskMode = "assistant",
    unroll: bool = False,
    max_tool_output_chars: int | None = None,
    format: ExportFormat = "openai",
    push_to: str | None = None,
    weights: MessageWeights | None = None,
    on_bad_row: OnBadRow | None = None,
    filesystem: Any = None,
    engine: Engine = "local",
) -> dict[str, Any]:
    """Write training rows as whileai's ``export_dataset`` does, gated, and return its report.

    The defaults are whileai's, for a drop-in export: ``strip_think=True`` removes ``<think>`` blocks,
    where ``load_dataset`` + ``tokenize`` keep them (``TrainingOptions()``'s defaults). The keywords
    make one ``TrainingOptions`` (``TrainingOptions.whileai_export(...)``), checked before anything is
    read.

    Args:
        source: whileai's ``SimulationData``, a list of rows, a JSONL (or
            Parquet) path, or a canonical ``Dataset``.
        output: The file to write (``.parquet`` for Parquet, else JSONL). With
            a path source and no ``output``: ``<name>.train<suffix>`` next to it.
        system_prompt, tools, strip_think, mask_mode, unroll, max_tool_output_chars:
            As whileai's ``training_rows``.
        validate: Refuse (``ValueError``) rows whose tool-call arguments are
            not structured, or whose assistant turns quote ``privileged``.
        format: ``"openai"``, ``"trl"`` or ``"fireworks"``.
        push_to: A Hub dataset repo to publish the exported rows to, privately
            (``whileai_datasets.hub.publish``: the trainer-exact default config,
            the canonical rows, a card); the report gains ``hub``.
        weights: With ``format="openai"``, also write each message's ``weight`` (1 where
            ``loss_mask`` is 1, else 0), so a file uploaded for fine-tuning trains exactly the
            mask: ``"assistant"`` puts it on assistant turns only (OpenAI, Fireworks), ``"all"``
            on every message (Together, which then reads every message's weight). None
            (default): the file is byte-equal to whileai's.
        on_bad_row: ``"raise"`` (None, the default, is the same) stops at the first row that
            cannot be read, naming its file, line and key; ``"skip"`` leaves such rows out (a
            ``BadRowsWarning`` says how many) and the report gains ``bad_rows`` (count, first
            error, locations).
        filesystem: A ``pyarrow.fs.FileSystem`` or ``fsspec`` filesystem for a URI ``source`` or
            ``output`` (``s3://bucket/key``); by default the URI's scheme picks one, with credentials
            from the environment. A URI source is copied to a temp folder and read from there; a URI
            output is written locally, then uploaded whole.
        engine: ``"local"`` (this process, chunk by chunk) or ``"ray"``: Ray Data reads, shapes and
            writes the rows in its tasks, on the runtime ``ray.init`` connected to (a local one
            otherwise), with the same options, rows and report (``ray_engine.export_training``, whose
            block sizes and row keys are the engine's own knobs). ``output`` is then a directory of
            part files (Parquet; JSONL when it ends in ``.jsonl``) that concatenate to the local
            engine's file; ``push_to``, ``weights`` and ``on_bad_row="skip"`` are the local engine's.
    Returns:
        whileai's report: ``n``, ``format``, ``with_system``, ``with_tools``,
        ``groups``, ``tool_call_roundtrip``, ``mask_mode``, ``unrolled``,
        ``max_tool_output_chars``, ``tool_output_truncated``,
        ``tool_output_chars_cut``, ``trained_messages``, ``masked_messages``,
        ``privileged_leaks``, ``rewards``, and when they apply ``warnings``,
        ``no_completion_dropped``, ``path``, ``n_written``; and (not whileai's) ``rows_without_loss``
        when some rows carry no loss, with a ``NothingToTrainWarning``.
    Warns:
        NothingToTrainWarning: rows train nothing (only a system message, no assistant turn); the
            count, the cause and the first row.
        DuplicateSystemWarning: rows open with two system messages (``system_prompt=`` on rows that
            carry their own).
    Raises:
        ExportFormatError: ``output`` is the source file (or its cache file),
            however spelled or linked; refused before anything is read.
        OptionError: an option has a value it cannot take (``mask_mode="last"``, ``unroll="no"``, ...).
        ValueError: a gate refused the rows (``validate=True``), a row has no messages, or ``push_to``
            without an output.
        PublishError: the Hub refused the upload (``push_to``).
        UnsupportedVersionError: ``engine="ray"`` without Ray Data installed.
    """
    options = TrainingOptions(
        system_prompt=system_prompt, tools=tools, strip_think=strip_think, validate=validate, mask_mode=mask_mode,
        unroll=unroll, max_tool_output_chars=max_tool_output_chars, format=format, weights=weights)
    return run_training(source, output, options, engine=engine, push_to=push_to, on_bad_row=on_bad_row,
                        filesystem=filesystem)


export_dataset = export_training


def run_training(source: Any, output: str | None, options: TrainingOptions, *, engine: Engine = "local",
                 push_to: str | None = None, on_bad_row: OnBadRow | None = None, progress: Progress | None = None,
                 filesystem: Any = None) -> dict[str, Any]:
    """``export_training`` with its options made, and a progress callback (source rows done per chunk; the
    local engine's)."""
    if check_choice(engine, "engine", Engine) == "ray":
        return _on_ray(source, output, options, push_to=push_to, on_bad_row=on_bad_row, filesystem=filesystem)
    bad_rows = "raise" if on_bad_row is None else check_choice(on_bad_row, "on_bad_row", OnBadRow)
    if _storage.is_uri(source) or _storage.is_uri(output):
        return _on_objects(source, output, options, push_to=push_to, on_bad_row=on_bad_row, progress=progress,
                           filesystem=filesystem)
    overwrite.refuse_overwrite(output, overwrite.input_paths(source))
    # opened before the source is read: an export to the same path that finishes meanwhile is noticed at commit
    writer = export_writer.open_writer(output, export_writer.TRAINING_NULLS) if output else None
    try:
        src = sources.Source(source, options.system_prompt, options.tools, bad_rows)
        if writer is None and src.path:
            writer = export_writer.open_writer(sources.default_output(src.path), export_writer.TRAINING_NULLS)
        if push_to and writer is None:
            raise ExportFormatError(
                "push_to needs an output path: the file that is written is what is pushed",
                location=f"push_to={push_to!r}",
                hint="Pass output='train.jsonl' (or .parquet) as well.",
            )
        groups, report = _write_training(src, writer, options, progress)
    finally:
        if writer is not None:
            writer.abort()
    if push_to:
        report["hub"] = pushing.push_rows(report["path"], push_to, report, src.chunks(),
                                          _canonical_rows(src, groups, options))
    return report


def _on_ray(source: Any, output: str | None, options: TrainingOptions, *, push_to: str | None,
            on_bad_row: OnBadRow | None, filesystem: Any) -> dict[str, Any]:
    """``export_training(engine="ray")``: what the Ray engine does not take is refused by name, before Ray starts."""
    refuse_on_ray({"push_to": push_to, "weights": options.weights, "on_bad_row": on_bad_row},
                  push_to="publish the rollouts with publish_rollouts(source, repo_id, engine='ray')")
    if output is None:
        raise OptionError(f"{option_names.spell('engine', 'ray')} writes a directory of part files, and no output "
                          "was given", location="output",
                          hint="Pass output='out/' (Parquet parts; 'out.jsonl' for JSONL parts).")
    _compat.require_ray(option_names.spell("engine", "ray"))
    from whileai_datasets.ray_engine.engine import run_training as run_on_ray

    return run_on_ray(source, output, options, filesystem=filesystem)


def refuse_on_ray(given: dict[str, Any], **alternatives: str) -> None:
    """``OptionError`` for the first of `given` (option name: value) that is set and that the Ray engine does
    not take; ``on_bad_row`` is checked, and taken when it is ``"raise"`` (Ray stops at an unreadable row).
    `alternatives`: per option, what to do instead of the local engine."""
    for name, value in given.items():
        if name == "on_bad_row" and value is not None and check_choice(value, name, OnBadRow) == "raise":
            continue
        if value is not None and value is not False:
            instead = alternatives.get(name, "fix or drop the unreadable rows first" if name == "on_bad_row"
                                       else f"drop {option_names.spell(name)}")
            raise OptionError(f"{option_names.spell(name, value)} is not available with "
                              f"{option_names.spell('engine', 'ray')}", location=name,
                              hint=f"Run it with {option_names.spell('engine', 'local')}, or {instead}.")


def _on_objects(source: Any, output: str | None, options: TrainingOptions, *, filesystem: Any,
                **given: Any) -> dict[str, Any]:
    """The export with a URI source (read from a local copy) or output (written to a local temp file,
    then uploaded whole: the object appears complete or not at all)."""
    if output is None and _storage.is_uri(source):
        output = sources.default_output(os.fspath(source))
    overwrite.refuse_overwrite(output, overwrite.input_paths(source))
    if _storage.is_uri(output):
        _storage.check_bucket(os.fspath(output), filesystem, writing=True)
    local = _storage.local_copy(os.fspath(source), filesystem) if _storage.is_uri(source) else source
    if not _storage.is_uri(output):
        return run_training(local, output, options, **given)
    with tempfile.TemporaryDirectory(prefix=f"whileai-{_files.owner_tag()}") as folder:
        written = os.path.join(folder, posixpath.basename(os.fspath(output)))
        report = run_training(local, written, options, **given)
        _storage.upload(written, os.fspath(output), filesystem)
    report["path"] = os.fspath(output)
    return report


def _write_training(
    src: sources.Source, writer: export_writer.Writer | None, options: TrainingOptions, progress: Progress | None
) -> tuple[dict[str, pa.Array] | None, dict[str, Any]]:
    """The chunk pipeline over ``src`` into ``writer`` (committed once the
    gates pass); the groups and the report."""
    keys = src.keys()
    groups = None if options.unroll else grouping.group_columns(*grouping.key_columns(keys))
    stats = reports.TrainingStats(options)
    facts = loss_facts.LossFacts()
    memoize = writer is not None and not writer.parquet

    def work(chunk: pa.Table, offset: int) -> tuple[pa.Table, Any, int, int]:
        rows, written, before = pipeline.training_chunk(chunk, offset, groups, src.tools_json, options, memoize)
        return rows, writer.encode(written) if writer is not None else None, before, chunk.num_rows

    with pipeline.reused_memory():
        for rows, payload, before, done in pipeline.pipelined(work, src.chunks()):
            refusals.check_messages(rows, before, stats.n)
            facts.add(rows, stats.n)
            stats.add(rows, before)
            if writer is not None:
                writer.write_encoded(payload)
            if progress is not None:
                progress(done, src.n_raw)
    report = stats.report(src.leaks, keys, src.n_raw)
    if src.bad_rows is not None:
        report["bad_rows"] = src.bad_rows
    facts.finish(report, src.path or "the source")
    refusals.gate(report, options.validate)
    if writer is not None:
        report["path"] = writer.commit()
        report["n_written"] = report["n"]
    return groups, report


def _canonical_rows(src: sources.Source, groups: dict[str, pa.Array] | None,
                   options: TrainingOptions) -> pushing.ChunkRows:
    """How a chunk of ``src`` becomes the canonical rows the export wrote (OpenAI shape: messages with
    ``loss_mask``, after the mask and unroll), for ``push_to`` (``export.pushing``)."""
    shaped = dataclasses.replace(options, format="openai", weights=None)

    def canonical(chunk: pa.Table, offset: int) -> pa.Table:
        rows, _, _ = pipeline.training_chunk(chunk, offset, groups, src.tools_json, shaped, False)
        return rows

    return canonical


# ---------------------------------------------------------------- preference


def export_preference(
    pairs: Any,
    output: str | None = None,
    *,
    system_prompt: str | None = None,
    tools: Sequence[dict[str, Any]] | None = None,
    strip_think: bool = True,
    validate: bool = True,
    drop_ties: bool = True,
    format: str = "openai",
) -> dict[str, Any]:
    """Write chosen/rejected pairs as whileai's ``export_preference`` does, and return its report.

    Args:
        pairs: Pair dicts (``build_preference_pairs`` / ``select_for_preference``
            output: ``chosen`` and ``rejected`` rollout rows, or pairs in another tool's layout that the
            ``preference`` config reads), a ``Dataset`` of the ``whileai/export`` ``preference`` config,
            or the path of a file of pairs (read with that config).
        output: The file to write (``.parquet`` for Parquet, else JSONL).
        format: ``"openai"`` (whole conversations per side), ``"trl"`` or
            ``"fireworks"`` (one-turn preferences).
    Returns:
        whileai's report: ``pairs``, ``format``, ``tool_call_roundtrip``, and
        when they apply ``fireworks_turns_cut``, ``trl_turns_cut``,
        ``ties_dropped``, ``no_completion_dropped``, ``chosen_longer_frac``,
        ``first_turn_identical``, ``mean_margin``, ``warnings``, ``path``.
    Raises:
        ExportFormatError: ``output`` is a cache file of a ``pairs`` dataset.
        ValueError: not pairs, a side with no messages, a gate refused the
            pairs, or (``validate=True``) no pair is left to write.
    """
    check_choice(format, "format", ExportFormat)
    for name, flag in (("strip_think", strip_think), ("validate", validate), ("drop_ties", drop_ties)):
        check_flag(flag, name)
    overwrite.refuse_overwrite(output, overwrite.input_paths(pairs))
    table, ties = _pair_table(pairs, str(system_prompt or ""), drop_ties)
    tools_json = json.dumps(list(tools), ensure_ascii=False) if tools else None
    if tools_json is not None or "tools" not in table.column_names:  # else each pair keeps its own (as loaded)
        table = _arrow.set_column(table, "tools", pa.array([tools_json] * table.num_rows, pa.string()).cast(pa.json_()))
    if strip_think:
        table = think.strip_table(table)
    rows = wire.openai_preference_table(table)
    dropped = trl_cut = fireworks_cut = 0
    if format == "trl":
        rows, dropped, trl_cut = wire.trl_preference_table(rows)
    refusals.check_sides(rows)
    roundtrip = _pair_roundtrip(rows, format)
    if validate and roundtrip["invalid"]:
        raise ExportFormatError(
            f"tool_call_roundtrip_invalid: {roundtrip['invalid']} of {roundtrip['checked']} tool calls in the "
            "pairs do not parse back to structured arguments",
            location="chosen/rejected tool_calls[].function.arguments",
            hint=f"Fix the rows or pass {option_names.spell('validate', False)}.",
        )
    stats_rows, written = rows, rows
    if format == "fireworks":
        written, lost, fireworks_cut = wire.fireworks_preference_table(rows)
        dropped += lost
    report: dict[str, Any] = {"pairs": written.num_rows, "format": format, "tool_call_roundtrip": roundtrip}
    for key, value in (
        ("fireworks_turns_cut", fireworks_cut),
        ("trl_turns_cut", trl_cut),
        ("ties_dropped", ties),
        ("no_completion_dropped", dropped),
    ):
        if value:
            report[key] = value
    reports.pair_stats(report, stats_rows, written.num_rows)
    if not written.num_rows:
        if validate:
            raise ExportFormatError(
                "no_preference_pairs: nothing had a chosen and a rejected side; all-pass or all-fail runs "
                "produce no contrast",
                location="pairs",
                hint=f"Regrade or raise difficulty, or pass {option_names.spell('validate', False)} to get the empty "
                "report without a file.",
            )
        report["path"] = None
        return report
    if output:
        writer = export_writer.open_writer(output, export_writer.PREFERENCE_NULLS)
        try:
            writer.write(written)
            report["path"] = writer.commit()
        finally:
            writer.abort()
    return report


def _pair_table(pairs: Any, system: str, drop_ties: bool) -> tuple[pa.Table, int]:
    """Canonical preference rows (ties dropped when asked) and the tie count."""
    import datasets

    if isinstance(pairs, (str, os.PathLike)):  # a file of pairs, in any layout the preference config reads
        return _pair_table(_pair_file(os.fspath(pairs)), system, drop_ties)
    if isinstance(pairs, datasets.Dataset):
        table = pairs.with_format("arrow")[:]
        if system:
            for side in ("chosen", "rejected"):
                table = sources.PrependSystem(system, column=side)(table)
        if not drop_ties or "tie" not in table.column_names:
            return table, 0
        tie = pc.fill_null(_arrow.column(table, "tie"), False)
        return table.filter(pc.invert(tie)), int(pc.sum(tie).as_py() or 0)
    entries = [p for p in pairs if isinstance(p, dict)]
    not_pairs = [i for i, p in enumerate(entries) if not pair_layouts.holds_pair(p)]
    if not_pairs:
        raise ExportFormatError(
            f"export_preference takes chosen/rejected pairs, and {len(not_pairs)} of {len(entries)} entries have "
            "no chosen/rejected side",
            location=f"pairs[{not_pairs[0]}]",
            hint="Build the pairs first: export_preference(build_preference_pairs(rows), ...) or "
            "scored.select_for_preference().",
        )
    kept = [p for p in entries if not (drop_ties and p.get("tie"))]
    return sources.normalize_rows(kept, "preference", system), len(entries) - len(kept)


def _pair_file(path: str) -> Any:
    """The ``preference`` config's dataset of a file of pairs (JSONL, JSON or Parquet, any layout it reads)."""
    import datasets

    from whileai_datasets.builders import registry

    if not os.path.isfile(path):
        raise ExportFormatError("no such file", location=path, hint="Pass an existing file of chosen/rejected pairs, "
                                "or the pairs themselves.")
    registry.register()  # idempotent; load_dataset("whileai/export") needs it
    with option_names.read_for_another_call():  # export_preference takes none of the loader's own keywords
        return datasets.load_dataset("whileai/export", "preference", data_files=path, split="train")


def _pair_roundtrip(rows: pa.Table, format: str) -> dict[str, Any]:
    """The gate over both sides, counted as whileai does (chosen, rejected, chosen, ...)."""
    gate = gates.Roundtrip(format)
    counts = [gates.call_counts(_arrow.column(rows, side), gate.encoding) for side in ("chosen", "rejected")]
    checked = np.empty(2 * rows.num_rows, np.int64)
    invalid = np.empty(2 * rows.num_rows, np.int64)
    for k, (c, i) in enumerate(counts):
        checked[k::2], invalid[k::2] = c, i
    gate.add(checked, invalid, 0)
    return gate.report()


__all__ = ["export_dataset", "export_preference", "export_training", "run_training"]
