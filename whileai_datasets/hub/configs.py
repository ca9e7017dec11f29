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
  ``wai_transforms.tokenize`` for one tokenizer and template, and ``labels`` (-100 where
  ``assistant_masks`` is 0); SFTTrainer trains exactly ``assistant_masks``.
* ``messages`` and ``sharegpt``: the rows other trainers read (axolotl, ms-swift, LLaMA-Factory,
  the OpenAI-style fine-tuning formats), built by ``hub.trainer_formats``.

Every table here is *portable* (``columnar._portable``): built-in feature types only.

The configs are one ordered registry (``REGISTRY``, at the end): per config its name, a builder of
one chunk of it from one chunk of canonical rows (``(chunk, where) -> pa.Table``), the card's
facts about that chunk (counts that add up over chunks) and what to do when a split comes out
empty. ``hub.streaming`` runs every entry over every chunk, so adding a config is one entry.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from datasets import Dataset, Features

from whileai_datasets.columnar import _arrow, _batches, _parts, _portable
from whileai_datasets.errors import PublishError, SchemaError
from whileai_datasets.hub import facts as config_facts
from whileai_datasets.hub import trainer_formats
from whileai_datasets.hub.reading import read_all
from whileai_datasets.rows.features import MESSAGE_TYPE, Message
from whileai_datasets.tokenize import token_masks
from whileai_datasets.tokenize.notices import BadMaskRowsWarning, SalvagedRowsWarning
from whileai_datasets.tokenize.template_input import InputForm, template_messages
from whileai_datasets.transforms import wire

DEFAULT = "default"
CANONICAL = "canonical"
PREFERENCE = "preference"
TOKENIZED = "tokenized"
#: Columns of the tokenized config (besides the split key).
TOKENIZED_COLUMNS = ("input_ids", "attention_mask", "assistant_masks")
_TOKENIZE_ROWS = 256  # rows rendered and tokenized per call
#: What publish says of a conversation that opens with a loss-carrying turn (and the audit, before it).
OPENS_WITH_MARKED_TURN = "a loss-carrying assistant turn opens its conversation, so it has no prompt"
OPENS_WITH_MARKED_TURN_HINT = "Pass system_prompt= to the export, or set that turn's loss_mask entry to 0"


@dataclass
class Config:
    """One config as published: rows and facts per split, its features, where its files go."""

    name: str
    rows: dict[str, int]  # per split, in split order
    features: Features
    directory: str = ""
    facts: dict[str, dict[str, int]] = field(default_factory=dict)  # measured per split (`rows` included)

    def __post_init__(self) -> None:
        self.directory = self.directory or directory_of(self.name)


# --- canonical rows in ------------------------------------------------------------------------------
def check_columns(names: list[str], where: str) -> None:
    """Refuse rows that are not canonical training rows (before anything is read)."""
    if "messages" not in names or "loss_mask" not in names:
        raise PublishError(
            f"expected canonical training rows with 'messages' and 'loss_mask' columns, got columns {names}",
            location=where,
            hint='Load the export with load_dataset("whileai/export", data_files=...) (or pass the rows '
            "export_dataset wrote with format='openai'): the repo's default config is built from the mask")


def canonical_chunk(table: pa.Table, where: str, first_row: int = 0) -> pa.Table:
    """A chunk of canonical rows with `messages` as ``Message`` storage structs and a checked `loss_mask`
    (errors name rows counted from `first_row`, the chunk's first row in its split)."""
    check_columns(table.column_names, where)
    table = _arrow.set_column(table, "messages", message_structs(_arrow.column(table, "messages"), where))
    _check_mask(table, where, first_row)
    return table


def canonical_table(ds: Dataset, where: str) -> pa.Table:
    """All rows of `ds` as one checked canonical table (small data; publish reads chunk by chunk)."""
    check_columns(ds.column_names, where)
    return canonical_chunk(read_all(ds), where)


def message_structs(lists: pa.Array, where: str) -> pa.Array:
    """A message-list column as ``List(Message())`` storage, from typed structs, plain structs or Json."""
    if pa.types.is_list(lists.type) and isinstance(lists.type.value_type, pa.JsonType):
        texts = lists.cast(pa.list_(pa.string())).to_pylist()
        lists = _batches.message_array([None if row is None else [json.loads(m) for m in row] for row in texts])
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


