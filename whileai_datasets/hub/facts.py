"""What the card says about each config, measured on the published rows chunk by chunk.

Every function here takes one chunk of a config (and the source chunk it was built from) and
returns counts that add up over the chunks of a split: the card's facts are their sums, so a
publish never holds a split to measure it. The row count of every config is counted by the
publisher itself (``rows``).
"""

from __future__ import annotations

import contextlib
import json
import warnings
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from whileai_datasets.columnar import _arrow, _portable
from whileai_datasets.tokenize import token_masks
from whileai_datasets.tokenize.encode_queue import EncodeQueue
from whileai_datasets.tokenize.token_encode import PieceEncoder, backend_of
from whileai_datasets.tokenize.notices import BadMaskRowsWarning, SalvagedRowsWarning
from whileai_datasets.transforms.think import strip_think_text

_TOKENIZE_ROWS = 256  # rows rendered and tokenized per call


def marked(canonical: pa.Table) -> np.ndarray:
    """Per message of `canonical`: whether its `loss_mask` entry marks it."""
    flat = _arrow.flat(_arrow.column(canonical, "loss_mask"))
    return _arrow.to_numpy_bool(pc.not_equal(pc.fill_null(flat, 0), 0))


def row_marks(canonical: pa.Table) -> np.ndarray:
    """Per row: how many of its messages are marked."""
    lists = _arrow.column(canonical, "messages")
    return np.bincount(_arrow.parents(lists), weights=marked(canonical), minlength=canonical.num_rows)


def canonical_facts(_config: pa.Table, canonical: pa.Table) -> dict[str, int]:
    """Messages, assistant turns and marked turns of the canonical rows."""
    lists = _arrow.column(canonical, "messages")
    roles = pc.struct_field(_arrow.flat(lists), "role")
    return {"messages": len(roles), "assistant_turns": int(pc.sum(pc.equal(roles, "assistant")).as_py() or 0),
            "marked_turns": int(marked(canonical).sum()),
            "rows_without_marked_turn": int(np.sum(row_marks(canonical) == 0))}


def tokenized_facts(tokenized: pa.Table, _canonical: pa.Table) -> dict[str, int]:
    """Tokens and marked tokens of the tokenized rows."""
    ids, masks = _arrow.column(tokenized, "input_ids"), _arrow.column(tokenized, "assistant_masks")
    return {"tokens": len(_arrow.flat(ids)), "marked_tokens": int(pc.sum(_arrow.flat(masks)).as_py() or 0)}


#: TRL 1.16's default ``SFTConfig.max_length``: SFTTrainer keeps each row's first 1024 tokens (``keep_start``)
#: and drops the rows left with no label.
TRL_MAX_LENGTH = 1024
#: Fact keys of a TRL failure: ``TRL_FAILURE + message`` counts the rows whose tokenization raised it.
TRL_FAILURE = "trl_failure: "


@dataclass(frozen=True)
class TrlDefaultRoute:
    """What TRL 1.16's ``SFTTrainer`` with a default ``SFTConfig`` labels on the default config, and what this
    package's mask marks on the same canonical rows (the audit's supervised count), per chunk.

    TRL's preparation (``SFTTrainer._prepare_dataset``, 1.16) is reproduced step by step with the tokenizer's own
    ``apply_chat_template``, the call TRL makes: ``prompt`` with the generation prompt and ``prompt + completion``
    without it (``tools`` from the row), labels on the tokens after their common prefix (``common_prefix_length``),
    then the first ``max_length`` tokens kept. A row whose render raises would stop TRL's ``map`` (counted under
    ``TRL_FAILURE`` + the error); a config with an ``images`` column is a vision dataset to TRL (``vision_rows``),
    which it prepares with a processor at batch time, not measured here.

    Facts: ``tokens`` / ``supervised_tokens`` (TRL's sequence and label tokens), ``marked_tokens`` (the mask's,
    whole rows, no max_length), ``trl_cut_tokens`` (labels past ``max_length``), ``trl_failed_rows``,
    ``vision_rows``; with ``salvage`` (``tokenize(salvage=True)``'s masks), ``salvaged_rows`` and
    ``salvaged_turns_cut``: the conversations that train only the turns before one the template cannot take.
    """

    tokenizer: Any
    template: Any = None
    max_length: int | None = TRL_MAX_LENGTH
    salvage: bool = False

    def __call__(self, trainer: pa.Table, canonical: pa.Table) -> dict[str, int]:
        facts = trl_route(trainer, self.tokenizer, self.template, self.max_length)
        facts["marked_tokens"] = marked_tokens(self.tokenizer, self.template, canonical, self.salvage,
                                               facts if self.salvage else None)
        facts["rows_left_out"] = int(marked(canonical).sum()) - trainer.num_rows
        facts["shaped_rows"] = int(np.sum(_shaped(trainer)))
        return dict(facts)


