"""``Audit``: what a dataset will train, as figures, a dict and a text report.

The catalogue of findings (``FINDINGS``) is the one list of names the audit, its ``--fail-on`` option
and its readers share; ``Audit.to_dict()`` is the stable form other reports (the HTML one) build on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from whileai_datasets.auditing.tally import COUNT_EDGES, SHARE_EDGES, Finding, Histogram, Worst
from whileai_datasets.hub.configs import OPENS_WITH_MARKED_TURN, OPENS_WITH_MARKED_TURN_HINT
from whileai_datasets.privacy.scanning import Findings
from whileai_datasets.tokenize.mask_totals import naive_ratio
from whileai_datasets.tokenize.row_failures import CAUSES, NOTES, SALVAGES

#: Schema version of ``Audit.to_dict()``; bumped when a key changes meaning or goes away.
SCHEMA_VERSION = 1
#: Every finding: name -> (what it means, whether it is a problem, the unit of its amount).
#: Findings counted in training rows (``TRAINING_LEVEL``) count unrolled samples with ``unroll``; the
#: others count source rows. Either way, ``first`` holds source row numbers.
FINDINGS: dict[str, tuple[str, bool, str]] = {
    "zero_loss": ("rows that train nothing (any cause below)", True, ""),
    "unreadable": ("rows this package cannot read as a conversation (no conversation under any key it reads, or a "
                   "broken row): left out of training; the first error says which keys the row has", True, ""),
    "no_messages": ("rows with no message at all", True, ""),
    "only_system": ("rows holding only a system message: their conversation may sit under a key this package "
                    "does not read (e.g. 'conversations', 'question'/'reply')", True, ""),
    "no_assistant": ("rows with messages but no assistant turn", True, ""),
    "render_unsupervised": ("rows whose mask marks a turn but no token of the render is supervised", True, ""),
    "truncated_to_nothing": ("rows max_length left with no supervised token", True, "supervised tokens lost"),
    "truncated": ("rows max_length cut", True, "tokens cut"),
    "supervision_truncated": ("rows max_length cut supervised tokens from", True, "supervised tokens lost"),
    "split_into_rows": ("rows longer than max_length split at their user turns (truncation='split_turns'), each "
                        "piece repeating the system prompt and tools", False, "rows they became"),
    "emptied_by_think": ("assistant turns that were only a <think> block: stripping leaves them empty", True,
                         "turns"),
    "final_not_last": ("mask_mode='final' on rows whose last turn is not the assistant's: the trained turn is "
                       "not the last, and TRL's completion shape trains the messages after it too", True, ""),
    "completion_turns_lost": ("rows with several assistant turns in TRL's completion shape (format='trl' with "
                              "mask_mode='final'): only the last is trained, the others become context", True,
                              "turns not trained"),
    "trains_every_token": ("format='trl' messages rows: TRL's default SFTTrainer trains every token of them, "
                           "not the mask (tokenize them, or export with mask_mode='final' / unroll for prompt/"
                           "completion rows)", True, "tokens trained outside the mask"),
    "opens_with_marked_turn": (f"rows that publish refuses: {OPENS_WITH_MARKED_TURN} ({OPENS_WITH_MARKED_TURN_HINT})",
                               True, ""),
    "duplicate_system": ("rows opening with two system messages (system_prompt= given on rows that carry their "
                         "own)", True, ""),
    "missing_system": ("rows with no system message first", True, ""),
    "cut_by_token_cap": ("rows whose reply the token cap cut (finish_reason 'length'), trained as targets: a model "
                         "learns to stop mid-thought (filter on finish_reason == 'stop'); export warns on them too",
                         True, ""),
    "low_reward": ("rows with a reward below 0.5, trained as targets: a model learns the failure (filter on reward); "
                   "export warns on them too", True, ""),
    "long_tool_output": ("rows with a tool output over 100,000 characters: each costs tokenize time and memory in "
                         "proportion (the audit and show-mask, given max_length, read it only as far as max_length "
                         "reaches), and trains as context; cap them with max_tool_output_chars "
                         "(--max-tool-output-chars)", True,
                         "characters"),
    "read_to_max_length": ("rows with an untrained content (a tool output, a pasted log) so long that it alone "
                           "fills max_length: read only as far as max_length reaches, so it costs the audit about "
                           "as much as an ordinary row; what trains is counted exactly, the tokens before the cut "
                           "leave out the characters not read. Training still encodes them whole: cap such values "
                           "with max_tool_output_chars (--max-tool-output-chars)", False, "characters not read"),
    "think_stripped": ("rows whose <think> blocks the export strips (strip_think=True)", False, "messages"),
    "think_kept": ("rows whose <think> blocks are kept and trained (strip_think=False): with a tokenizer, "
                   "measured on the render, each block inside its turn's trained span", False, "messages"),
    "tool_output_cut": ("rows whose tool outputs max_tool_output_chars cut", False, "characters cut"),
    "template_drops_system": ("rows with a system message the template leaves out of the render", True, ""),
    "template_drops_tools": ("rows with tool schemas the template leaves out of the render", True, ""),
    "template_drops_reasoning": ("rows with reasoning (reasoning_content, or <think> kept in an earlier turn) "
                                 "the template leaves out of the render; with a tokenizer, a <think> block is "
                                 "measured on the render: left out, or rendered untrained in a turn that carries "
                                 "loss (such a row is not counted as think_kept)", True, ""),
    "template_drops_content_parts": ("rows with content given as parts (lists of typed parts) the template leaves "
                                     "out of the render, writes as the parts' data instead of their text, or "
                                     "fails on", True, ""),
    "template_drops_images": ("rows with an image part the template writes nothing for (it renders the text "
                              "beside it): the model never sees that an image was there", True, ""),
    "text_parts_joined": ("rows with content given as text-only parts (lists of {type: text} parts), handed to a "
                          "template that concatenates strings, or writes nothing for a list, as one string: the parts' texts joined with nothing "
                          "between, as templates that read parts write them (a lossless adaptation: the same text "
                          "trains; without it the template fails on these rows)", False, ""),
    "tool_call_ids_rewritten": ("rows with tool-call ids of another form than the template requires (9 "
                                "characters: Mistral's), handed to it rewritten, each id the first 9 hex digits of "
                                "its SHA-256, the same in the call and in its result's tool_call_id (a lossless "
                                "adaptation: the pairing is kept; the rewritten ids are what the calls' tokens "
                                "train)", False, ""),
    "session_turns_cut": ("conversations of agent sessions cut back to their last complete assistant turn (a call "
                          "left unanswered, a result with no call, a session that stopped inside a turn): what "
                          "followed is not trained (session_notes says what)", True, "messages cut"),
    "session_not_trained": ("conversations of agent sessions with items read but not trained: signed or redacted "
                            "thinking, encrypted reasoning, compaction summaries kept as context (loss 0), the "
                            "agent's own notices and bookkeeping (session_notes counts each kind)", False, "items"),
    "session_tools_inferred": ("conversations of agent sessions with tool schemas inferred from the calls made "
                               "(the session records none, and the agent's table lists not every tool called): "
                               "argument names and types, no descriptions",
                               False, ""),
    "template_adds_system": ("rows without a system message, given the template's own default one", True, ""),
    "salvaged": ("rows the template cannot take whole that train with salvage=True: adapted to what it takes "
                 "(each step counted below by name) or the turns before the one it cannot take", False,
                 "assistant turns not trained"),
    "salvageable": ("rows left out whole (bad rows) that would train with salvage=True (--salvage), adapted or "
                    "in part", True, "assistant turns salvage would keep"),
    # what salvage did to each salvaged row, step by step (``tokenize.row_failures.SALVAGES``)
    **{step: (description, False, "assistant turns") for step, description in SALVAGES.items()},
    "secrets": ("rows holding a secret (a cloud key, an API token, a private key, a JWT, a password in a URL or "
                "an .env line, a high-entropy value assigned to a secret-named key): publish refuses them; "
                "``privacy`` lists the kinds with masked previews, transforms.anonymize replaces them", True, ""),
    "personal_data": ("rows holding personal data (emails, user names in home-directory paths and ls -l "
                      "owners): transforms.anonymize(key=...) pseudonymizes them", False, ""),
    "bad_rows": ("rows the template cannot render or whose mask fails the check: tokenize(on_bad_row='skip') "
                 "leaves them out, on_bad_row='raise' stops on them; each is counted by cause below", True, ""),
    # one finding per cause of a bad row (``tokenize.row_failures``), with the template's own first message
    **{cause: (description, True, "") for cause, description in CAUSES.items()},
    # rows that train but are named, by cause (``tokenize.row_failures.NOTES``): not bad rows
    **{cause: (description, True, "") for cause, description in NOTES.items()},
}
#: Findings that name a lossless adaptation: the row's own text given to the template in the form it takes.
ADAPTATIONS = ("text_parts_joined", "tool_call_ids_rewritten")
TRAINING_LEVEL = frozenset(("zero_loss", "opens_with_marked_turn", "read_to_max_length", "render_unsupervised", "truncated_to_nothing",
                            "truncated", "split_into_rows",
                            "supervision_truncated", "completion_turns_lost", "tool_output_cut", "bad_rows",
                            "trains_every_token", *CAUSES, *NOTES))
#: ``--fail-on`` names that stand for several findings.
GROUPS = {"template_drops": ("template_drops_system", "template_drops_tools", "template_drops_reasoning",
                             "template_drops_content_parts", "template_drops_images")}
#: Per-row histograms: name -> edges.
HISTOGRAMS = {"tokens_per_row": COUNT_EDGES, "tokens_before_cut_per_row": COUNT_EDGES,
              "supervised_tokens_per_row": COUNT_EDGES,
              "supervised_share_per_row": SHARE_EDGES}


def _findings() -> dict[str, Finding]:
    return {name: Finding(name, text, problem, unit=unit) for name, (text, problem, unit) in FINDINGS.items()}


@dataclass
class Audit:
    """What a dataset will train, counted over every row.

    Attributes (figures): ``source``, ``options`` (the export options it was audited with), ``rows``
    (source rows), ``training_rows`` (rows the pipeline makes: unrolled samples with ``unroll``, plus
    rows with no message, which the export refuses),
    ``tokenized`` (whether token figures exist), ``tokens``, ``supervised_tokens``,
    ``tokens_before_cut``, ``naive_ratio`` (``tokenize.mask_totals.naive_ratio``, as ``mask_report`` computes it:
    the tokens of the rows with a supervised token over the supervised tokens, what a trainer that trains
    every token, e.g. TRL on ``format="trl"`` messages rows, trains against the mask), ``role_chars``
    (content characters per role of the training rows: a character share, not a token share),
    ``mask_methods``, ``template`` (``TemplateFacts.to_dict()`` or None), ``trainers``, ``findings``
    (name -> ``Finding``), ``histograms``, ``worst``, ``locations`` (row -> file and line).

    ``to_dict()`` (schema version ``SCHEMA_VERSION``), every key always present:

    * ``schema_version``, ``source`` (str), ``options`` (dict), ``rows``, ``training_rows``,
      ``tokenized`` (bool), ``row_unit`` ("row", or "sample" with ``unroll``: the unit the training-level
      findings and the per-row figures count; every ``row`` number is a source row either way)
    * ``tokens``: ``{"total", "supervised", "before_cut", "naive_ratio", "supervised_share"}`` (None
      without a tokenizer)
    * ``roles``: per role ``{"chars", "share"}``; ``role_measure`` says "content characters"
    * ``findings``: name -> ``{"description", "problem" (bool), "rows", "share" (of ``training_rows``
      for the findings in ``TRAINING_LEVEL``, else of ``rows``: ``share_of`` names it), "amount", "unit",
      "first": [{"row", "file", "line"}]}``,
      for every name of ``FINDINGS``, zero or not
    * ``problems``: names of the problem findings with rows > 0, in catalogue order
    * ``adaptations``: names of the findings in ``ADAPTATIONS`` with rows > 0 (each a lossless rewrite of the
      rows' own text into the form the template takes)
    * ``histograms``: name -> ``{"edges", "counts", "n", "min", "max", "mean"}`` (``counts[i]`` rows with
      ``edges[i] <= value < edges[i+1]``; the last bin also holds larger values); names:
      ``tokens_per_row`` (after ``max_length``), ``tokens_before_cut_per_row``, ``supervised_tokens_per_row``,
      ``supervised_share_per_row``
    * ``worst``: ``least_supervised`` (lowest supervised share: ``{"row", "supervised_share",
      "num_tokens", "num_supervised_tokens"}``) and ``most_cut`` (``{"row", "tokens_cut",
      "supervised_lost"}``), at most 10 each, with ``file``/``line``
    * ``privacy``: ``privacy.scanning.Findings.to_dict()``: ``scanned_rows``, ``secret_rows``, ``personal_rows``,
      and per kind of ``secrets`` and ``personal`` ``{"rows", "values", "first": [{"row", "field", "preview",
      "file", "line"}]}`` (``preview`` masked: never the value)
    * ``mask_methods``: method -> rows; ``template``: ``TemplateFacts.to_dict()`` or None
    * ``trainers``: trainer ("llama-factory", "ms-swift", "axolotl", "trl", and with a tokenizer "trl-default")
      -> ``{"config", "rows", "unit", "exact" (bool), "inexact": shape -> {"rows", "first", "effect"},
      "trains_tokens" (None without a tokenizer), "how"}``; ``first`` there is ``hub.trainer_gaps``' location
      text ("training rows, row N, messages[i]", N counting training rows), as ``publish`` reports it.
      "trl-default" (TRL's default ``SFTTrainer`` on the config ``publish`` makes) is measured only with
      ``audit(..., trl_default=True)``: otherwise its ``exact``, ``rows`` and ``trains_tokens`` are None and
      ``how`` says it was not measured (``exact`` is False where rows publish refuses are found, measured or not)

    ``first`` lists hold at most ``tally.FIRST_LOCATIONS`` (5) entries, in source order per chunk;
    ``file``/``line`` are set for JSONL path sources (None otherwise).
    """

    source: str
    options: dict[str, Any]
    rows: int = 0
    training_rows: int = 0
    tokenized: bool = False
    tokens: int = 0
    supervised_tokens: int = 0
    tokens_before_cut: int = 0
    #: tokens of the rows with a supervised token: what a tokenized dataset holds (the naive ratio's base)
    naive_tokens: int = 0
    role_chars: dict[str, int] = field(default_factory=dict)
    mask_methods: dict[str, int] = field(default_factory=dict)
    template: dict[str, Any] | None = None
    trainers: dict[str, Any] = field(default_factory=dict)
    findings: dict[str, Finding] = field(default_factory=_findings)
    histograms: dict[str, Histogram] = field(
        default_factory=lambda: {name: Histogram(edges) for name, edges in HISTOGRAMS.items()})
    worst: dict[str, Worst] = field(
        default_factory=lambda: {"least_supervised": Worst("supervised_share"), "most_cut": Worst("tokens_cut", highest=True)})
    locations: dict[int, dict[str, Any]] = field(default_factory=dict)
    #: secrets and personal data by kind, with masked previews (``privacy.scanning.Findings``)
    privacy: Findings = field(default_factory=Findings)

    @property
    def naive_ratio(self) -> float | None:
        return naive_ratio(self.naive_tokens, self.supervised_tokens)

    @property
    def rows_without_loss(self) -> int:
        return self.findings["zero_loss"].rows

    @property
    def problems(self) -> list[str]:
        return [name for name, found in self.findings.items() if found.problem and found.rows]

    def count(self, name: str) -> int:
        """Rows of a finding or of a group (``template_drops``); hyphens read as underscores."""
        key = name.replace("-", "_")
        return sum(self.findings[n].rows for n in GROUPS.get(key, (key,)))

    def _where(self, row: int) -> dict[str, Any]:
        return self.locations.get(row, {"row": row, "file": None, "line": None})

    def to_dict(self) -> dict[str, Any]:
        """The whole audit as JSON-ready data (see the class docstring for every key)."""
        total_chars = sum(self.role_chars.values())
        worst = {name: [{**entry, **{k: v for k, v in self._where(entry["row"]).items() if k != "row"}}
                        for entry in kept.to_list()] for name, kept in self.worst.items()}
        return {
            "schema_version": SCHEMA_VERSION,
            "source": self.source,
            "options": self.options,
            "rows": self.rows,
            "training_rows": self.training_rows,
            "row_unit": "sample" if self.options.get("unroll") else "row",
            "tokenized": self.tokenized,
            "tokens": {"total": self.tokens, "supervised": self.supervised_tokens,
                       "before_cut": self.tokens_before_cut, "naive_ratio": self.naive_ratio,
                       "supervised_share": self.supervised_tokens / self.tokens if self.tokens else None}
            if self.tokenized else None,
            "role_measure": "content characters",
            "roles": {role: {"chars": chars, "share": chars / total_chars if total_chars else 0.0}
                      for role, chars in self.role_chars.items()},
            "findings": {name: self._finding(found) for name, found in self.findings.items()},
            "problems": self.problems,
            "adaptations": [name for name in ADAPTATIONS if self.findings[name].rows],
            "histograms": {name: h.to_dict() for name, h in self.histograms.items()},
            "worst": worst,
            "mask_methods": dict(self.mask_methods),
            "template": self.template,
            "trainers": self.trainers,
            "privacy": self._privacy(),
        }

    def _privacy(self) -> dict[str, Any]:
        found = self.privacy.to_dict()
        for group in ("secrets", "personal"):
            for kind in found[group].values():
                kind["first"] = [{**self._where(p["row"]), **p} for p in kind["first"]]
        return found

    def _finding(self, found: Finding) -> dict[str, Any]:
        base = self.training_rows if found.name in TRAINING_LEVEL else self.rows
        share_of = "training_rows" if found.name in TRAINING_LEVEL else "rows"
        if found.name == "zero_loss" and self.findings["unreadable"].rows:  # it counts the unreadable rows too
            base += self.findings["unreadable"].rows
            share_of = "rows" if base == self.rows else share_of
        first = found.where or [self._where(r) for r in found.first]
        return {"description": found.description, "problem": found.problem, "rows": found.rows,
                "share": found.rows / base if base else 0.0,
                "share_of": share_of, "amount": found.amount,
                "unit": found.unit,
                "first": first, **({"first_error": found.first_error} if found.first_error else {})}

    def card_section(self, split: str = "train", *, with_plots: bool = True) -> Any:
        """This audit as a dataset-card section (``publish(..., card_sections=[...])``): the figures, the
        problems, and the plots as SVG files under ``card/audit/`` (``with_plots``: needs matplotlib)."""
        from whileai_datasets.auditing.card import card_section

        return card_section({split: self.to_dict()}, with_plots=with_plots)

    def format(self) -> str:
        """A readable text report (what the ``audit`` command prints)."""
        from whileai_datasets.auditing.text import format_audit

        return format_audit(self.to_dict())
