"""The audit's counting, one chunk at a time, and what it needs set up first.

``Run`` counts one chunk of canonical rows: the messages (``message_figures``), the export's
pipeline (``shaping.pipeline.training_chunk``) and, given a tokenizer, ``tokenize``'s columns
(``token_figures``), into an ``Audit``'s flat-memory counters. The local audit (``runner``) runs it over
every chunk of its source; the Ray one (``on_ray``) runs it in actors, block by block, and adds the
blocks up. ``checked_options`` and ``prepare`` are the checks and set-up both share.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import warnings
from collections import Counter
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from whileai_datasets._options import TrainingOptions, check_choice
from whileai_datasets._typing import OnBadRow
from whileai_datasets.auditing import message_figures, template_drops, token_figures
from whileai_datasets.auditing.audit_report import Audit
from whileai_datasets.columnar import _arrow
from whileai_datasets.errors import SchemaError
from whileai_datasets.hub import card_configs
from whileai_datasets.hub import configs as repo_configs
from whileai_datasets.hub import facts as config_facts
from whileai_datasets.hub import trainer_gaps
from whileai_datasets.sessions.common import CUT_NOTES as SESSION_CUT_NOTES
from whileai_datasets.shaping import pipeline, reports
from whileai_datasets.tokenize.long_values import cap_untrained, reach_chars
from whileai_datasets.tokenize.row_failures import CAUSES, SALVAGES, by_cause
from whileai_datasets.tokenize.token_masks import (
    BadMaskRowsWarning,
    PartialRenderWarning,
    SalvagedRowsWarning,
    Tokenize,
)
from whileai_datasets.tokenize.views import ThinkMeasure

#: Training options the audit does not use: the tools (with the rows), the export's gates and weights.
_NOT_RECORDED = ("tools", "validate", "weights")


def checked_options(*, tokenized: bool, on_bad_row: str, **given: Any) -> TrainingOptions:
    """The audit's training options (``given``: the export's keywords and ``max_length``), checked as every
    entry point checks them, and its ``on_bad_row``; ``tokenized``: a tokenizer was given."""
    options = TrainingOptions(**given)
    check_choice(on_bad_row, "on_bad_row", OnBadRow)
    if options.max_length is not None and not tokenized:
        raise SchemaError("max_length counts tokens, and no tokenizer was given", location="max_length",
                          hint="Pass tokenizer= (the one you will train with), or leave max_length out.")
    return options


def prepare(tokenizer: Any, template: Any, options: TrainingOptions
            ) -> tuple[Any, Tokenize | None, template_drops.TemplateFacts | None]:
    """The ``ChatTemplate`` rendered with (None when there is none), the ``tokenize`` transform the
    chunks go through (None without a tokenizer) and what the template leaves out of the render."""
    chat = template_drops.resolve(tokenizer, template)
    own = f"{getattr(tokenizer, 'name_or_path', '') or type(tokenizer).__name__}'s chat template"
    facts = template_drops.template_facts(chat, own if template is None else None) if chat is not None else None
    return chat, transform_of(tokenizer, chat, options), facts


def transform_of(tokenizer: Any, chat: Any, options: TrainingOptions) -> Tokenize | None:
    """``tokenize`` as the audit runs it: every row kept (those with no supervised token are counted), and
    a row the template cannot render or mask left out and counted by cause, whatever ``on_bad_row``: an audit
    never stops on a row. Where think blocks are kept, what of them trains is measured on each render
    (``ThinkMeasure``)."""
    if tokenizer is None:
        return None
    measure = None if options.strip_think else ThinkMeasure()
    return Tokenize(tokenizer, chat, options.max_length, on_bad_row="skip", keep_unsupervised=True,
                    on_render=measure, salvage=options.salvage, measure_salvage=True,
                    truncation=options.truncation)


def recorded(found: Audit) -> TrainingOptions:
    """The training options ``found`` was counted with (its recorded ``options``, without the tools)."""
    return TrainingOptions.from_dict({k: v for k, v in found.options.items() if k != "on_bad_row"})


def source_name(source: Any) -> str:
    """How the audit names its source: the path as given, else the source's type."""
    if isinstance(source, (str, os.PathLike)):
        return os.fspath(source)
    return type(source).__name__