def unmeasured_facts(trainer: pa.Table, _canonical: pa.Table) -> dict[str, int]:
    """What a publish without a tokenizer can say of TRL's route: rows TRL takes for a vision dataset (the config
    has an ``images`` column), and rows whose messages hold content as a list of parts (``parts_rows``)."""
    parts = np.zeros(trainer.num_rows, dtype=bool)
    for name in ("prompt", "completion"):
        lists = _arrow.column(trainer, name)
        flat = _arrow.flat(lists)
        texts = flat.storage if isinstance(flat, pa.ExtensionArray) else flat
        if pa.types.is_string(texts.type) and len(texts):
            hit = _arrow.to_numpy_bool(pc.fill_null(pc.match_substring(texts, '"content": ['), False))
            parts |= np.bincount(_arrow.parents(lists)[hit], minlength=trainer.num_rows) > 0
    return {"vision_rows": trainer.num_rows if "images" in trainer.column_names else 0,
            "parts_rows": int(parts.sum())}


def _shaped(trainer: pa.Table) -> np.ndarray:
    """Per row: it carries ``chat_template_kwargs`` of its own (``shaped_for_trl``)."""
    if KWARGS_COLUMN not in trainer.column_names:
        return np.zeros(trainer.num_rows, dtype=bool)
    kwargs = trainer.column(KWARGS_COLUMN).combine_chunks()
    texts = kwargs.storage if isinstance(kwargs, pa.ExtensionArray) else kwargs
    return _arrow.to_numpy_bool(pc.not_equal(pc.fill_null(texts, "{}"), "{}"))


def trl_route(trainer: pa.Table, tokenizer: Any, template: Any, max_length: int | None = TRL_MAX_LENGTH
              ) -> Counter[str]:
    """``TrlDefaultRoute``'s facts of TRL's side alone (every key but ``marked_tokens``)."""
    text = getattr(template, "text", template)
    return route_facts(trainer, trl_ids(tokenizer, text, _decoded_rows(trainer)), max_length)


def route_facts(trainer: pa.Table, outcomes: list[tuple[list[int], list[int]] | Exception],
                max_length: int | None) -> Counter[str]:
    """TRL's figures from each row's (prompt ids, prompt + completion ids), or the error its render raised."""
    facts: Counter[str] = Counter()
    if "images" in trainer.column_names:
        facts["vision_rows"] += trainer.num_rows
    for outcome in outcomes:
        if isinstance(outcome, Exception):  # it stops TRL's map: counted by its message
            facts["trl_failed_rows"] += 1
            facts[TRL_FAILURE + _first_line(outcome)] += 1
            continue
        prompt, whole = outcome
        labels = len(whole) - _common_prefix(prompt, whole)
        kept = len(whole) if max_length is None else min(len(whole), max_length)
        trained = max(0, kept - (len(whole) - labels))
        facts["tokens"] += kept
        facts["supervised_tokens"] += trained
        facts["trl_cut_tokens"] += labels - trained
    return facts


