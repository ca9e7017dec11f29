"""Typed column builders: a chunk of canonical rows filled field by field.

The normalizer appends each row's values straight onto one Python list per
Arrow leaf (message roles, contents, tool-call ids, ...) plus the offsets
that nest them, and Arrow builds every column from those lists in one call
each (``pa.array`` of strings, ``ListArray.from_arrays``): no dict per message,
no nested-struct inference. What is the same on every row (the ``"function"``
type of a tool call, the ``loss_mask`` rule, a ``tools`` constant) is built
by vectorized Arrow steps once per chunk.

A row is all or nothing: ``rollback(rows)`` when it fails leaves the columns
as they were (``on_bad_row="skip"``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from operator import itemgetter
from typing import Any, NoReturn

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from whileai_datasets import option_names
from whileai_datasets._typing import ROLES
from whileai_datasets.rows import content as content_parts
from whileai_datasets.rows import normalize, training_flags, unread_keys
from whileai_datasets.rows.features import MESSAGE_TYPE, TOOL_CALL_TYPE, storage_type
from whileai_datasets.rows.normalize import RowContext

_ROLE_SET = frozenset(ROLES)
#: message keys that are typed fields; every other key goes to ``extra``
_TYPED = frozenset(("role", "content", "reasoning_content", "tool_calls", "name", "tool_call_id"))
#: message keys read: the typed ones and the training flags
_READ = frozenset(unread_keys.MESSAGE_KEYS)
_MESSAGE_STORAGE = storage_type(MESSAGE_TYPE)
_FUNCTION_STORAGE = TOOL_CALL_TYPE.field("function").type
_PARTS_STORAGE = _MESSAGE_STORAGE.field("parts").type
#: the ids of a row's first tool calls, ``call_0000`` on (whileai numbers them so)
_CALL_IDS = tuple(f"call_{i:04d}" for i in range(64))
#: key orders a chunk remembers (``ScalarColumns._pick``)
MAX_KEY_ORDERS = 512


class MessageColumns:
    """One ``List(Message())`` column of a chunk."""

    __slots__ = ("row_offsets", "role", "content", "name", "tool_call_id", "extra", "reasoning", "parts",
                 "call_offsets", "call_id", "call_name", "call_arguments", "keep_keys", "said", "flags",
                 "unread", "argument_text")

    def __init__(self, keep_keys: bool = False) -> None:
        self.keep_keys = keep_keys
        self.row_offsets = [0]
        self.role: list[str] = []
        self.content: list[str] = []
        self.name: list[str | None] = []
        self.tool_call_id: list[str | None] = []
        self.extra: list[str | None] = []
        #: ``reasoning_content`` and content parts (storage dicts), per message;
        #: empty while no message of the chunk has any (then all null)
        self.reasoning: list[str | None] = []
        self.parts: list[list[dict[str, Any]] | None] = []
        #: per message, where its tool calls end in the call lists
        self.call_offsets = [0]
        self.call_id: list[str] = []
        self.call_name: list[str] = []
        self.call_arguments: list[str] = []
        #: the text of each assistant message of the row added last, when all
        #: of its messages were plain text (else None): the leak check's input
        self.said: list[str] | None = None
        #: each message's own training flag (``rows.training_flags``: 0, 1, or -1 for none); empty
        #: while no message of the chunk has one
        self.flags: list[int] = []
        #: ``(key, path)`` of the keys the row added last has that are not read (``rows.unread_keys``)
        self.unread: list[tuple[str, str]] = []
        #: the row being added keeps arguments given as JSON text of an object byte for byte (not whileai's row)
        self.argument_text = False

    def rollback(self, rows: int) -> None:
        """Keep only the first ``rows`` rows: what a failed row added goes (its
        start is where the last complete row ended, so no mark is kept per row)."""
        messages = self.row_offsets[rows]
        self.truncate((rows + 1, messages, self.call_offsets[messages]))

    def truncate(self, mark: tuple[int, int, int]) -> None:
        rows, messages, calls = mark
        del self.row_offsets[rows:]
        for column in (self.role, self.content, self.name, self.tool_call_id, self.extra, self.reasoning, self.parts):
            del column[messages:]
        if all(p is None for p in self.parts) and all(r is None for r in self.reasoning):  # all null again
            self.reasoning.clear()
            self.parts.clear()
        del self.flags[messages:]
        if all(f < 0 for f in self.flags):
            self.flags.clear()
        del self.call_offsets[messages + 1 :]
        for column in (self.call_id, self.call_name, self.call_arguments):
            del column[calls:]

    def add(self, messages: Sequence[Any], *, system: str, ctx: RowContext, column: str = "messages",
            row_flags: Sequence[int | None] | None = None, argument_text: bool = False) -> None:
        """One row's messages in the canonical form, as whileai's
        ``_convert_messages`` builds them (without think-stripping or
        truncation: those are transforms): tool-call ids in call order
        (``call_0000``, ...) linked first in, first out to the tool messages
        that answer them; training flags (``row_flags``: the row's own
        ``loss_mask``, one per message, and each message's ``weight`` / ``loss``)
        kept for ``loss_mask``. With ``argument_text`` (a row another tool wrote),
        arguments given as JSON text of an object keep their bytes; else they are
        encoded as whileai encodes them. The builder's hottest loop: error paths build
        their messages only when raised."""
        self.argument_text = argument_text
        # bound appends: this loop runs once per message of every row
        add_role, add_content = self.role.append, self.content.append
        add_name, add_answer, add_calls_end = self.name.append, self.tool_call_id.append, self.call_offsets.append
        call_id = self.call_id
        keep_keys = self.keep_keys
        if system:
            if self.parts:
                self._extras(None, None)
            if self.flags:
                self.flags.append(-1)
            add_role("system")
            add_content(system)
            add_name(None)
            add_answer(None)
            add_calls_end(len(call_id))
            if keep_keys:
                self.extra.append(None)
        count = 0
        pending: list[str] = []
        said: list[str] | None = []
        self.said = None
        self.unread.clear()
        extras = self.parts  # empty (all null) until a message has parts or reasoning
        for i, message in enumerate(messages):
            if type(message) is not dict:
                raise ctx.error(
                    f"{column}[{i}]",
                    f"expected a message object, got {normalize.type_name(message)}",
                    "Fix or drop the row.",
                )
            role = message.get("role")
            if type(role) is not str or role not in _ROLE_SET:  # a list or dict role is not hashable
                role = _other_role(ctx, f"{column}[{i}]", role)
            content = message.get("content")
            read = None
            if type(content) is not str or "reasoning_content" in message:
                # parts, reasoning, or a value whileai reads as str(content or "")
                read = content_parts.read_content(message, role, ctx.error, f"{column}[{i}]")
                content = read.content
                said = None  # not plain text: the leak check reads the raw message itself
            name = answer = None
            if role == "assistant":
                if said is not None:
                    said.append(content)
                calls = message.get("tool_calls")
                if calls and type(calls) is str:  # the list written as JSON text
                    calls = _json_text(calls, ctx, f"{column}[{i}].tool_calls")
                if calls and type(calls) is not list:
                    raise ctx.error(
                        f"{column}[{i}].tool_calls",
                        f"expected a list, got {normalize.type_name(calls)}",
                        "Fix the row.",
                    )
                if read is not None and read.calls:
                    calls = [*(calls or ()), *read.calls]
                if calls:
                    for j, call in enumerate(calls):
                        pending.append(self._call(call, count, ctx, column, i, j))
                        count += 1
            elif role == "tool":
                given = message.get("name")
                if given:
                    name = str(given)
                if message.get("tool_call_id"):
                    answer = str(message["tool_call_id"])
                elif pending:
                    answer = pending.pop(0)
            if read is not None:
                self._extras(read.reasoning, read.parts)
            elif extras:
                self._extras(None, None)
            if row_flags is not None or not _TYPED.issuperset(message):  # keys beyond the typed ones
                self._flag(training_flags.message_flag(message, role, ctx, f"{column}[{i}]",
                                                       row_flags[i] if row_flags is not None else None))
                self.unread.extend((key, f"{column}[{i}].{key}") for key, value in message.items()
                                   if value is not None and key not in _READ)
            elif self.flags:
                self.flags.append(-1)
            add_role(role)
            add_content(content)
            add_name(name)
            add_answer(answer)
            add_calls_end(len(call_id))
            if keep_keys:
                rest = {k: v for k, v in message.items() if k not in _TYPED}
                self.extra.append(normalize.JSON_ENCODER.encode(rest) if rest else None)
        self.row_offsets.append(len(self.role))
        self.said = said

    def _extras(self, reasoning: str | None, parts: list[dict[str, Any]] | None) -> None:
        """Record the next message's ``reasoning_content`` and parts (before
        its role is appended). The two lists stay empty, standing for all
        null, until the first message that has either; they are then padded."""
        if not self.parts:
            if reasoning is None and parts is None:
                return
            self.reasoning.extend([None] * len(self.role))
            self.parts.extend([None] * len(self.role))
        self.reasoning.append(reasoning)
        self.parts.append(parts)

    def _flag(self, flag: int | None) -> None:
        """Record the next message's training flag (before its role is appended): the list stays
        empty, standing for no flags, until the first message that has one; it is then padded."""
        if flag is None:
            if self.flags:
                self.flags.append(-1)
            return
        if not self.flags:
            self.flags.extend([-1] * len(self.role))
        self.flags.append(flag)

    def _call(self, call: Any, count: int, ctx: RowContext, column: str, i: int, j: int) -> str:
        """Append one tool call (its id, name and arguments); returns its id."""
        if type(call) is str:  # one call written as JSON text (some RL libraries store them so)
            call = _json_text(call, ctx, f"{column}[{i}].tool_calls[{j}]")
        if type(call) is not dict:
            path = f"{column}[{i}].tool_calls[{j}]"
            raise ctx.error(path, f"expected a tool-call object, got {normalize.type_name(call)}", "Fix the row.")
        function = call.get("function")
        if type(function) is not dict and not isinstance(function, dict):
            function = call
        call_id = call.get("id") or (_CALL_IDS[count] if count < len(_CALL_IDS) else f"call_{count:04d}")
        if type(call_id) is not str:
            call_id = str(call_id)
        name = function.get("name")
        self.call_name.append(name if type(name) is str else str(name or ""))
        arguments = function.get("arguments")
        if self.argument_text and type(arguments) is str and _object_text(arguments):
            self.call_arguments.append(arguments)  # another tool's text, as its model saw it
        else:
            self.call_arguments.append(normalize.wire_arguments(arguments))
        self.call_id.append(call_id)
        return call_id

    # ------------------------------------------------------------ to Arrow

    def array(self) -> pa.ListArray:
        """The column in storage form (``extra`` as plain strings)."""
        n_calls = len(self.call_id)
        function = pa.StructArray.from_arrays(
            [pa.array(self.call_name, pa.string()), pa.array(self.call_arguments, pa.string())],
            fields=list(_FUNCTION_STORAGE),
        )
        kind = pa.DictionaryArray.from_arrays(np.zeros(n_calls, np.int32), pa.array(["function"])).cast(pa.string())
        calls = pa.StructArray.from_arrays(
            [pa.array(self.call_id, pa.string()), kind, function], fields=list(TOOL_CALL_TYPE)
        )
        call_offsets = np.asarray(self.call_offsets, dtype=np.int32)
        # a message without calls has null tool_calls (whileai never writes an empty list)
        no_calls = pa.array(call_offsets[1:] == call_offsets[:-1])
        tool_calls = pa.ListArray.from_arrays(pa.array(call_offsets), calls, mask=no_calls)
        n = len(self.role)
        extra = pa.array(self.extra, pa.string()) if self.keep_keys else pa.nulls(n, pa.string())
        children = [
            pa.array(self.role, pa.string()),
            pa.array(self.content, pa.string()),
            tool_calls,
            pa.array(self.name, pa.string()),
            pa.array(self.tool_call_id, pa.string()),
            extra,
            pa.array(self.reasoning, pa.string()) if self.parts else pa.nulls(n, pa.string()),
            pa.array(self.parts, _PARTS_STORAGE) if self.parts else pa.nulls(n, _PARTS_STORAGE),
        ]
        structs = pa.StructArray.from_arrays(children, fields=list(_MESSAGE_STORAGE))
        return pa.ListArray.from_arrays(pa.array(np.asarray(self.row_offsets, dtype=np.int32)), structs)

    def loss_mask(self, messages: pa.ListArray, mode: str) -> pa.ListArray:
        """1 for each assistant message (``"assistant"``) or for each row's
        last one only (``"final"``), unless its own training flag is 0; 0 for
        everything else."""
        is_assistant = pc.equal(messages.values.field("role"), "assistant")
        values = np.asarray(is_assistant.to_numpy(zero_copy_only=False), dtype=np.int8)
        if mode == "final" and len(values):
            offsets = np.asarray(self.row_offsets, dtype=np.int64)
            rows = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))
            positions = np.flatnonzero(values)
            last = np.full(len(offsets) - 1, -1, dtype=np.int64)
            np.maximum.at(last, rows[positions], positions)
            values[:] = 0
            values[last[last >= 0]] = 1
        if self.flags:
            values[np.asarray(self.flags, dtype=np.int8) == 0] = 0
        return pa.ListArray.from_arrays(messages.offsets, pa.array(values, pa.int8()))


#: roles read as another: OpenAI's current API (and Codex) write its system turn as ``developer``;
#: chat templates and TRL know it as ``system`` (docs/differences.md)
ROLE_ALIASES = {"developer": "system"}


def _other_role(ctx: RowContext, path: str, role: Any) -> str:
    """The role ``role`` is read as (``ROLE_ALIASES``), or the error for a role that is not read."""
    if type(role) is str and role in ROLE_ALIASES:
        return ROLE_ALIASES[role]
    _bad_role(ctx, path, role)


def _object_text(text: str) -> bool:
    """Whether ``text`` is the JSON text of an object (what wire arguments hold)."""
    try:
        return type(json.loads(text)) is dict
    except ValueError:
        return False


def _json_text(text: str, ctx: RowContext, path: str) -> Any:
    """Tool calls written as JSON text, parsed; text that is not JSON is the row's error."""
    try:
        return json.loads(text)
    except ValueError as err:
        raise ctx.error(path, f"expected a tool call (an object, or JSON text of one), got text that is not JSON "
                        f"({err}) starting {text[:40]!r}", "Fix the row.") from err