def new_audit(name: str, options: TrainingOptions, on_bad_row: str, rows: int, tokenized: bool,
              facts: template_drops.TemplateFacts | None) -> Audit:
    """An empty ``Audit`` of ``rows`` source rows, the counters at zero."""
    kept = {k: v for k, v in options.to_dict().items() if k not in _NOT_RECORDED}
    return Audit(source=name, options={**kept, "on_bad_row": on_bad_row}, rows=rows,
                 tokenized=tokenized, template=facts.to_dict() if facts is not None else None)


def message_of(err: Any) -> str:
    """A failed row's error as a finding shows it: without the row (the finding's locations name it)."""
    problem = re.sub(r"^row \d+(?:, |: )", "", err.problem)
    return str(type(err)(problem, location=err.location, hint=None)).replace("\n", " ")


#: What the audit says of TRL's default route when it was not asked to measure it (``Run.unmeasured_hub_entry``).
TRL_DEFAULT_NOT_MEASURED = (
    "not measured (it renders every trained turn's prompt again): pass trl_default=True to audit(), or "
    "whileai-datasets audit --trl-default, to measure what TRL's default SFTTrainer labels on the config publish "
    "makes; publish measures it for the card")

#: A tool output longer than this is a finding (``long_tool_output``), unless the cap cuts it.
LONG_TOOL_OUTPUT = 100_000


