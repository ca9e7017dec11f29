"""The configs other trainers read, built one chunk of canonical rows at a time.

Each builder is a pure function ``(canonical_chunk: pa.Table, where: str) -> pa.Table`` over
columns (no Python loop per row): a chunk's output depends on that chunk alone, so a streaming
publisher can call it chunk by chunk and write each result as it comes. ``where`` names the
chunk in errors ("split 'train'", "split 'train', rows 1000-1999").

* ``messages``: whole conversations in OpenAI chat shape, tool-call arguments as JSON values
  (as chat templates render them), ``tools`` beside them, and on every message ``weight`` (0/1,
  1 exactly where ``loss_mask`` is 1: OpenAI, Together, Fireworks, axolotl's
  ``message_field_training``) and ``loss`` (the same as a bool: ms-swift). Rows that mark no
  turn are left out: they would train nothing.
* ``sharegpt``: LLaMA-Factory's sharegpt rows, one per loss-carrying assistant turn, ending at
  that turn: ``conversations`` of ``{from, value}`` (human, gpt, function_call, observation),
  ``system`` and ``tools`` as JSON text. LLaMA-Factory with ``mask_history: true`` trains only
  the last turn of a row, so each marked turn is trained once, with its history as context.
  A ``function_call`` value is the JSON LLaMA-Factory parses (``FunctionFormatter``): one
  ``{"name", "arguments"}`` object, or a list of them for parallel calls; text written beside
  the calls goes before them in LLaMA-Factory's ``<tool_call>...</tool_call>`` convention.
  Tool messages in a row become one observation, joined the way LLaMA-Factory's own OpenAI
  converter joins them. Only string features: the config loads on datasets 4.0.
* ``labels`` (for ``tokenized``): ``input_ids`` where ``assistant_masks`` is 1, -100 elsewhere.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from whileai_datasets.columnar import _arguments, _arrow, _portable
from whileai_datasets.columnar._text import concat, join, quote
from whileai_datasets.errors import SchemaError
from whileai_datasets.transforms import wire

MESSAGES = "messages"
SHAREGPT = "sharegpt"
#: The label of a token no loss is computed on (PyTorch's cross-entropy ``ignore_index``).
IGNORE_INDEX = -100
#: LLaMA-Factory's default ``tool_call_words``: text beside calls is read around these.
TOOL_CALL_OPEN, TOOL_CALL_CLOSE = "<tool_call>", "</tool_call>"
#: How LLaMA-Factory's OpenAI converter joins consecutive tool results into one observation.
OBSERVATION_JOIN = "\n</tool_response>\n<tool_response>\n"
SHAREGPT_TURN = pa.struct([("from", pa.string()), ("value", pa.string())])
_TRAINED = '{"weight": 1, "loss": true}'
_CONTEXT = '{"weight": 0, "loss": false}'
_WEIGHTED_END = r'"weight": 1, "loss": true\}$'


# --- the mask -----------------------------------------------------------------------------------------
def marked_messages(canonical: pa.Table, where: str) -> np.ndarray:
    """Per flattened message: whether ``loss_mask`` marks it (checked to have one entry per message)."""
    lists, mask = _arrow.column(canonical, "messages"), _arrow.column(canonical, "loss_mask")
    lens, mask_lens = _arrow.lengths(lists), _arrow.lengths(mask)
    bad = np.flatnonzero(lens != mask_lens)
    if len(bad):
        row = int(bad[0])
        raise SchemaError(f"loss_mask has {mask_lens[row]} entries for {lens[row]} messages",
                          location=f"{where}, row {row}",
                          hint="Recompute it with wai_transforms.loss_mask(mode) before publishing")
    return _arrow.to_numpy_bool(pc.not_equal(pc.fill_null(_arrow.flat(mask), 0), 0))


def rows_with_marks(canonical: pa.Table, marked: np.ndarray) -> np.ndarray:
    """Per row: how many of its messages are marked."""
    parent = _arrow.parents(_arrow.column(canonical, "messages"))
    return np.bincount(parent, weights=marked, minlength=canonical.num_rows).astype(np.int64)


# --- messages -----------------------------------------------------------------------------------------
def messages_chunk(canonical: pa.Table, where: str) -> pa.Table:
    """The ``messages`` config of a chunk: every row with a marked turn, each message with its
    ``weight`` and ``loss``, tool-call arguments as values, ``loss_mask`` dropped (the weights say it)."""
    marked = marked_messages(canonical, where)
    keep = np.flatnonzero(rows_with_marks(canonical, marked) > 0)
    trl = wire.trl_training_table(canonical)  # messages as TRL writes them: extra keys dropped
    lists = _arrow.column(trl, "messages")
    flags = pa.array(marked)
    extra = pc.if_else(flags, _TRAINED, _CONTEXT).cast(pa.json_())
    flat = _arrow.replace_fields(_arrow.flat(lists), extra=extra)
    out = _arrow.set_column(trl, "messages", _arrow.relist(lists, flat)).take(pa.array(keep, pa.int64()))
    return _portable.portable_table(wire.ordered(out, ("messages", "tools")))


def messages_facts(chunk: pa.Table, source: pa.Table | None = None) -> dict[str, int]:
    """Messages, and messages with weight 1, of a built ``messages`` chunk (counts that add up over
    chunks; ``source``, the canonical chunk, is not needed)."""
    objects = _arrow.flat(_arrow.column(chunk, "messages"))
    text = objects.storage if isinstance(objects, pa.ExtensionArray) else objects
    # the weight is the object's last member but one: text inside content or arguments cannot end the object
    weighted = pc.sum(pc.match_substring_regex(text, _WEIGHTED_END)).as_py() or 0
    return {"messages": len(objects), "weighted_messages": int(weighted)}


# --- sharegpt -----------------------------------------------------------------------------------------
def sharegpt_chunk(canonical: pa.Table, where: str) -> pa.Table:
    """The ``sharegpt`` config of a chunk: one row per marked turn, its history up to and including it."""
    marked = marked_messages(canonical, where)
    lists = _arrow.message_column(canonical, "messages")
    flat = _arrow.flat(lists)
    parent = _arrow.parents(lists)
    position = np.arange(len(flat), dtype=np.int64) - _arrow.offsets_of(_arrow.lengths(lists))[:-1][parent]
    role = pc.struct_field(flat, "role")
    leading_system = _arrow.to_numpy_bool(pc.equal(role, "system")) & (position == 0)
    turns = merged_turns(flat, parent, position, leading_system)
    turn = np.flatnonzero(marked)
    row = parent[turn]
    begin = turns.row_start[row]
    conversations = _arrow.list_slices(turns.values, begin, turns.index[turn] - begin + 1)
    system = _first_system(flat, parent, leading_system, canonical.num_rows)
    take = pa.array(row, pa.int64())
    return pa.table({"conversations": conversations, "system": system.take(take),
                     "tools": tools_text(canonical).take(take)})


class MergedTurns:
    """A chunk's conversations as sharegpt turns: leading system messages out, each run of tool
    messages one observation. ``values`` holds every turn; ``index[m]`` is the turn of message m;
    ``row_start[r]`` the first turn of row r."""

    def __init__(self, values: pa.StructArray, index: np.ndarray, row_start: np.ndarray) -> None:
        self.values, self.index, self.row_start = values, index, row_start


def merged_turns(flat: pa.StructArray, parent: np.ndarray, position: np.ndarray,
                 leading_system: np.ndarray) -> MergedTurns:
    """Sharegpt turns of the flattened messages of a chunk (see ``MergedTurns``)."""
    n_rows = int(parent[-1]) + 1 if len(parent) else 0
    is_tool = _arrow.to_numpy_bool(pc.equal(pc.struct_field(flat, "role"), "tool"))
    after_tool = np.zeros(len(flat), dtype=bool)
    after_tool[1:] = is_tool[:-1] & (position[1:] > 0)
    keep = ~leading_system
    opens = keep & ~(is_tool & after_tool)
    index = np.cumsum(opens) - 1
    kept = np.flatnonzero(keep)
    sizes = np.bincount(index[kept], minlength=int(opens.sum())) if len(kept) else np.zeros(0, np.int64)
    values = turn_values(flat).take(pa.array(kept, pa.int64()))
    joined = pc.binary_join(_arrow.build_list(_arrow.offsets_of(sizes), values), OBSERVATION_JOIN)
    first = np.flatnonzero(opens)
    tags = turn_tags(flat).take(pa.array(first, pa.int64()))
    per_row = np.bincount(parent[first], minlength=n_rows) if len(first) else np.zeros(n_rows, np.int64)
    turns = pa.StructArray.from_arrays([tags, joined], fields=list(SHAREGPT_TURN))
    return MergedTurns(turns, index, _arrow.offsets_of(per_row)[:-1])


def turn_tags(flat: pa.StructArray) -> pa.Array:
    """Each message's sharegpt ``from``: human, gpt, function_call (an assistant turn with tool
    calls), observation, or system (and the role itself for any other)."""
    role = pc.struct_field(flat, "role")
    calls = np.asarray(pc.fill_null(pc.list_value_length(pc.struct_field(flat, "tool_calls")), 0))
    assistant = pc.if_else(pa.array(calls > 0), "function_call", "gpt")
    names = {"user": "human", "tool": "observation"}
    tags = pc.if_else(pc.equal(role, "assistant"), assistant, role)
    for source, target in names.items():
        tags = pc.if_else(pc.equal(role, source), target, tags)
    return pc.fill_null(tags, "")


def turn_values(flat: pa.StructArray) -> pa.Array:
    """Each message's sharegpt ``value``: its text, or for an assistant turn with tool calls the
    call JSON LLaMA-Factory parses (an object, a list for parallel calls), after any text."""
    text = pc.fill_null(pc.struct_field(flat, "content"), "")
    calls = pc.struct_field(flat, "tool_calls")
    count = np.asarray(pc.fill_null(pc.list_value_length(calls), 0))
    if not count.any():
        return text
    flat_calls = _arrow.flat(calls)
    function = pc.struct_field(flat_calls, "function")
    _, _, arguments = _arguments.arguments_info(pc.struct_field(function, "arguments"))
    objects = join('{"name": ', pc.fill_null(quote(pc.struct_field(function, "name")), "null"),
                   ', "arguments": ', pc.fill_null(arguments.storage, "null"), "}")
    listed = pc.binary_join(_arrow.build_list(_arrow.offsets_of(count), objects), ", ")
    payload = pc.if_else(pa.array(count > 1), join("[", listed, "]"), listed)
    beside = concat(text, TOOL_CALL_OPEN, payload, TOOL_CALL_CLOSE)
    with_calls = pc.if_else(pc.equal(text, ""), payload, beside)
    return pc.if_else(pa.array(count > 0), with_calls, text)


def tools_text(canonical: pa.Table) -> pa.Array:
    """Per row, the JSON text of its tools ("" when it has none)."""
    if "tools" not in canonical.column_names:
        return pa.array([""] * canonical.num_rows, pa.string())
    column = _arrow.decoded(_arrow.column(canonical, "tools"))
    if isinstance(column.type, pa.JsonType):
        text = wire.truthy_json(column).storage
    elif pa.types.is_string(column.type):
        text = column
    else:
        from whileai_datasets.columnar import _json

        text = wire.truthy_json(_json.encode(column).cast(pa.json_())).storage
    return pc.fill_null(text, "")


def _first_system(flat: pa.StructArray, parent: np.ndarray, leading_system: np.ndarray, n_rows: int) -> pa.Array:
    """Per row, the content of its leading system message ("" when it has none)."""
    firsts = np.flatnonzero(leading_system)
    content = pc.fill_null(pc.struct_field(flat, "content"), "").take(pa.array(firsts, pa.int64()))
    index = np.full(n_rows, len(firsts), dtype=np.int64)  # rows without one point past the end: ""
    index[parent[firsts]] = np.arange(len(firsts))
    return pa.concat_arrays([content, pa.array([""], pa.string())]).take(pa.array(index))


# --- labels -------------------------------------------------------------------------------------------
def labels_chunk(tokenized: pa.Table, where: str) -> pa.Table:
    """``tokenized`` with ``labels``: each ``input_ids`` token where ``assistant_masks`` is 1, -100 elsewhere."""
    ids, masks = _arrow.column(tokenized, "input_ids"), _arrow.column(tokenized, "assistant_masks")
    if not np.array_equal(_arrow.lengths(ids), _arrow.lengths(masks)):
        row = int(np.flatnonzero(_arrow.lengths(ids) != _arrow.lengths(masks))[0])
        raise SchemaError("assistant_masks and input_ids differ in length", location=f"{where}, row {row}",
                          hint="Tokenize the rows again with wai_transforms.tokenize")
    flat_ids = _arrow.flat(ids)
    trained = pc.not_equal(pc.fill_null(_arrow.flat(masks), 0), 0)
    labels = pc.if_else(trained, flat_ids, pa.scalar(IGNORE_INDEX, flat_ids.type))
    return _arrow.set_column(tokenized, "labels", _arrow.relist(ids, labels))


def labels_facts(chunk: pa.Table, source: pa.Table | None = None) -> dict[str, int]:
    """Labels, and labels that are trained (not -100), of a built ``tokenized`` chunk."""
    labels = _arrow.flat(_arrow.column(chunk, "labels"))
    return {"labels": len(labels), "trained_labels": int(pc.sum(pc.not_equal(labels, IGNORE_INDEX)).as_py() or 0)}


def sharegpt_facts(chunk: pa.Table, source: pa.Table | None = None) -> dict[str, int]:
    """Turns of a built ``sharegpt`` chunk."""
    return {"turns": len(_arrow.flat(_arrow.column(chunk, "conversations")))}