def trl_ids(tokenizer: Any, template: str | None, rows: list[dict[str, Any]], encoder: PieceEncoder | None = None,
            prompts: list[list[int] | None] | None = None) -> list[tuple[list[int], list[int]] | Exception]:
    """Per conversational prompt/completion row, as TRL 1.16's ``tokenize_fn`` tokenizes it: the ids of ``prompt``
    with the generation prompt and of ``prompt + completion`` (``tools`` and ``chat_template_kwargs`` from the
    row), or what the render raised. ``apply_chat_template(tokenize=True)`` is its render then
    ``tokenizer(text, add_special_tokens=False)``: rendered here in batches of rows with the same tools and
    kwargs (one ``apply_chat_template`` call with a list of conversations renders each as a call of its own
    would; a batch that raises is rendered again row by row, to find each row's error). ``encoder``: the
    ``PieceEncoder`` of the ``Tokenize`` that tokenized the same rows, when there is one: each batch is then
    encoded on ``EncodeQueue``'s thread while the next renders, and the long pieces the conversation's render
    already met (tool results, schemas) are reused across a row's prefixes; else all are encoded in one batch.
    ``prompts``: per row, its prompt's ids when already measured with the same prompt, tools and kwargs (another
    form of the row, ``shaped_for_trl``): only ``prompt + completion`` is rendered for it."""
    known = prompts if prompts is not None else [None] * len(rows)
    texts: list[list[str]] = [[] for _ in rows]
    outcomes: list[Any] = [None] * len(rows)
    groups: dict[str, list[int]] = {}
    for index, row in enumerate(rows):
        key = json.dumps([row.get("tools"), row.get(KWARGS_COLUMN), known[index] is None], default=str)
        groups.setdefault(key, []).append(index)
    queued = encoder is not None and backend_of(tokenizer) is not None
    tickets: list[tuple[list[int], Any]] = []
    with EncodeQueue(tokenizer, encoder) if queued else contextlib.nullcontext() as queue:  # type: ignore[arg-type]
        for members in groups.values():
            kwargs = _render_kwargs(template, rows[members[0]])
            for start in range(0, len(members), _RENDER_ROWS):
                batch = members[start:start + _RENDER_ROWS]
                found = _rendered(tokenizer, [rows[i] for i in batch], kwargs, known[batch[0]] is None)
                for i, texts_or_error in zip(batch, found):
                    if isinstance(texts_or_error, Exception):
                        outcomes[i] = texts_or_error
                    else:
                        texts[i] = texts_or_error
                if queue is not None:
                    done = [i for i in batch if outcomes[i] is None]
                    tickets.append((done, queue.submit([t for i in done for t in texts[i]])))
        for done, ticket in tickets:
            if ticket is not None:
                encoded = iter(queue.result(ticket))
                for i in done:
                    outcomes[i] = [next(encoded)[0].tolist() for _ in texts[i]]
    if not queued:
        done = [i for i, o in enumerate(outcomes) if o is None]
        ids = iter(tokenizer([t for i in done for t in texts[i]], add_special_tokens=False)["input_ids"] if done
                   else [])
        for i in done:
            outcomes[i] = [next(ids) for _ in texts[i]]
    return [o if isinstance(o, Exception) else (known[i], o[0]) if known[i] is not None else (o[0], o[1])
            for i, o in enumerate(outcomes)]


def _rendered(tokenizer: Any, rows: list[dict[str, Any]], kwargs: dict[str, Any], with_prompt: bool = True
              ) -> list[list[str] | Exception]:
    """Each row's texts, or what its render raised: the prompt with the generation prompt (``with_prompt``), then
    prompt + completion."""
    try:
        heads = tokenizer.apply_chat_template([row["prompt"] for row in rows], add_generation_prompt=True,
                                              **kwargs) if with_prompt else None
        wholes = tokenizer.apply_chat_template([row["prompt"] + row["completion"] for row in rows], **kwargs)
        return [[head, whole] for head, whole in zip(heads, wholes)] if heads is not None else [[w] for w in wholes]
    except Exception:  # noqa: BLE001  (each row again, alone: its own error, or its texts)
        pass
    found: list[list[str] | Exception] = []
    for row in rows:
        try:
            found.append(_rendered_alone(tokenizer, row, kwargs, with_prompt))
        except Exception as err:  # noqa: BLE001  (reported per row: it stops TRL's map)
            found.append(err)
    return found


