"""The configs a published repo holds, built from canonical rows with the package's own transforms.

* ``default``: what a trainer trains exactly, with no option set. One conversational
  prompt/completion row per *loss-carrying* assistant turn: ``prompt`` is every message before
  that turn, ``completion`` is that turn alone (TRL's message shape: tool-call arguments as
  values). TRL's ``SFTTrainer`` trains only the completion of such rows (its completion mask is
  the tokens after the rendered prompt, generation prompt included), so the supervised tokens are
  the marked turns' own tokens, each once, on any chat template that renders a conversation's
  beginning as a prefix of the whole. With mask_mode "final" that is one row per conversation;
  with "assistant" (or unrolled rows) one row per assistant turn, its earlier turns as context.
  A ``messages`` row would instead train every token under a default ``SFTTrainer``.
* ``canonical``: the rows as exported (``messages``, per-message ``loss_mask``, carried keys),
  for analysis; ``loss_mask`` only applies if the training code reads it.
* ``preference``: TRL's DPO rows: the shared prefix as ``prompt``, one assistant turn each in
  ``chosen`` and ``rejected``.
* ``tokenized``: ``input_ids``, ``attention_mask`` and ``assistant_masks`` from
  ``wai_transforms.tokenize`` for one tokenizer and template; SFTTrainer trains exactly
  ``assistant_masks``.

Every table here is *portable* (``transforms._portable``): built-in feature types only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from datasets import Dataset, Features

from whileai_datasets.errors import PublishError, SchemaError
from whileai_datasets.rows.features import MESSAGE_TYPE, Message
from whileai_datasets.transforms import _arrow, _batches, _parts, _portable, token_masks, wire
from whileai_datasets.transforms.token_encode import encode_texts

DEFAULT = "default"
CANONICAL = "canonical"
PREFERENCE = "preference"
TOKENIZED = "tokenized"
#: Columns of the tokenized config (besides the split key).
TOKENIZED_COLUMNS = ("input_ids", "attention_mask", "assistant_masks")
_TOKENIZE_ROWS = 256  # rows rendered and tokenized per call


@dataclass
class Config:
    """One config of the repo: its portable tables per split and where its files go."""

    name: str
    splits: dict[str, pa.Table]
    facts: dict[str, dict[str, Any]] = field(default_factory=dict)  # measured per split

    @property
    def directory(self) -> str:
        return "data" if self.name == DEFAULT else self.name

    @property
    def features(self) -> Features:
        return _portable.portable_features(next(iter(self.splits.values())).schema)


# --- canonical rows in ------------------------------------------------------------------------------
def canonical_table(ds: Dataset, where: str) -> pa.Table:
    """The rows of `ds` with `messages` as ``Message`` storage structs and a checked `loss_mask`."""
    names = ds.column_names
    if "messages" not in names or "loss_mask" not in names:
        raise PublishError(
            f"expected canonical training rows with 'messages' and 'loss_mask' columns, got columns {names}",
            location=where,
            hint='Load the export with load_dataset("whileai/export", data_files=...) (or pass the rows '
            "export_dataset wrote with format='openai'): the repo's default config is built from the mask")
    table = ds.with_format("arrow")[:]
    table = _arrow.set_column(table, "messages", message_structs(_arrow.column(table, "messages"), where))
    _check_mask(table, where)
    return table


def message_structs(lists: pa.Array, where: str) -> pa.Array:
    """A message-list column as ``List(Message())`` storage, from typed structs, plain structs or Json."""
    if pa.types.is_list(lists.type) and isinstance(lists.type.value_type, pa.JsonType):
        texts = lists.cast(pa.list_(pa.string())).to_pylist()
        lists = _batches._message_array([None if row is None else [json.loads(m) for m in row] for row in texts])
    if not (pa.types.is_list(lists.type) and pa.types.is_struct(lists.type.value_type)):
        raise PublishError(f"expected a list of messages, got {lists.type}", location=f"{where}, column 'messages'",
                           hint='Load the rows with load_dataset("whileai/export", ...)')
    flat = _arrow.flat(lists)
    if flat.type == MESSAGE_TYPE:
        return lists
    if _has_trl_arguments(flat.type):
        flat = _text_arguments(flat)
    try:
        cast = Message().cast_storage(flat)
    except (TypeError, pa.ArrowInvalid) as err:
        raise PublishError(f"the messages do not fit the canonical message struct ({err})",
                           location=f"{where}, column 'messages'",
                           hint='Load the rows with load_dataset("whileai/export", ...)') from err
    return _arrow.relist(lists, cast)


def _has_trl_arguments(message_type: pa.StructType) -> bool:
    """Whether tool-call arguments are stored as Json values (``TrlMessage``) rather than JSON text."""
    arrow_type: pa.DataType = message_type
    for step in ("tool_calls", None, "function", "arguments"):
        if step is None:
            if not pa.types.is_list(arrow_type):
                return False
            arrow_type = arrow_type.value_type
        elif pa.types.is_struct(arrow_type) and step in arrow_type.names:
            arrow_type = arrow_type.field(step).type
        else:
            return False
    return isinstance(arrow_type, pa.JsonType)


def _text_arguments(flat: pa.StructArray) -> pa.StructArray:
    """TRL storage (arguments as Json) to canonical (arguments as JSON text): the same text."""
    calls = pc.struct_field(flat, "tool_calls")
    flat_calls = _arrow.flat(calls)
    function = pc.struct_field(flat_calls, "function")
    arguments = pc.struct_field(function, "arguments")
    new_function = _arrow.replace_fields(function, arguments=arguments.storage)
    new_calls = _arrow.relist(calls, _arrow.replace_fields(flat_calls, function=new_function))
    return _arrow.replace_fields(flat, tool_calls=new_calls)


def _check_mask(table: pa.Table, where: str) -> None:
    lists, mask = _arrow.column(table, "messages"), _arrow.column(table, "loss_mask")
    lens, mask_lens = _arrow.lengths(lists), _arrow.lengths(mask)
    bad = np.flatnonzero(lens != mask_lens)
    if len(bad):
        row = int(bad[0])
        raise SchemaError(f"loss_mask has {mask_lens[row]} entries for {lens[row]} messages", location=f"{where}, "
                          f"row {row}", hint="Recompute it with wai_transforms.loss_mask(mode) before publishing")
    marked = _marked(table)
    roles = pc.struct_field(_arrow.flat(lists), "role")
    wrong = np.flatnonzero(marked & ~_arrow.to_numpy_bool(pc.equal(roles, "assistant")))
    if len(wrong):
        at = int(wrong[0])
        row = int(_arrow.parents(lists)[at])
        index = at - int(_arrow.offsets_of(lens)[row])
        raise SchemaError(f"loss_mask marks a {roles[at].as_py()!r} message; only assistant turns can carry loss",
                          location=f"{where}, row {row}, messages[{index}]",
                          hint="Set its loss_mask entry to 0 (a trainer cannot train on text the model never writes)")


def _marked(table: pa.Table) -> np.ndarray:
    flat = _arrow.flat(_arrow.column(table, "loss_mask"))
    return _arrow.to_numpy_bool(pc.not_equal(pc.fill_null(flat, 0), 0))


# --- the configs ----------------------------------------------------------------------------------
def trainer_table(canonical: pa.Table, where: str) -> pa.Table:
    """The default config: one prompt/completion row per loss-carrying assistant turn (see the module doc)."""
    trl = wire.trl_training_table(canonical)  # TRL messages, `prompt` -> `prompt_text`, no loss_mask
    lists = _arrow.column(trl, "messages")
    messages = _arrow.flat(lists)
    starts = _arrow.offsets_of(_arrow.lengths(lists))[:-1]
    turn = np.flatnonzero(_marked(canonical))
    row = _arrow.parents(lists)[turn]
    head = turn - starts[row]
    if len(head) and not head.min():
        first = int(row[np.argmin(head)])
        raise PublishError("a loss-carrying assistant turn opens its conversation, so it has no prompt",
                           location=f"{where}, row {first}, messages[0]",
                           hint="Pass system_prompt= to the export, or set that turn's loss_mask entry to 0")
    out = _arrow.drop(trl, "messages", "images").take(pa.array(row, pa.int64()))
    prompt = wire._slices(messages, starts[row], head)
    completion = wire._slices(messages, turn, np.ones(len(turn), np.int64))
    out = _arrow.set_column(_arrow.set_column(out, "prompt", prompt), "completion", completion)
    # TRL's `images` fill the prompt's image placeholders in order: only the images before the turn
    source = _arrow.flat(_arrow.column(canonical, "messages"))
    images = _parts.images_column(wire._slices(source, starts[row], head))
    if images is not None:
        out = _arrow.set_column(out, "images", images)
    return _portable.portable_table(wire.ordered(out, ("prompt", "completion", "images", "tools")))


def canonical_rows(canonical: pa.Table) -> pa.Table:
    """The canonical config: the rows as given, portable."""
    return _portable.portable_table(canonical)


def preference_table(pairs: Dataset, where: str) -> pa.Table:
    """TRL's DPO rows from canonical pairs (whole conversations per side), or DPO rows as they are."""
    table = pairs.with_format("arrow")[:]
    missing = {"chosen", "rejected"} - set(table.column_names)
    if missing:
        raise PublishError(f"expected preference pairs with 'chosen' and 'rejected' columns, got "
                           f"{table.column_names}", location=where,
                           hint='Load them with load_dataset("whileai/export", name="preference", ...)')
    for side in ("chosen", "rejected"):
        table = _arrow.set_column(table, side, message_structs(_arrow.column(table, side), f"{where}, {side}"))
    if "prompt" in table.column_names and _portable.is_message_list(_arrow.column(table, "prompt").type):
        return _portable.portable_table(table)  # already one-turn DPO rows
    rows, _, _ = wire.trl_preference_table(wire.openai_preference_table(table))
    return _portable.portable_table(rows)