def _check_mask(table: pa.Table, where: str, first_row: int = 0) -> None:
    lists, mask = _arrow.column(table, "messages"), _arrow.column(table, "loss_mask")
    lens, mask_lens = _arrow.lengths(lists), _arrow.lengths(mask)
    bad = np.flatnonzero(lens != mask_lens)
    if len(bad):
        row = int(bad[0])
        raise SchemaError(f"loss_mask has {mask_lens[row]} entries for {lens[row]} messages", location=f"{where}, "
                          f"row {first_row + row}", hint="Recompute it with wai_transforms.loss_mask(mode) before publishing")
    marked = config_facts.marked(table)
    roles = pc.struct_field(_arrow.flat(lists), "role")
    wrong = np.flatnonzero(marked & ~_arrow.to_numpy_bool(pc.equal(roles, "assistant")))
    if len(wrong):
        at = int(wrong[0])
        row = int(_arrow.parents(lists)[at])
        index = at - int(_arrow.offsets_of(lens)[row])
        raise SchemaError(f"loss_mask marks a {roles[at].as_py()!r} message; only assistant turns can carry loss",
                          location=f"{where}, row {first_row + row}, messages[{index}]",
                          hint="Set its loss_mask entry to 0 (a trainer cannot train on text the model never writes)")
    opening = np.flatnonzero(opens_with_marked_turn(table))
    if len(opening):
        raise PublishError(OPENS_WITH_MARKED_TURN, location=f"{where}, row {first_row + int(opening[0])}, messages[0]",
                           hint=OPENS_WITH_MARKED_TURN_HINT)


def opens_with_marked_turn(table: pa.Table) -> np.ndarray:
    """Per row: its first message carries loss (publish refuses such a row: its turn has no prompt)."""
    lens = _arrow.lengths(_arrow.column(table, "messages"))
    out = np.zeros(table.num_rows, dtype=bool)
    out[lens > 0] = config_facts.marked(table)[_arrow.offsets_of(lens)[:-1][lens > 0]]
    return out


# --- the configs ----------------------------------------------------------------------------------
def trainer_table(canonical: pa.Table, where: str, images: bool | None = None, join_parts: bool = False,
                  form: InputForm | None = None) -> pa.Table:
    """The default config: one prompt/completion row per loss-carrying assistant turn (see the module doc).

    `images`: TRL's ``images`` column always (True: empty lists for rows without), never (False), or
    when a prompt has an image placeholder (None). `form`: what the chat template reads (``Tokenize.form``): each
    message as ``tokenize`` hands it to the template (``in_template_form``), so TRL renders what the mask counts.
    `join_parts`: only text-only content parts as one string (the form of a template that concatenates strings)."""
    trl = wire.trl_training_table(canonical)  # TRL messages, `prompt` -> `prompt_text`, no loss_mask
    lists = _arrow.column(trl, "messages")
    messages = _arrow.flat(lists)
    starts = _arrow.offsets_of(_arrow.lengths(lists))[:-1]
    turn = np.flatnonzero(config_facts.marked(canonical))
    row = _arrow.parents(lists)[turn]
    head = turn - starts[row]
    if len(head) and not head.min():
        first = int(row[np.argmin(head)])
        raise PublishError(OPENS_WITH_MARKED_TURN, location=f"{where}, row {first}, messages[0]",
                           hint=OPENS_WITH_MARKED_TURN_HINT)
    out = _arrow.drop(trl, "messages", "images").take(pa.array(row, pa.int64()))
    prompt = _arrow.list_slices(messages, starts[row], head)
    completion = _arrow.list_slices(messages, turn, np.ones(len(turn), np.int64))
    out = _arrow.set_column(_arrow.set_column(out, "prompt", prompt), "completion", completion)
    # TRL's `images` fill the prompt's image placeholders in order: only the images before the turn
    source = _arrow.flat(_arrow.column(canonical, "messages"))
    images_of = _parts.images_column(_arrow.list_slices(source, starts[row], head)) if images is not False else None
    if images_of is None and images:
        images_of = _arrow.build_list(np.zeros(out.num_rows + 1, dtype=np.int64), pa.array([], pa.string()))
    if images_of is not None:
        out = _arrow.set_column(out, "images", images_of)
    out = _portable.portable_table(wire.ordered(out, ("prompt", "completion", "images", "tools")))
    if form is None and join_parts:
        form = InputForm(content_parts="joined")
    for name in ("prompt", "completion") if form is not None else ():
        out = _arrow.set_column(out, name, in_template_form(_arrow.column(out, name), form))
    return out