def _rendered_alone(tokenizer: Any, row: dict[str, Any], kwargs: dict[str, Any], with_prompt: bool) -> list[str]:
    prompt = [tokenizer.apply_chat_template(row["prompt"], add_generation_prompt=True, **kwargs)] if with_prompt \
        else []
    return [*prompt, tokenizer.apply_chat_template(row["prompt"] + row["completion"], **kwargs)]


#: rows rendered per ``apply_chat_template`` call of ``trl_ids``
_RENDER_ROWS = 64


def _render_kwargs(template: str | None, row: dict[str, Any]) -> dict[str, Any]:
    tools = row.get("tools")
    return {"chat_template": template, "tools": json.loads(tools) if isinstance(tools, str) else tools,
            "tokenize": False, **(row.get(KWARGS_COLUMN) or {})}


def marked_tokens(tokenizer: Any, template: Any, canonical: pa.Table, salvage: bool = False,
                  salvaged: Counter[str] | None = None) -> int:
    """Tokens this package's mask marks on canonical rows, counted as the audit counts them (rows the template
    cannot render or mask left out; with ``salvage``, the turns before the one it cannot take kept). ``salvaged``:
    gains ``salvaged_rows`` and ``salvaged_turns_cut`` (the loss-carrying turns those rows do not train)."""
    transform = token_masks.Tokenize(tokenizer, template, on_bad_row="skip", keep_unsupervised=True, salvage=salvage)
    total = 0
    for start in range(0, canonical.num_rows, _TOKENIZE_ROWS):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", BadMaskRowsWarning)  # those rows are the audit's bad rows
            warnings.simplefilter("ignore", SalvagedRowsWarning)  # counted in `salvaged`, as the audit counts them
            chunk = transform(canonical.slice(start, _TOKENIZE_ROWS))
        total += int(pc.sum(_arrow.flat(_arrow.column(chunk, "assistant_masks"))).as_py() or 0)
        if salvaged is not None:
            for failure in transform.failures.take_salvaged():
                salvaged["salvaged_rows"] += 1
                salvaged["salvaged_turns_cut"] += failure.salvage.cut if failure.salvage is not None else 0
    return total


def trl_labels(tokenized: pa.Table, max_length: int | None = TRL_MAX_LENGTH) -> int:
    """Labels other than -100 a default ``SFTTrainer`` keeps of pre-tokenized rows (their first ``max_length``)."""
    labels = _arrow.column(tokenized, "labels")
    flat = np.asarray(_arrow.flat(labels).to_numpy(zero_copy_only=False))
    position = np.arange(len(flat)) - _arrow.offsets_of(_arrow.lengths(labels))[:-1][_arrow.parents(labels)]
    kept = flat != -100
    if max_length is not None:
        kept &= position < max_length
    return int(kept.sum())


def trl_failures(facts: dict[str, int]) -> dict[str, int]:
    """The TRL failures in a config's facts: error message -> rows."""
    return {key[len(TRL_FAILURE):]: n for key, n in facts.items() if key.startswith(TRL_FAILURE)}


def _first_line(err: BaseException) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    return f"{type(err).__name__}: {text[:200]}"


def _decoded_rows(table: pa.Table) -> list[dict[str, Any]]:
    names = [n for n in ("prompt", "completion", "tools", KWARGS_COLUMN) if n in table.column_names]
    features = _portable.portable_features(table.select(names).schema)
    return [features.decode_example(row) for row in table.select(names).to_pylist()]


def _common_prefix(left: list[int], right: list[int]) -> int:
    if len(left) <= len(right) and right[:len(left)] == left:  # the prompt's ids begin the whole's: most rows
        return len(left)
    n = min(len(left), len(right))
    diff = np.flatnonzero(np.asarray(left[:n]) != np.asarray(right[:n]))
    return int(diff[0]) if len(diff) else n