class Run:
    """The counting, one chunk at a time."""

    def __init__(self, found: Audit, options: TrainingOptions, tools_json: str | None,
                 transform: Tokenize | None, facts: template_drops.TemplateFacts | None, *,
                 trl_default: bool = False) -> None:
        self.found, self.options, self.tools_json = found, options, tools_json
        self.transform, self.facts = transform, facts
        #: measure TRL's default route (``hub_route``): it renders each trained turn's prefixes, so only when asked
        self.trl_default = trl_default
        #: untrained contents longer than this are read only as far as max_length reaches (``long_values``)
        self.reach = reach_chars(transform.tokenizer, transform.max_length) if transform is not None else None
        self.gaps: list[Any] = []
        #: the chunk's source rows already named for reasoning the template drops (``reasoning_content``)
        self.reasoning_rows = np.zeros(0, dtype=np.int64)
        self.marked_rows = self.marked_turns = 0
        self.training_offset = 0
        #: what TRL's default SFTTrainer labels on the default config a publish of these rows makes (``hub.facts``)
        self.trl_route: Counter[str] = Counter()
        self.runs: dict[int, list[list[int]]] = {}  # per training row tokenize kept: its marked runs
        #: per training row salvaged: per marked turn, whether it trains (``row_failures.Salvage.trained``)
        self.salvaged_turns: dict[int, tuple[bool, ...]] = {}
        self.supervised_by_row: dict[int, int] = {}  # per training row tokenize kept: its supervised tokens
        #: format="trl" messages rows: TRL's default SFTTrainer trains every token of them
        self.naive = options.format == "trl" and not options.unroll and options.mask_mode != "final"

    def add(self, name: str, flags: np.ndarray, rows: np.ndarray, amounts: np.ndarray | None = None) -> None:
        self.found.findings[name].add(flags, rows, amounts)

    def chunk(self, chunk: pa.Table, offset: int) -> None:
        numbers = offset + np.arange(chunk.num_rows, dtype=np.int64)
        flags = message_figures.source_flags(chunk, self.options)
        self.source_findings(flags, numbers)
        secret, personal = self.found.privacy.add(chunk, offset)
        self.add("secrets", secret, numbers)
        self.add("personal_data", personal, numbers)
        self.export_warnings(chunk, numbers)
        self.long_tool_outputs(chunk, numbers)
        self.session_findings(chunk, numbers)
        keep = ~flags["no_messages"]
        self.found.training_rows += int((~keep).sum())
        self.add("zero_loss", flags["no_messages"], numbers)
        if not keep.any():
            return
        table = chunk.filter(pa.array(keep)) if not keep.all() else chunk
        shaped = dataclasses.replace(self.options, format="openai", weights=None)
        rows, _, _ = pipeline.training_chunk(table, 0, None, self.tools_json, shaped, False)
        sample_source = numbers[keep]
        if self.options.unroll:
            sample_source = np.repeat(sample_source, np.maximum(flags["assistant_turns"][keep], 1))
        self.training_findings(rows, sample_source)

    def session_findings(self, chunk: pa.Table, numbers: np.ndarray) -> None:
        """What the readers of agent sessions cut and left untrained (``session_notes``), and where the tool
        schemas came from (``tools_source``): columns only of datasets that hold sessions."""
        if "session_notes" not in chunk.column_names:
            return
        cut = np.zeros(len(numbers), dtype=np.int64)
        unread = np.zeros(len(numbers), dtype=np.int64)
        for index, notes in enumerate(chunk.column("session_notes").to_pylist()):
            counts = json.loads(notes) if isinstance(notes, str) else notes or {}
            cut[index] = counts.get("messages_cut", 0)
            unread[index] = sum(v for k, v in counts.items() if k not in SESSION_CUT_NOTES)
        self.add("session_turns_cut", cut > 0, numbers, cut)
        self.add("session_not_trained", unread > 0, numbers, unread)
        inferred = pc.fill_null(pc.match_substring(chunk.column("tools_source"), "inferred"), False)  # some or all
        self.add("session_tools_inferred", np.asarray(inferred.to_numpy(zero_copy_only=False), bool), numbers)

    def long_tool_outputs(self, chunk: pa.Table, numbers: np.ndarray) -> None:
        """Rows with a tool output over ``LONG_TOOL_OUTPUT`` characters that the tool-output cap leaves long."""
        cap = self.options.max_tool_output_chars
        if cap is not None and cap <= LONG_TOOL_OUTPUT or "messages" not in chunk.column_names:
            return
        column = _arrow.column(chunk, "messages")
        flat = _arrow.flat(column)
        if not pa.types.is_struct(flat.type) or not len(flat):
            return
        chars = pc.fill_null(pc.utf8_length(pc.struct_field(flat, "content")), 0).to_numpy(zero_copy_only=False)
        long = (np.asarray(pc.equal(pc.struct_field(flat, "role"), "tool").to_numpy(zero_copy_only=False), bool)
                & (chars > LONG_TOOL_OUTPUT))
        if long.any():
            owner = _arrow.parents(column)
            self.add("long_tool_output", np.bincount(owner[long], minlength=chunk.num_rows) > 0, numbers,
                     np.bincount(owner[long], weights=chars[long], minlength=chunk.num_rows).astype(np.int64))

    def export_warnings(self, chunk: pa.Table, numbers: np.ndarray) -> None:
        """The rows ``export_dataset`` warns about: cut by the reply token cap, a reward below the pass mark."""
        if "finish_reason" in chunk.column_names:
            cut = pc.fill_null(pc.equal(chunk.column("finish_reason"), "length"), False)
            self.add("cut_by_token_cap", np.asarray(cut.to_numpy(zero_copy_only=False), dtype=bool), numbers)
        if "reward" in chunk.column_names:
            low = pc.fill_null(pc.less(chunk.column("reward"), reports.PASS_THRESHOLD), False)
            self.add("low_reward", np.asarray(low.to_numpy(zero_copy_only=False), dtype=bool), numbers)

    def source_findings(self, flags: dict[str, Any], numbers: np.ndarray) -> None:
        for name in ("no_messages", "only_system", "no_assistant", "duplicate_system", "missing_system",
                     "final_not_last"):
            self.add(name, flags[name], numbers)
        measured = self.measures_think()  # else what trains of the think blocks is said on the render
        if not measured:
            think_name = "think_stripped" if self.options.strip_think else "think_kept"
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
        if facts.think_in_history == "drops" and not self.options.strip_think and not measured:
            reasoning |= flags["think_before_last"]
        self.add("template_drops_reasoning", reasoning, numbers)
        self.reasoning_rows = numbers[reasoning]
        dropped_parts = flags["parts"] if facts.renders_content_parts is False else np.zeros(len(numbers), bool)
        if facts.image_parts == "dropped":  # text beside an image: the template writes neither
            dropped_parts = dropped_parts | flags["image_parts"]
        self.add("template_drops_content_parts", dropped_parts, numbers)
        if facts.image_parts == "text_only":
            self.add("template_drops_images", flags["image_parts"], numbers)
        if facts.joins_text_parts:
            self.add("text_parts_joined", flags["text_parts"], numbers)
        if facts.rewrites_tool_call_ids:
            self.add("tool_call_ids_rewritten", flags["ids_not_nine"], numbers)
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
        if self.options.format == "trl" and self.options.mask_mode == "final" and not self.options.unroll:
            self.add("completion_turns_lost", turns > 1, sample_source, np.maximum(turns - 1, 0))
        if self.naive and self.transform is None:
            self.add("trains_every_token", np.ones(rows.num_rows, dtype=bool), sample_source)
        marked = np.asarray(_arrow.flat(_arrow.column(rows, "loss_mask")).to_numpy(zero_copy_only=False))
        per_row = np.bincount(_arrow.parents(_arrow.column(rows, "loss_mask")), weights=marked,
                              minlength=rows.num_rows)
        self.marked_rows += int((per_row > 0).sum())
        self.marked_turns += int(marked.sum())
        opens = repo_configs.opens_with_marked_turn(rows)
        self.add("opens_with_marked_turn", opens, sample_source)
        self.gaps.append(trainer_gaps.chunk_gaps(rows, "training rows", offset=self.training_offset))
        self.training_offset += rows.num_rows
        zero = per_row == 0
        if self.transform is not None:
            zero |= self.token_findings(rows, sample_source, per_row > 0)
            if self.trl_default:
                self.hub_route(rows, opens)
        self.add("zero_loss", zero, sample_source)

    def hub_route(self, rows: pa.Table, opens: np.ndarray) -> None:
        """TRL's default ``SFTTrainer`` on the default config ``publish`` makes of these rows (those it does not
        refuse), counted as the card counts it (``hub.facts.shaped_for_trl``; at the audit's max_length, else TRL's
        default one). The marked runs ``token_findings`` kept are the turns' targets, when nothing was cut."""
        transform = self.transform
        assert transform is not None
        kept = np.flatnonzero(~opens)
        refused = np.flatnonzero(opens).tolist()  # publish refuses them: their tokens are not TRL's to train
        self.trl_route["refused_tokens"] += sum(self.supervised_by_row.get(row, 0) for row in refused)
        canonical = repo_configs.canonical_chunk(rows.take(pa.array(kept, pa.int64())) if opens.any() else rows,
                                                 "training rows")
        runs, self.runs = self.runs, {}
        salvaged, self.salvaged_turns = self.salvaged_turns, {}
        targets = None
        if self.options.max_length is None:
            targets = config_facts.turn_targets(canonical, transform.tokenizer, transform.chat,
                                                {j: runs[int(i)] for j, i in enumerate(kept) if int(i) in runs},
                                                kept={j: salvaged[int(i)] for j, i in enumerate(kept)
                                                      if int(i) in salvaged})
        trainer = repo_configs.trainer_table(canonical, "training rows", form=transform.form)
        shaped, counts = config_facts.shaped_for_trl(trainer, canonical, transform.tokenizer, transform.chat, targets,
                                                self.options.max_length or config_facts.TRL_MAX_LENGTH,
                                                transform.encoder, salvage=self.options.salvage)
        self.trl_route.update(counts)
        self.trl_route["rows"] += shaped.num_rows

    def token_findings(self, rows: pa.Table, sample_source: np.ndarray, marked: np.ndarray) -> np.ndarray:
        """Tokenize the chunk once and count; returns, per training row, whether it has no supervised token."""
        found = self.found
        capped, unread = cap_untrained(rows, self.reach)  # what trains is the same (``tokenize.long_values``)
        self.add("read_to_max_length", unread > 0, sample_source, unread)
        numbered = _arrow.set_column(capped, token_figures.ROW_COLUMN, pa.array(np.arange(rows.num_rows)))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", BadMaskRowsWarning)  # counted below as bad_rows
            warnings.simplefilter("ignore", SalvagedRowsWarning)  # counted below as salvaged
            warnings.simplefilter("ignore", PartialRenderWarning)  # counted below, each under its cause
            tokenized = self.transform(numbered, indices=sample_source.tolist())  # type: ignore[misc]
        figures = token_figures.token_columns(tokenized)
        position = figures["row"]
        if self.trl_default:  # what ``hub_route`` needs of the render: supervised tokens, the turns' targets
            self.supervised_by_row = dict(zip(position.tolist(), figures["num_supervised_tokens"].tolist()))
            if self.options.max_length is None:  # each kept row's marked runs
                self.runs = dict(zip(position.tolist(), config_facts.marked_runs(tokenized)))
        source = sample_source[position]
        skipped = np.ones(rows.num_rows, dtype=bool)
        skipped[position] = False
        self.add("bad_rows", skipped, sample_source)
        failures = self.transform.failures  # type: ignore[union-attr]
        if self.trl_default and self.options.max_length is None:  # what each salvaged row trains of its turns
            self.salvaged_turns = {f.position: f.salvage.trained for f in failures.salvaged if f.salvage is not None}
        self.salvage_findings(failures.items, failures.salvaged, rows.num_rows, sample_source)
        self.failure_findings(failures.take(), rows.num_rows, sample_source)
        if self.measures_think():
            self.think_findings(self.transform.on_render.take(rows.num_rows), sample_source)  # type: ignore[union-attr]
        self.failure_findings(self.transform.notices.take(), rows.num_rows, sample_source)  # type: ignore[union-attr]
        found.tokens += int(figures["num_tokens"].sum())
        found.supervised_tokens += int(figures["num_supervised_tokens"].sum())
        found.tokens_before_cut += int((figures["num_tokens"] + figures["tokens_truncated"]).sum())
        found.naive_tokens += int(figures["num_tokens"][figures["num_supervised_tokens"] > 0].sum())
        amounts = {"truncated": figures["tokens_truncated"], "supervision_truncated":
                   figures["supervised_tokens_truncated"], "truncated_to_nothing": figures["supervised_tokens_truncated"]}
        for name, flags in token_figures.token_flags(figures, marked[position]).items():
            self.add(name, flags, source, amounts.get(name))
        pieces = np.bincount(position, minlength=rows.num_rows)  # a row split into several (``split_turns``)
        self.add("split_into_rows", pieces > 1, sample_source, pieces)
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
        zero = skipped.copy()  # a row left out trains nothing
        zero[position] = figures["num_supervised_tokens"] == 0
        return zero

    def measures_think(self) -> bool:
        """Whether what trains of the rows' think blocks is measured on their renders (``ThinkMeasure``)."""
        return self.transform is not None and isinstance(self.transform.on_render, ThinkMeasure)

    def think_findings(self, counts: np.ndarray, sample_source: np.ndarray) -> None:
        """Per source row, from its samples' renders (``views.think_in_render``): ``think_kept`` where every
        think block of its turns trains, else ``template_drops_reasoning`` where the template leaves one
        out (or renders it untrained in a turn that carries loss); never both for one row."""
        sources, inverse = np.unique(sample_source, return_inverse=True)
        per_row = np.zeros((len(sources), 3), dtype=np.int64)
        np.add.at(per_row, inverse, counts)
        _, trained, lost = per_row.T
        self.add("think_kept", (trained > 0) & (lost == 0), sources, trained)
        self.add("template_drops_reasoning", (lost > 0) & ~np.isin(sources, self.reasoning_rows), sources)

    def salvage_findings(self, failed: list[Any], salvaged: list[Any], rows: int, sample_source: np.ndarray) -> None:
        """``salvaged``: rows that train adapted or a prefix (``salvage=True``), with the turns not trained, and
        each step under its own name (``row_failures.SALVAGES``) with the turns it concerns; ``salvageable``:
        rows dropped whole that salvage would train, with the turns it would keep."""
        for name, items, index in (("salvaged", salvaged, 1), ("salvageable", failed, 0)):
            kept = [f for f in items if f.salvage is not None]
            flags, amounts = np.zeros(rows, dtype=bool), np.zeros(rows, dtype=np.int64)
            flags[[f.position for f in kept]] = True
            amounts[[f.position for f in kept]] = [f.salvage[index] for f in kept]
            self.add(name, flags, sample_source, amounts)
        for step in SALVAGES:
            flags, amounts = np.zeros(rows, dtype=bool), np.zeros(rows, dtype=np.int64)
            for failure in salvaged:
                turns = dict(failure.salvage.steps).get(step)
                if turns is not None:
                    flags[failure.position], amounts[failure.position] = True, turns
            self.add(step, flags, sample_source, amounts)

    def failure_findings(self, failures: list[Any], rows: int, sample_source: np.ndarray) -> None:
        """Each failed row under its cause's finding, with the cause's first message (the template's own)."""
        for cause, items in by_cause(failures).items():
            flags = np.zeros(rows, dtype=bool)
            flags[[f.position for f in items]] = True
            finding = self.found.findings[cause]
            first_row = int(sample_source[min(f.position for f in items)])
            if finding.first_error is None or (finding.first and first_row < finding.first[0]):
                finding.first_error = message_of(min(items, key=lambda f: f.position).error)
            finding.add(flags, sample_source)

    def finish(self) -> None:
        found = self.found
        report = trainer_gaps.trainer_report(trainer_gaps.merge_gaps(self.gaps),
                                             {"messages": self.marked_rows, "sharegpt": self.marked_turns})
        supervised = found.supervised_tokens if found.tokenized else None
        for entry in report.values():
            entry["trains_tokens"] = supervised
            entry["how"] = "the mask exactly, except the rows listed as inexact"
        fmt, naive = self.options.format, self.naive
        report["trl"] = {
            "config": "this export (format='trl')" if fmt == "trl" else "tokenized (assistant_masks)",
            "unit": "rows", "rows": found.training_rows, "exact": not naive, "inexact": {},
            "trains_tokens": (found.tokens if naive else supervised) if found.tokenized else None,
            "how": "messages rows: SFTTrainer trains every token (the naive route)" if naive else
            "prompt/completion rows: the last assistant turn and what follows it" if fmt == "trl" else
            "pre-tokenized rows: exactly the assistant_masks",
        }
        if found.tokenized:
            report["trl-default"] = self.hub_entry() if self.trl_default else self.unmeasured_hub_entry()
        if (found.supervised_tokens == 0) if found.tokenized else (self.marked_rows == 0):
            for entry in report.values():  # nothing trains: no trainer trains "exactly" anything
                entry["exact"], entry["how"] = False, f"nothing trains: {nothing_trains(found)}"
        found.trainers = report


    def hub_entry(self) -> dict[str, Any]:
        """The ``trl-default`` trainer: TRL's default ``SFTTrainer`` on the repo's default config, in the card's words."""
        route = self.trl_route
        marked = self.found.supervised_tokens - route["refused_tokens"]
        exact, said = config_facts.trl_verdict({**route, "marked_tokens": marked}, card_configs.TOKENIZED_INSTEAD)
        return self.hub_figures(route["rows"], exact, route["supervised_tokens"], said)

    def unmeasured_hub_entry(self) -> dict[str, Any]:
        """The ``trl-default`` trainer when ``hub_route`` did not run: ``exact`` None, and how to measure it."""
        return self.hub_figures(None, None, None, TRL_DEFAULT_NOT_MEASURED)

    def hub_figures(self, rows: int | None, exact: bool | None, tokens: int | None, said: str) -> dict[str, Any]:
        """The ``trl-default`` entry, the rows publish refuses (``opens_with_marked_turn``) said first, in its words."""
        opening = self.found.findings["opens_with_marked_turn"].rows
        if opening:
            exact, said = False, (f"publish refuses these rows ({opening:,}): {repo_configs.OPENS_WITH_MARKED_TURN} "
                                  f"({repo_configs.OPENS_WITH_MARKED_TURN_HINT}); on the others, {said}")
        return {"config": "default (published prompt/completion rows)", "unit": "rows", "rows": rows, "exact": exact,
                "inexact": {}, "trains_tokens": tokens, "how": said}


def nothing_trains(found: Audit) -> str:
    """Why no row trains, by the problem findings that count the most rows (the causes of a bad row first)."""
    causes = [name for name in ("bad_rows", *CAUSES) if found.findings[name].rows]
    named = [n for n in causes if n != "bad_rows"] or [n for n in found.problems if n != "zero_loss"][:3]
    return "; ".join(f"{found.findings[n].rows:,} {n.replace('_', '-')}" for n in named) or "no row has a loss"