def in_template_form(lists: pa.Array, form: InputForm) -> pa.Array:
    """A list column of TRL messages (JSON), each message as ``template_messages`` hands it to a template of
    `form` (the one renderer input, ``tokenize.template_input``): text-only parts joined for a template that
    concatenates strings, tool-call arguments as JSON text for one that concatenates them, ids in nine characters
    for one that requires them, parts in the form templates read, null keys dropped. Only messages that may
    change are decoded."""
    flat = _arrow.flat(lists)
    texts = (flat.storage if isinstance(flat, pa.ExtensionArray) else flat).to_pylist()
    markers = ['"content": [', '": null']
    if form.arguments == "text" or form.tool_call_ids != "as_given":
        markers += ['"tool_calls": [', '"tool_call_id": ']
    changed = False
    for index, text in enumerate(texts):
        if text is None or not any(marker in text for marker in markers):
            continue
        message = json.loads(text)
        shaped = template_messages([message], form)[0]
        if shaped != message:
            texts[index] = json.dumps(shaped, ensure_ascii=False)
            changed = True
    if not changed:
        return lists
    return _arrow.relist(lists, pa.ExtensionArray.from_storage(pa.json_(), pa.array(texts, pa.string()))
                         if isinstance(flat, pa.ExtensionArray) else pa.array(texts, flat.type))


def canonical_rows(canonical: pa.Table, where: str = "") -> pa.Table:
    """The canonical config: the rows as given, portable."""
    return _portable.portable_table(canonical)


def check_pair_columns(names: list[str], where: str) -> None:
    missing = {"chosen", "rejected"} - set(names)
    if missing:
        raise PublishError(f"expected preference pairs with 'chosen' and 'rejected' columns, got "
                           f"{names}", location=where,
                           hint='Load them with load_dataset("whileai/export", name="preference", ...)')


def preference_table(pairs: Dataset | pa.Table, where: str) -> pa.Table:
    """TRL's DPO rows from canonical pairs (whole conversations per side), or DPO rows as they are."""
    table = read_all(pairs) if isinstance(pairs, Dataset) else pairs
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


def tokenized_table(canonical: pa.Table, tokenizer: Any, template: Any, keep: tuple[str, ...],
                    salvage: bool = False) -> pa.Table:
    """``input_ids`` / ``attention_mask`` / ``assistant_masks`` of every row with a supervised token.

    A row the template cannot render or mask is left out, as the audit leaves it out (its ``bad_rows``, named by
    cause with the template's own message), so TRL trains exactly the audit's count; the card counts them
    (``rows_left_out``). With ``salvage``, such a row trains the turns before the one the template cannot take, as
    ``tokenize(salvage=True)`` and the audit with it do (the card counts them: ``salvaged_rows``)."""
    transform = token_masks.tokenize(tokenizer, template, on_bad_row="skip", salvage=salvage)
    parts = []
    for start in range(0, max(canonical.num_rows, 1), _TOKENIZE_ROWS):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", BadMaskRowsWarning)  # counted on the card (``rows_left_out``)
            warnings.simplefilter("ignore", SalvagedRowsWarning)  # counted on the card (``salvaged_rows``)
            chunk = transform(canonical.slice(start, _TOKENIZE_ROWS))
        parts.append(chunk.select([*TOKENIZED_COLUMNS, *(k for k in keep if k in chunk.column_names)]))
    return _portable.portable_table(pa.concat_tables(parts))


# --- the registry: every config a repo can hold, in the order the card lists them -----------------
#: One chunk of a config from one chunk of source rows; `where` names the split for errors.
ChunkTable = Callable[[pa.Table, str], pa.Table]
#: The card's facts about one chunk of a config: (config chunk, source chunk) -> counts. The publisher
#: sums them over the chunks of a split (so each count must add up) and counts `rows` itself.
ChunkFacts = Callable[[pa.Table, pa.Table], Mapping[str, int]]


@dataclass(frozen=True)
class Extras:
    """What a publish was given besides the rows, for the configs that depend on it."""

    tokenizer: Any = None
    chat_template: Any = None
    split_key: str | None = None
    preference: bool = False  # preference pairs were given
    images: bool | None = None  # the default config's `images` column: always / never / per chunk (None)
    salvage: bool = False  # a conversation the template cannot take whole trains its turns before that one


@dataclass(frozen=True)
class Builder:
    """How one config is made in this publish: a chunk's rows, and what the card counts on them.

    A `Builder` is also the registry's `builder` of a config that every publish makes the same way
    (called with the extras, it returns itself)."""

    table: ChunkTable
    facts: ChunkFacts | None = None

    def __call__(self, extras: Extras) -> Builder:
        return self


@dataclass(frozen=True)
class ConfigSpec:
    """One entry of the registry.

    Args:
        name: The config name (`load_dataset(repo, name)`).
        builder: This publish's `Builder` from its `Extras`, or None when the publish has no such
            config (e.g. `tokenized` without a tokenizer). Must pickle (Ray workers run it).
        source: Which rows the chunks come from: the training rows, or the preference pairs.
        empty_hint: What to do when a split of it comes out empty (publish refuses that).
    """

    name: str
    builder: Callable[[Extras], Builder | None]
    source: Literal["rows", "preference"] = "rows"
    empty_hint: str = "Leave that split out"

    @property
    def directory(self) -> str:
        return directory_of(self.name)


