"""Wire shapes: canonical rows as whileai's OpenAI, TRL and Fireworks rows.

Each shape decodes (``ds[i]``) and writes (``export_dataset``'s JSONL) to
exactly whileai's dicts: the transforms hand ``Dataset.map`` each message as one
``Json`` object (``List(Json())``, as ``datasets``' own json loader types agent
traces and as TRL asks of struct-typed messages), so a message carries only its
own keys (no ``tool_calls: None`` on a user turn), TRL's tool-call arguments are
values, and the rows load wherever ``datasets`` >= 4.7 is installed, this package
or not. The ``*_table`` functions below build the shapes on message structs
(the export's writer reads those); per-message keys whileai never writes
(``extra``) are dropped, and columns whileai leaves out are dropped. A
top-level key whileai leaves out *for some rows only* (a
carried key that is None, ``prompt_text`` for an empty ask) stays a column and
is null there; the JSONL writer leaves null keys out.

* OpenAI: the training row minus the source-only columns, plus
  ``schema_version`` "1".
* TRL ``training``: arguments as values, ``prompt`` renamed ``prompt_text``
  (only when it is a non-empty string), no ``loss_mask``. ``completion``:
  ``prompt`` / ``completion`` split at the last assistant turn; rows whose last
  assistant turn is the first message, or that have none, are dropped.
  ``preference``: the shared prefix as ``prompt``, one assistant turn each.
* Fireworks: ``messages`` (role, content, tool_calls, tool_call_id, and
  ``weight`` on assistant turns from ``loss_mask``) and ``tools`` when
  non-empty; preference pairs as ``input`` / ``preferred_output`` /
  ``non_preferred_output``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from whileai_datasets._options import check_choice
from whileai_datasets._typing import Batch, TrlKind
from whileai_datasets.columnar import _arguments, _arrow, _parts, _portable, _types
from whileai_datasets.errors import SchemaError
from whileai_datasets.rows.schema import CARRY_KEYS, PAIR_KEYS, SOURCE_KEYS
from whileai_datasets.transforms import pairs
from whileai_datasets.transforms.groups import GROUP_COLUMNS

SCHEMA_VERSION = "1"
_WEIGHT_1 = '{"weight": 1}'
_WEIGHT_0 = '{"weight": 0}'

#: whileai's key order for training rows (a JSONL writer keeps it).
TRAINING_ORDER = (
    "messages",
    "tool_output_truncated",
    "tool_output_chars_cut",
    "loss_mask",
    "tools",
    *CARRY_KEYS,
    "unroll",
    "schema_version",
    *GROUP_COLUMNS,
    "prompt_text",
    "prompt",
    "completion",
)
PREFERENCE_ORDER = ("prompt", "chosen", "rejected", "tools", *PAIR_KEYS, "schema_version")


def ordered(table: pa.Table, order: tuple[str, ...]) -> pa.Table:
    """``table``'s columns in ``order`` (unknown columns after, as they were)."""
    rank = {name: i for i, name in enumerate(dict.fromkeys(order))}
    names = table.column_names
    place = {name: i for i, name in enumerate(names)}
    return table.select(sorted(names, key=lambda n: (rank.get(n, len(rank)), place[n])))


# ---------------------------------------------------------------- messages


def openai_messages(lists: pa.Array, column: str = "messages") -> pa.Array:
    """Message lists with ``extra`` dropped (whileai writes no other keys) and
    content parts as OpenAI content parts (every image and video part must
    hold a reference: ``column`` names the place of one that does not)."""
    _parts.check_references(lists, column)
    messages = _arrow.flat(lists)
    fields: dict[str, Any] = {}
    if "extra" in messages.type.names and pc.struct_field(messages, "extra").null_count < len(messages):
        fields["extra"] = None
    parts = _parts.openai_parts(messages)
    if parts is not None:
        fields["parts"] = parts
    return _arrow.relist(lists, _arrow.replace_fields(messages, **fields)) if fields else lists