def tokenized_table(canonical: pa.Table, tokenizer: Any, template: Any, keep: tuple[str, ...]) -> pa.Table:
    """``input_ids`` / ``attention_mask`` / ``assistant_masks`` of every row with a supervised token."""
    transform = token_masks.tokenize(tokenizer, template)
    parts = []
    for start in range(0, max(canonical.num_rows, 1), _TOKENIZE_ROWS):
        chunk = transform(canonical.slice(start, _TOKENIZE_ROWS))
        parts.append(chunk.select([*TOKENIZED_COLUMNS, *(k for k in keep if k in chunk.column_names)]))
    return _portable.portable_table(pa.concat_tables(parts))


# --- what a trainer trains on, measured on the published rows ------------------------------------
def message_facts(table: pa.Table, columns: Mapping[str, str]) -> dict[str, int]:
    """Rows and messages per role of the message columns (`columns`: column -> what it is)."""
    facts = {"rows": table.num_rows}
    for name, label in columns.items():
        facts[label] = int(pc.sum(pc.list_value_length(_arrow.column(table, name))).as_py() or 0)
    return facts


def canonical_facts(canonical: pa.Table) -> dict[str, int]:
    lists = _arrow.column(canonical, "messages")
    roles = pc.struct_field(_arrow.flat(lists), "role")
    return {"rows": canonical.num_rows, "messages": len(roles),
            "assistant_turns": int(pc.sum(pc.equal(roles, "assistant")).as_py() or 0),
            "marked_turns": int(_marked(canonical).sum()),
            "rows_without_marked_turn": int(np.sum(_row_marks(canonical) == 0))}