def directory_of(name: str) -> str:
    """Where a config's shards go: `data/` for the default config (as push_to_hub), else its name."""
    return "data" if name == DEFAULT else name


@dataclass(frozen=True)
class TrainerRows:
    """`trainer_table` with the publish's choice of the `images` column (the same for every chunk)."""

    images: bool | None = None
    form: InputForm | None = None  # what the template reads: each message as ``tokenize`` hands it (``trainer_table``)
    tokenizer: Any = None  # given: each row in the form TRL trains exactly as marked (``facts.shaped_for_trl``)
    template: Any = None
    salvage: bool = False  # the turns a salvaged conversation does not train are left out, as ``tokenize`` does

    def __call__(self, canonical: pa.Table, where: str) -> pa.Table:
        table = trainer_table(canonical, where, self.images, form=self.form)
        if self.tokenizer is None:
            return table
        return config_facts.shaped_for_trl(table, canonical, self.tokenizer, self.template, salvage=self.salvage)[0]


@dataclass(frozen=True)
class TokenizedRows:
    """`tokenized_table` for one tokenizer and template, keeping the split key."""

    tokenizer: Any
    template: Any = None
    keep: tuple[str, ...] = ()
    salvage: bool = False

    def __call__(self, canonical: pa.Table, where: str) -> pa.Table:
        return trainer_formats.labels_chunk(tokenized_table(canonical, self.tokenizer, self.template, self.keep,
                                                            self.salvage), where)


def _tokenized_facts(tokenized: pa.Table, canonical: pa.Table) -> dict[str, int]:
    return {**config_facts.tokenized_facts(tokenized, canonical), **trainer_formats.labels_facts(tokenized),
            "trl_labels": config_facts.trl_labels(tokenized),
            "rows_left_out": int(np.sum(config_facts.row_marks(canonical) > 0)) - tokenized.num_rows}


def _default_builder(extras: Extras) -> Builder:
    if extras.tokenizer is None:
        return Builder(TrainerRows(extras.images), config_facts.unmeasured_facts)
    return Builder(TrainerRows(extras.images, template_form(extras.tokenizer, extras.chat_template),
                               extras.tokenizer, extras.chat_template, extras.salvage),
                   config_facts.TrlDefaultRoute(extras.tokenizer, extras.chat_template, salvage=extras.salvage))


def template_form(tokenizer: Any, template: Any) -> InputForm:
    """What ``tokenize`` hands this template (``Tokenize.form``): the default config's messages take that form too."""
    return token_masks.Tokenize(tokenizer, template).form


def _preference_builder(extras: Extras) -> Builder | None:
    return Builder(preference_table) if extras.preference else None


def _tokenized_builder(extras: Extras) -> Builder | None:
    if extras.tokenizer is None:
        return None
    keep = (extras.split_key,) if extras.split_key else ()
    return Builder(TokenizedRows(extras.tokenizer, extras.chat_template, keep, extras.salvage), _tokenized_facts)


_NO_MARKED_TURN = ("Its rows mark no assistant turn with loss_mask 1: check the export's mask_mode, "
                   "or leave that split out")
#: Every config, in order (the first is the repo's default). Adding a config is one entry here.
REGISTRY: tuple[ConfigSpec, ...] = (
    ConfigSpec(DEFAULT, _default_builder, empty_hint=_NO_MARKED_TURN),
    ConfigSpec(CANONICAL, Builder(canonical_rows, config_facts.canonical_facts)),
    ConfigSpec(trainer_formats.MESSAGES, Builder(trainer_formats.messages_chunk, trainer_formats.messages_facts),
               empty_hint=_NO_MARKED_TURN),
    ConfigSpec(trainer_formats.SHAREGPT, Builder(trainer_formats.sharegpt_chunk, trainer_formats.sharegpt_facts),
               empty_hint=_NO_MARKED_TURN),
    ConfigSpec(PREFERENCE, _preference_builder, source="preference",
               empty_hint="No pair has a chosen and a rejected turn that differ: pass pairs that contrast"),
    ConfigSpec(TOKENIZED, _tokenized_builder,
               empty_hint="No row has a supervised token with this tokenizer: check the template and loss_mask"),
)


def planned(extras: Extras) -> list[tuple[ConfigSpec, Builder]]:
    """The configs this publish makes, in registry order, each with its builder."""
    made = [(spec, spec.builder(extras)) for spec in REGISTRY]
    return [(spec, builder) for spec, builder in made if builder is not None]