def trl_messages(lists: pa.Array, *, inline_images: bool = False) -> pa.Array:
    """Message lists with tool-call arguments as whileai's decoded values
    (``TrlMessage``) and content parts in TRL's vision format (image
    references kept in the parts with ``inline_images``)."""
    messages = _arrow.flat(lists)
    if _is_trl(messages.type):
        return lists
    calls = pc.struct_field(messages, "tool_calls")
    flat_calls = _arrow.flat(calls)
    function = pc.struct_field(flat_calls, "function")
    _, _, arguments = _arguments.arguments_info(pc.struct_field(function, "arguments"))
    new_function = pa.StructArray.from_arrays(
        [pc.struct_field(function, "name"), arguments], fields=list(_types.TRL_FUNCTION_TYPE), mask=_nulls(function)
    )
    new_call = pa.StructArray.from_arrays(
        [pc.struct_field(flat_calls, "id"), pc.struct_field(flat_calls, "type"), new_function],
        fields=list(_types.TRL_TOOL_CALL_TYPE),
        mask=_nulls(flat_calls),
    )
    children = [
        pc.struct_field(messages, "role"),
        pc.struct_field(messages, "content"),
        _arrow.relist(calls, new_call),
        pc.struct_field(messages, "name"),
        pc.struct_field(messages, "tool_call_id"),
        pa.nulls(len(messages), pa.json_()),
        _optional_field(messages, "reasoning_content", pa.string()),
        _parts.trl_parts(messages, inline_images=inline_images) if _parts.parts_of(messages) is not None else pa.nulls(len(messages), _PARTS),
    ]
    return _arrow.relist(lists, pa.StructArray.from_arrays(children, fields=list(_types.TRL_MESSAGE_TYPE), mask=_nulls(messages)))


_PARTS = _types.TRL_MESSAGE_TYPE.field("parts").type


def _optional_field(messages: pa.Array, name: str, arrow_type: pa.DataType) -> pa.Array:
    if name in messages.type.names:
        return pc.struct_field(messages, name)
    return pa.nulls(len(messages), arrow_type)


def _is_trl(message_type: pa.DataType) -> bool:
    calls = message_type.field("tool_calls").type if "tool_calls" in message_type.names else None
    if calls is None:
        return False
    function = calls.value_type.field("function").type
    return isinstance(function.field("arguments").type, pa.JsonType)


def fireworks_messages(lists: pa.Array, mask: pa.Array | None, *, keep_tool_call_id: bool = True) -> pa.Array:
    """Message lists as Fireworks reads them: no ``name``, ``weight`` on
    assistant turns (from the loss mask), ``tool_call_id`` unless told not to."""
    messages = _arrow.flat(lists)
    extra: pa.Array | None = None
    if mask is not None:
        weights = _arrow.flat(mask)
        if len(weights) != len(messages):
            raise SchemaError(
                "loss_mask and messages have different lengths",
                location="column 'loss_mask'",
                hint="Recompute it with loss_mask(mode) before to_fireworks.",
            )
        assistant = pc.fill_null(pc.equal(pc.struct_field(messages, "role"), "assistant"), False)
        weight = pc.if_else(pc.fill_null(pc.not_equal(weights, 0), False), _WEIGHT_1, _WEIGHT_0)
        extra = _arrow.if_else(assistant, weight, pa.scalar(None, pa.string())).cast(pa.json_())
    fields: dict[str, Any] = {"name": None, "extra": extra}
    if not keep_tool_call_id:
        fields["tool_call_id"] = None
    return _arrow.relist(lists, _arrow.replace_fields(messages, **fields))


def weighted_messages(lists: pa.Array, mask: pa.Array, weights: str) -> pa.Array:
    """OpenAI message lists with a ``weight`` key from the loss mask (1 where it is set, else 0):
    on assistant turns only (``"assistant"``), or on every message (``"all"``)."""
    messages = _arrow.flat(lists)
    flags = _arrow.flat(mask)
    if len(flags) != len(messages):
        raise SchemaError("loss_mask and messages have different lengths", location="column 'loss_mask'",
                          hint="Recompute it with loss_mask(mode) before exporting with weights.")
    weight = pc.if_else(pc.fill_null(pc.not_equal(flags, 0), False), _WEIGHT_1, _WEIGHT_0)
    if weights == "assistant":
        assistant = pc.fill_null(pc.equal(pc.struct_field(messages, "role"), "assistant"), False)
        weight = _arrow.if_else(assistant, weight, pa.scalar(None, pa.string()))
    return _arrow.relist(lists, _arrow.replace_fields(messages, extra=weight.cast(pa.json_())))