def _row_marks(canonical: pa.Table) -> np.ndarray:
    lists = _arrow.column(canonical, "messages")
    return np.bincount(_arrow.parents(lists), weights=_marked(canonical), minlength=canonical.num_rows)


def tokenized_facts(tokenized: pa.Table) -> dict[str, int]:
    ids, masks = _arrow.column(tokenized, "input_ids"), _arrow.column(tokenized, "assistant_masks")
    return {"rows": tokenized.num_rows, "tokens": len(_arrow.flat(ids)),
            "marked_tokens": int(pc.sum(_arrow.flat(masks)).as_py() or 0)}


def completion_tokens(trainer: pa.Table, tokenizer: Any, template: Any) -> dict[str, int]:
    """Tokens SFTTrainer's completion mask supervises on the default config, counted the way it does:
    render the prompt with the generation prompt and prompt + completion, tokenize both, and count
    the tokens after their common prefix (rendered with this package's sandboxed renderer)."""
    transform = token_masks.tokenize(tokenizer, template)
    chat = transform.chat
    rows = _decoded_rows(trainer)
    supervised = total = 0
    for start in range(0, len(rows), _TOKENIZE_ROWS):
        batch = rows[start:start + _TOKENIZE_ROWS]
        prompts = [chat.render(r["prompt"], tools=r.get("tools") or None, add_generation_prompt=True).text
                   for r in batch]
        wholes = [chat.render(r["prompt"] + r["completion"], tools=r.get("tools") or None).text for r in batch]
        prompt_ids = encode_texts(tokenizer, prompts)
        whole_ids = encode_texts(tokenizer, wholes)
        for (p, _), (w, _) in zip(prompt_ids, whole_ids):
            supervised += len(w) - _common_prefix(p, w)
            total += len(w)
    return {"rows": trainer.num_rows, "tokens": total, "supervised_tokens": supervised}


def _decoded_rows(table: pa.Table) -> list[dict[str, Any]]:
    names = [n for n in ("prompt", "completion", "tools") if n in table.column_names]
    features = _portable.portable_features(table.select(names).schema)
    return [features.decode_example(row) for row in table.select(names).to_pylist()]


def _common_prefix(left: list[int], right: list[int]) -> int:
    n = min(len(left), len(right))
    diff = np.flatnonzero(np.asarray(left[:n]) != np.asarray(right[:n]))
    return int(diff[0]) if len(diff) else n