def trl_verdict(facts: Mapping[str, int], instead: str) -> tuple[bool | None, str]:
    """Whether TRL's default ``SFTTrainer`` trains on the default config exactly what the mask marks, and the
    sentence the card and the audit say it with. ``facts``: ``TrlDefaultRoute``'s, summed (None: no tokenizer, not
    measured); ``instead``: the config to name where it is not exact."""
    failures = trl_failures(dict(facts))
    rows = int(facts.get("rows", 0))
    if facts.get("vision_rows"):
        return False, ("not exact: the rows carry an `images` column, so SFTTrainer takes them for a vision dataset: "
                       "it refuses a text-only model (\"The dataset appears to be vision-related\") and a "
                       "vision-language processor tokenizes them at batch time, which was not measured here; for a "
                       f"text-only model, {instead}")
    if failures:
        said = "; ".join(f"{n} rows: {message}" for message, n in sorted(failures.items(), key=lambda i: -i[1])[:3])
        return False, (f"not exact: the chat template raises on {facts.get('trl_failed_rows', 0)} of {rows} rows "
                       f"under TRL's tokenization ({said}), so SFTTrainer stops before it trains; {instead}")
    supervised, marked = int(facts.get("supervised_tokens", 0)), int(facts.get("marked_tokens", 0))
    if supervised == marked:
        return True, f"exact: TRL labels {supervised} tokens, the {marked} the mask marks"
    why = []
    cut = int(facts.get("trl_cut_tokens", 0))
    if cut:
        why.append(f"{cut} labelled tokens lie past SFTConfig's default max_length {TRL_MAX_LENGTH}")
    if supervised + cut != marked:
        why.append("the chat template renders a turn differently as the last message than inside the conversation "
                   "(e.g. it writes a <think> block into the last turn, or drops earlier turns' reasoning)")
    return False, (f"not exact: TRL labels {supervised} tokens where the mask marks {marked} "
                   f"({supervised - marked:+d} tokens): {'; '.join(why)}; {instead}")


# --- the default config shaped for TRL's route, row by row, by measuring ------------------------------------
#: What a default row may be handed to reach the render of its turn inside the conversation, tried in order:
#: as it is; without the turn's reasoning (a template that drops earlier turns' reasoning); and each again with
#: ``chat_template_kwargs`` ``{"enable_thinking": False}`` (TRL passes a row's own kwargs to the template: a
#: template that writes an empty think block into the last turn then writes it into the generation prompt, so it
#: is prompt). The first whose TRL labels are the mask's tokens of that turn is published.
KWARGS_COLUMN = "chat_template_kwargs"
_NO_THINKING = {"enable_thinking": False}