def _nulls(array: pa.Array) -> pa.Array | None:
    return array.is_null() if array.null_count else None


# ---------------------------------------------------------------- rows


def openai_table(table: pa.Table) -> pa.Table:
    """Training rows in whileai's OpenAI wire shape."""
    lists = _arrow.message_column(table, "messages")
    out = _arrow.set_column(_arrow.drop(table, *SOURCE_KEYS), "messages", openai_messages(lists))
    out = _arrow.set_column(out, "schema_version", pa.array([SCHEMA_VERSION] * out.num_rows, pa.string()))
    return ordered(out, TRAINING_ORDER)


def trl_training_table(table: pa.Table, images: bool | None = None) -> pa.Table:
    """Training rows as TRL conversational SFT rows (``to_trl(kind="training")``);
    ``images`` adds TRL's ``images`` column (None: when a row has an image part)."""
    out = _parts.with_images(openai_table(table), _arrow.message_column(table, "messages"), images)
    out = _arrow.set_column(out, "messages", trl_messages(_arrow.column(out, "messages"), inline_images=images is False))
    if "prompt_text" in out.column_names and "prompt" not in out.column_names:
        return ordered(_arrow.drop(out, "loss_mask"), TRAINING_ORDER)  # already TRL rows
    prompt = _arrow.optional(out, "prompt", pa.string())
    if isinstance(prompt.type, pa.JsonType) or not pa.types.is_string(prompt.type):
        raise SchemaError(
            f"expected the ask as a string column, got {prompt.type}",
            location="column 'prompt'",
            hint="to_trl takes training rows (whileai/export default config), before any other wire shape.",
        )
    text = _arrow.if_else(pc.fill_null(pc.not_equal(prompt, ""), False), prompt, pa.scalar(None, pa.string()))
    out = _arrow.set_column(_arrow.drop(out, "prompt", "loss_mask"), "prompt_text", text)
    return ordered(out, TRAINING_ORDER)


def trl_completion_table(table: pa.Table, images: bool | None = None) -> pa.Table:
    """Training rows as TRL prompt/completion rows split at the last assistant
    turn; rows with no such split are dropped (``to_trl(kind="completion")``)."""
    out = trl_training_table(table, images)
    lists = _arrow.column(out, "messages")
    messages = _arrow.flat(lists)
    lens = _arrow.lengths(lists)
    starts = _arrow.offsets_of(lens)
    assistant = _arrow.to_numpy_bool(pc.equal(pc.struct_field(messages, "role"), "assistant"))
    last = _arrow.first_true_per_row(assistant, _arrow.parents(lists), len(lists), last=True)
    split = np.where(last >= 0, last - starts[:-1], -1)
    keep = np.flatnonzero(split >= 1)
    out = _arrow.drop(out, "messages").take(pa.array(keep))
    head = split[keep]
    begin = starts[:-1][keep]
    size = lens[keep]
    prompt = _arrow.list_slices(messages, begin, head)
    completion = _arrow.list_slices(messages, begin + head, size - head)
    out = _arrow.set_column(_arrow.set_column(out, "prompt", prompt), "completion", completion)
    return ordered(out, TRAINING_ORDER)


def fireworks_table(table: pa.Table) -> pa.Table:
    """Training rows as Fireworks SFT rows: ``messages`` and ``tools``."""
    lists = openai_messages(_arrow.message_column(table, "messages"))
    _parts.check_fireworks(lists, "messages")
    mask = _arrow.column(table, "loss_mask") if "loss_mask" in table.column_names else None
    columns = {"messages": fireworks_messages(lists, mask)}
    if "tools" in table.column_names:
        columns["tools"] = truthy_json(_arrow.column(table, "tools"))
    return pa.table(columns)