def _bad_role(ctx: RowContext, path: str, role: Any) -> NoReturn:
    got = "no role" if role is None else repr(role)
    raise ctx.error(
        f"{path}.role",
        f"expected one of {', '.join(repr(r) for r in ROLES)}, got {got}",
        f"Fix the exporter that wrote the row, or skip bad rows with {option_names.spell('on_bad_row', 'skip')}.",
    )


class ScalarColumns:
    """The carried scalar / Json columns of a chunk.

    Each row's values are taken in one C-level pass (``map(row.get, keys)``)
    and kept as a tuple; columns are the transposed tuples. A row is checked
    value by value (``normalize.typed_value``: the error names the row and
    key) only when its *type signature*, the tuple of its values' types, has
    not been seen valid before: rows of one file mostly share a handful of
    signatures, so almost every row costs two ``map`` calls and a set lookup.
    Json values are encoded column by column when the table is built."""

    __slots__ = ("kinds", "allowed", "keys", "names", "rows", "extra", "valid", "n", "_list_keys", "_transposed",
                 "_picks")

    def __init__(self, kinds: dict[str, str], fast: dict[str, tuple[type, ...]], keys: Iterable[str]) -> None:
        self.kinds = kinds
        self.keys = frozenset(keys)
        #: the columns taken from the row, in a fixed order
        self.names = tuple(sorted(self.keys))
        self.allowed = {k: frozenset(fast[k]) | {type(None)} for k in self.names if k in fast}
        #: keys whose values need more than a type check (lists of numbers)
        self._list_keys = frozenset(k for k in self.names if kinds[k].startswith("list<"))
        self.rows: list[tuple[Any, ...]] = []
        #: columns set by the chunk itself (``set``), not taken from the row
        self.extra: dict[str, list[Any]] = {}
        self.valid: set[tuple[type, ...]] = set()
        self.n = 0
        #: a row's key order -> what takes this chunk's columns from its values (``_pick``)
        self._picks: dict[tuple[str, ...], Callable[[tuple[Any, ...]], tuple[Any, ...]]] = {}
        #: ``(rows, columns)``: the first ``rows`` rows' values column by column, built once per table
        self._transposed: tuple[int, list[tuple[Any, ...]]] | None = None

    def add(self, row: dict[str, Any], ctx: RowContext) -> None:
        """Take this chunk's keys from ``row`` (checked); ``end_row`` once the row is complete."""
        keys = tuple(row)
        pick = self._picks.get(keys) or self._pick(keys)
        # the row's values in key order, None last: the columns' values (None where absent) in one C call
        values = pick((*row.values(), None)) if pick is not None else tuple(map(row.get, self.names))
        signature = tuple(map(type, values))
        if signature not in self.valid:
            self._check(values, signature, ctx)
        self.rows.append(values)

    def _pick(self, keys: tuple[str, ...]) -> Callable[[tuple[Any, ...]], tuple[Any, ...]] | None:
        """What takes the columns' values from the values of a row with these
        keys in this order (rows of one file mostly share a few orders); None
        past ``MAX_KEY_ORDERS`` orders, where rows are read key by key."""
        if len(self._picks) >= MAX_KEY_ORDERS or len(self.names) < 2:  # one name: itemgetter gives no tuple
            return None
        where = {key: i for i, key in enumerate(keys)}
        pick = self._picks[keys] = itemgetter(*(where.get(name, len(keys)) for name in self.names))
        return pick

    def _check(self, values: tuple[Any, ...], signature: tuple[type, ...], ctx: RowContext) -> None:
        """Each value against its column's type (``typed_value`` raises with
        the row and key); a signature of plain valid types is remembered."""
        cacheable = True
        for key, value in zip(self.names, values):
            if value is None:
                continue
            allowed = self.allowed.get(key)
            if allowed is not None and type(value) in allowed:
                continue
            normalize.typed_value(value, self.kinds[key], ctx, key)
            cacheable = cacheable and key not in self._list_keys
        if cacheable:
            self.valid.add(signature)

    def set(self, key: str, value: Any) -> None:
        """Set a column the chunk computes (not taken from the row) for the current row."""
        self.extra.setdefault(key, []).append(value)

    def end_row(self) -> None:
        self.n += 1

    def truncate(self) -> None:
        """Drop what the current (failed) row put in."""
        del self.rows[self.n :]
        for column in self.extra.values():
            del column[self.n :]

    def array(self, key: str, arrow_type: pa.DataType) -> pa.Array:
        if key in self.extra:
            return pa.array(self.extra[key], arrow_type)
        if not self.rows:
            return pa.nulls(self.n, arrow_type)
        if self._transposed is None or self._transposed[0] != len(self.rows):
            self._transposed = (len(self.rows), list(zip(*self.rows)))  # every column in one C-level pass
        column: Sequence[Any] = self._transposed[1][self.names.index(key)]
        if self.kinds[key] == "json":
            column = normalize.encode_json_column(column)
        return pa.array(column, arrow_type)

    def has(self, key: str) -> bool:
        return key in self.extra or key in self.keys