def shaped_for_trl(trainer: pa.Table, canonical: pa.Table, tokenizer: Any, template: Any,
                   targets: tuple[list[list[int] | None], np.ndarray] | None = None,
                   max_length: int | None = TRL_MAX_LENGTH, encoder: PieceEncoder | None = None,
                   salvage: bool = False) -> tuple[pa.Table, Counter[str]]:
    """The default config's rows (``trainer``, built from ``canonical``) each in the first form whose labels under
    TRL's tokenization are exactly the tokens the mask marks for that turn in the whole conversation; a row no
    form makes exact is kept as it is (the card and the audit count what it trains). The turns of a row the template
    cannot render or mask are left out, as the audit and the tokenized config leave that row out. Returns the rows
    and TRL's figures on them (``route_facts``). ``targets``: ``turn_targets``, when the caller has them;
    ``encoder``: the ``PieceEncoder`` of the ``Tokenize`` that tokenized ``canonical`` (``trl_ids``); ``salvage``:
    the rows tokenized as ``tokenize(salvage=True)`` does (``turn_targets``)."""
    wanted, left_out = targets if targets is not None else turn_targets(canonical, tokenizer, template,
                                                                        salvage=salvage)
    text = getattr(template, "text", template)
    rows = _decoded_rows(trainer)
    outcomes = trl_ids(tokenizer, text, rows, encoder)
    completions = _arrow.flat(_arrow.column(trainer, "completion"))
    stored = (completions.storage if isinstance(completions, pa.ExtensionArray) else completions).to_pylist()
    kwargs = ["{}"] * trainer.num_rows
    changed = False
    pending = [index for index, outcome in enumerate(outcomes) if index < len(wanted) and wanted[index] is not None
               and not left_out[index] and _labels(outcome) != wanted[index]]
    forms = {index: _forms(rows[index]) for index in pending}
    heads = {(index, _kwargs_key(rows[index])): outcomes[index][0] for index in pending  # a form's prompt ids
             if not isinstance(outcomes[index], Exception)}  # are those of any form with the same kwargs
    for step in range(1, max((len(f) for f in forms.values()), default=0)):  # a form a batch; first exact kept
        tried = [index for index in pending if forms[index][step] not in forms[index][:step]]  # a same form: not
        keys = [(index, _kwargs_key(forms[index][step])) for index in tried]
        found_ids = trl_ids(tokenizer, text, [forms[index][step] for index in tried], encoder,
                            [heads.get(key) for key in keys])
        for key, found in zip(keys, found_ids):
            if not isinstance(found, Exception):
                heads.setdefault(key, found[0])
        exact = set()
        for index, found in zip(tried, found_ids):
            if _labels(found) == wanted[index]:
                form = forms[index][step]
                stored[index] = json.dumps(form["completion"][0], ensure_ascii=False)
                kwargs[index] = json.dumps(form.get(KWARGS_COLUMN) or {})
                outcomes[index], changed = found, True
                exact.add(index)
        pending = [index for index in pending if index not in exact]
    if changed:
        trainer = _with_forms(trainer, stored, kwargs)
    if left_out.any():
        trainer = trainer.filter(pa.array(~left_out))
        outcomes = [o for o, out in zip(outcomes, left_out) if not out]
    return trainer, route_facts(trainer, outcomes, max_length)


def _kwargs_key(row: dict[str, Any]) -> str:
    return json.dumps(row.get(KWARGS_COLUMN) or {}, sort_keys=True)


def _labels(outcome: tuple[list[int], list[int]] | Exception) -> list[int] | None:
    if isinstance(outcome, Exception):
        return None
    prompt, whole = outcome
    return whole[_common_prefix(prompt, whole):]


def _with_forms(trainer: pa.Table, stored: list[str], kwargs: list[str]) -> pa.Table:
    """``trainer`` with its completions' JSON ``stored`` and, where any is set, the ``chat_template_kwargs``."""
    column = pa.ExtensionArray.from_storage(pa.json_(), pa.array(stored, pa.string()))
    trainer = _arrow.set_column(trainer, "completion", _arrow.relist(_arrow.column(trainer, "completion"), column))
    if any(k != "{}" for k in kwargs):
        trainer = _arrow.set_column(trainer, KWARGS_COLUMN, pa.ExtensionArray.from_storage(pa.json_(),
                                                                                          pa.array(kwargs)))
    return trainer


def _forms(row: dict[str, Any]) -> list[dict[str, Any]]:
    turn = row["completion"][0]
    bare = {k: v for k, v in turn.items() if k not in ("reasoning_content", "thinking")}
    if isinstance(bare.get("content"), str) and "</think>" in bare["content"]:
        bare["content"] = strip_think_text(pa.array([bare["content"]]))[0].as_py()
    plain = {**row, "completion": [bare]}
    return [row, plain, {**row, KWARGS_COLUMN: _NO_THINKING}, {**plain, KWARGS_COLUMN: _NO_THINKING}]