def truthy_json(values: pa.Array) -> pa.Array:
    """Json values with empty lists and objects nulled (whileai writes them only when truthy)."""
    if pa.types.is_dictionary(values.type):
        return pa.DictionaryArray.from_arrays(values.indices, truthy_json(values.dictionary))
    text = values.storage if isinstance(values, pa.ExtensionArray) else values
    short = pc.fill_null(pc.less_equal(pc.binary_length(text), 16), False)
    if pc.any(short).as_py():
        trimmed = pc.utf8_trim_whitespace(pc.if_else(short, text, ""))
        empty = pc.and_(
            short, pc.fill_null(pc.is_in(trimmed, pa.array(["[]", "{}", '""', "null", "false", "0"])), False)
        )
        text = _arrow.if_else(empty, pa.scalar(None, pa.string()), text)
    return text.cast(pa.json_())


# ---------------------------------------------------------------- preference


def openai_preference_table(table: pa.Table) -> pa.Table:
    """Preference pairs (whole conversations per side) in whileai's
    ``export_preference`` OpenAI shape."""
    out = table
    for side in ("chosen", "rejected"):
        out = _arrow.set_column(out, side, openai_messages(_arrow.message_column(table, side), side))
    out = _arrow.set_column(out, "schema_version", pa.array([SCHEMA_VERSION] * out.num_rows, pa.string()))
    return ordered(out, PREFERENCE_ORDER)


def trl_preference_table(table: pa.Table, images: bool | None = None) -> tuple[pa.Table, int, int]:
    """OpenAI preference rows as TRL one-turn DPO rows: ``(rows, dropped, cut)``."""
    inline = images is False
    chosen = trl_messages(openai_messages(_arrow.message_column(table, "chosen"), "chosen"), inline_images=inline)
    rejected = trl_messages(openai_messages(_arrow.message_column(table, "rejected"), "rejected"), inline_images=inline)
    split = pairs.first_difference(chosen, rejected, decoded_arguments=True)
    out = table.take(pa.array(split.keep))
    out = _arrow.set_column(out, "prompt", split.prefix(chosen))
    out = _arrow.set_column(out, "chosen", split.turn(chosen, "chosen"))
    out = _arrow.set_column(out, "rejected", split.turn(rejected, "rejected"))
    out = _parts.with_images(out, split.prefix(openai_messages(_arrow.message_column(table, "chosen"), "chosen")), images)
    if "schema_version" not in out.column_names:
        out = _arrow.set_column(out, "schema_version", pa.array([SCHEMA_VERSION] * out.num_rows, pa.string()))
    return ordered(out, PREFERENCE_ORDER), split.dropped, split.cut


def fireworks_preference_table(table: pa.Table) -> tuple[pa.Table, int, int]:
    """OpenAI preference rows as Fireworks one-turn DPO rows: ``(rows, dropped, cut)``."""
    chosen = fireworks_messages(openai_messages(_arrow.message_column(table, "chosen"), "chosen"), None, keep_tool_call_id=False)
    rejected = fireworks_messages(openai_messages(_arrow.message_column(table, "rejected"), "rejected"), None, keep_tool_call_id=False)
    _parts.check_fireworks(chosen, "chosen")
    _parts.check_fireworks(rejected, "rejected")
    split = pairs.first_difference(chosen, rejected, decoded_arguments=False)
    tools = _arrow.optional(table, "tools", pa.json_()).take(pa.array(split.keep))
    tools_text = tools.storage if isinstance(tools, pa.ExtensionArray) else tools
    tools_text = pc.fill_null(tools_text, "[]").cast(pa.json_())
    prefix = split.prefix(chosen)
    inputs = pa.StructArray.from_arrays([prefix, tools_text], fields=list(_types.FIREWORKS_INPUT_TYPE))
    out = pa.table(
        {
            "input": inputs,
            "preferred_output": split.turn(chosen, "chosen"),
            "non_preferred_output": split.turn(rejected, "rejected"),
        }
    )
    return out, split.dropped, split.cut