def turn_targets(canonical: pa.Table, tokenizer: Any, template: Any,
                 runs: dict[int, list[list[int]]] | None = None, *, salvage: bool = False,
                 kept: Mapping[int, Sequence[bool]] | None = None) -> tuple[list[list[int] | None], np.ndarray]:
    """Per marked turn of ``canonical`` (flat order, the default config's rows): the token ids the mask marks for
    it in the whole conversation (None where they are not known: turns whose marked tokens run together, or a
    salvaged row whose runs do not pair one to one with its turns, as when its parallel calls were serialized), and
    whether ``tokenize`` leaves it out: its row is one the template cannot render or mask, or (``salvage``) it is a
    turn a salvaged row does not train (kept as context, or cut). ``runs``: per row ``tokenize`` kept, its marked
    runs (``marked_runs``), and ``kept``: per salvaged row, per marked turn whether it trains
    (``Salvage.trained``), when the caller tokenized the rows already."""
    marks = row_marks(canonical).astype(np.int64)
    if runs is None:
        runs, kept = _tokenized_runs(canonical, tokenizer, template, salvage)
    offsets = _arrow.offsets_of(marks)
    trains = np.ones(int(marks.sum()), dtype=bool)
    for row, flags in (kept or {}).items():
        if len(flags) == marks[row]:
            trains[offsets[row]:offsets[row + 1]] = flags
    targets: list[list[int] | None] = []
    for row in range(canonical.num_rows):
        turns = trains[offsets[row]:offsets[row + 1]]
        if row not in runs:
            turns[:] = False
        found = runs.get(row)
        given = iter(found) if found is not None and len(found) == int(turns.sum()) else None
        targets += [next(given) if given is not None and flag else None for flag in turns.tolist()]
    return targets, ~trains


def _tokenized_runs(canonical: pa.Table, tokenizer: Any, template: Any, salvage: bool = False
                    ) -> tuple[dict[int, list[list[int]]], dict[int, tuple[bool, ...]]]:
    """Per row ``tokenize`` keeps, its marked runs; per row it salvages, per marked turn whether it trains."""
    numbered = _arrow.set_column(canonical, _ROW, pa.array(np.arange(canonical.num_rows, dtype=np.int64)))
    transform = token_masks.Tokenize(tokenizer, template, on_bad_row="skip", keep_unsupervised=True, salvage=salvage)
    runs: dict[int, list[list[int]]] = {}
    kept: dict[int, tuple[bool, ...]] = {}
    for start in range(0, canonical.num_rows, _TOKENIZE_ROWS):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", BadMaskRowsWarning)
            warnings.simplefilter("ignore", SalvagedRowsWarning)
            chunk = transform(numbered.slice(start, _TOKENIZE_ROWS))
        runs.update(zip(chunk.column(_ROW).to_pylist(), marked_runs(chunk)))
        kept.update((start + f.position, f.salvage.trained) for f in transform.failures.take_salvaged()
                    if f.salvage is not None)
    return runs, kept


_ROW = "__trl_route_row"


def marked_runs(tokenized: pa.Table) -> list[list[list[int]]]:
    """Per row of a tokenized table: the ids of each run of its marked tokens (``assistant_masks``), in order."""
    ids_column, masks = _arrow.column(tokenized, "input_ids"), _arrow.column(tokenized, "assistant_masks")
    ids = np.asarray(_arrow.flat(ids_column).to_numpy(zero_copy_only=False))
    mask = np.asarray(_arrow.flat(masks).to_numpy(zero_copy_only=False)) != 0
    offsets = _arrow.offsets_of(_arrow.lengths(masks))
    opens = mask.copy()
    opens[1:] &= ~mask[:-1]
    opens[offsets[:-1][offsets[:-1] < len(mask)]] = mask[offsets[:-1][offsets[:-1] < len(mask)]]  # a row's start
    closes = mask.copy()
    closes[:-1] &= ~mask[1:]
    ends = offsets[1:] - 1
    ends = ends[(ends >= 0) & (offsets[1:] > offsets[:-1])]
    closes[ends] = mask[ends]  # a row's last token closes its run
    starts, stops = np.flatnonzero(opens), np.flatnonzero(closes) + 1
    owner = np.searchsorted(offsets, starts, side="right") - 1
    out: list[list[list[int]]] = [[] for _ in range(tokenized.num_rows)]
    for row, start, stop in zip(owner.tolist(), starts.tolist(), stops.tolist()):
        out[row].append(ids[start:stop].tolist())
    return out