# ---------------------------------------------------------------- transforms


def _is_preference(table: pa.Table) -> bool:
    names = table.column_names
    return "chosen" in names and "rejected" in names and "messages" not in names


@dataclass(frozen=True)
class ToOpenAI:
    """Canonical rows as whileai's OpenAI wire rows (training or preference).

    Returns the batch with source-only columns dropped, message keys whileai
    never writes dropped, and ``schema_version``.

    Example:
        >>> from whileai_datasets import transforms as wai_transforms
        >>> ds = ds.with_format("arrow").map(wai_transforms.to_openai, batched=True)  # doctest: +SKIP
    """

    def __call__(self, batch: Batch, indices: list[int] | None = None) -> Batch:
        table = _arrow.as_table(batch)
        out = openai_preference_table(table) if _is_preference(table) else openai_table(table)
        return _arrow.like(batch, _portable.portable_table(out), reshaped=True)


@dataclass(frozen=True)
class ToTrl:
    """Canonical rows as whileai's TRL rows (``to_trl`` with ``kind``).

    Args:
        kind: ``"training"`` (conversational ``messages``), ``"completion"``
            (``prompt``/``completion`` split at the last assistant turn) or
            ``"preference"`` (one-turn DPO rows from preference pairs).
        images: TRL's vision format: image parts become ``{"type": "image"}``
            placeholders and their references (URLs, paths, data URIs) an
            ``images`` list per row, which TRL's vision collator fills them
            from. ``None`` adds the column to a batch that has an image part;
            pass ``True`` when mapping a dataset whose batches may lack one
            (every batch then has the column, ``[]`` on text-only rows);
            ``False`` keeps each reference in its part (``{"type": "image",
            "image": ref}``) and adds no column.
    Raises:
        OptionError: an unknown ``kind``.
        SchemaError: a row-dropping kind called one example at a time.
    Example:
        >>> from whileai_datasets import transforms as wai_transforms
        >>> ds = ds.with_format("arrow").map(wai_transforms.to_trl("completion"), batched=True)  # doctest: +SKIP
    """

    kind: TrlKind = "training"
    images: bool | None = None

    def __post_init__(self) -> None:
        check_choice(self.kind, "kind", TrlKind)

    def __call__(self, batch: Batch, indices: list[int] | None = None) -> Batch:
        if self.kind != "training":
            _arrow.require_batched(batch, f'to_trl("{self.kind}")')
        table = _arrow.as_table(batch)
        if self.kind == "training":
            out = trl_training_table(table, self.images)
        elif self.kind == "completion":
            out = trl_completion_table(table, self.images)
        else:
            out = trl_preference_table(table, self.images)[0]
        return _arrow.like(batch, _portable.portable_table(out), reshaped=True)


@dataclass(frozen=True)
class ToFireworks:
    """Canonical rows as whileai's Fireworks rows (SFT, or DPO for preference pairs).

    Example:
        >>> from whileai_datasets import transforms as wai_transforms
        >>> ds = ds.with_format("arrow").map(wai_transforms.to_fireworks, batched=True)  # doctest: +SKIP
    """

    def __call__(self, batch: Batch, indices: list[int] | None = None) -> Batch:
        names = batch.column_names if isinstance(batch, pa.Table) else list(batch.keys())
        if "chosen" in names and "rejected" in names and "messages" not in names:
            _arrow.require_batched(batch, "to_fireworks")
            out = fireworks_preference_table(_arrow.as_table(batch))[0]
        else:
            out = fireworks_table(_arrow.as_table(batch))
        return _arrow.like(batch, _portable.portable_table(out), reshaped=True)


def to_trl(kind: TrlKind = "training", *, images: bool | None = None) -> ToTrl:
    """``ToTrl(kind, images)``: ``ds.map(to_trl("completion"), batched=True)``."""
    return ToTrl(kind, images)


#: The ``ToOpenAI()`` instance.
to_openai = ToOpenAI()
#: The ``ToFireworks()`` instance.
to_fireworks = ToFireworks()
