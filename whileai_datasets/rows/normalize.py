"""One whileai row, of any shape, into a canonical training row.

The semantics are whileai's (``whileai.simulations.training_rows`` and
``whileai.simulations.conversation``); the test suite holds them equal. Where
whileai silently drops what it cannot read (a message with an unknown role, a
message that is not an object), this module raises ``ExportFormatError`` with
the row's location instead: a silently shorter conversation trains a different
agent.

Row shapes (whileai's ``schemas/row-v1.json`` names them):

* engine / v1 / OTel rows: ``prompt`` + ``steps`` + ``final_text`` (OTel adds
  ``conversation_id``); the conversation is rebuilt from the steps.
* training exports and openai / fireworks wire rows: ``messages``.
* TRL rows: ``messages`` with ``prompt_text``, or ``prompt`` + ``completion``
  message lists; the two lists are one conversation again.
* platform pulls: ``tool_trace`` steps (``tool``/``input``/``output``).
* the published Hugging Face flat set: ``messages_json`` / ``steps_json`` /
  ``metadata_json`` strings.

Messages are put in their canonical form by ``rows.columns.MessageColumns``,
which fills Arrow columns directly; content that is not plain text (parts,
``reasoning_content``) is read by ``rows.content.read_content``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from whileai_datasets.errors import ExportFormatError

_JSON_STRING_KEYS = ("steps_json", "messages_json", "metadata_json")


class RowContext:
    """Where a row came from, for error messages: ``file line N (row M)``."""

    __slots__ = ("source", "line", "row")

    def __init__(self, source: str, line: int | None, row: int) -> None:
        self.source = source
        self.line = line
        self.row = row

    def at(self, path: str = "") -> str:
        where = f"{self.source} line {self.line} (row {self.row})" if self.line else f"{self.source} row {self.row}"
        return f"{where}, {path}" if path else where

    def error(self, path: str, problem: str, hint: str) -> ExportFormatError:
        return ExportFormatError(problem, location=self.at(path), hint=hint)


def type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


# ---------------------------------------------------------------- shapes in


def expand_flat(row: dict[str, Any], ctx: RowContext) -> dict[str, Any]:
    """The HF flat set's ``*_json`` strings parsed back into lists (whileai's
    ``_normalize_legacy``): ``steps_json`` -> ``steps``, ``messages_json`` ->
    ``messages`` (each only where the row has none), ``metadata_json`` ->
    ``metadata``. Unparseable JSON is an error here, not a kept string."""
    if "steps_json" not in row and "messages_json" not in row and "metadata_json" not in row:
        return row
    if not any(isinstance(row.get(k), str) for k in _JSON_STRING_KEYS):
        return row
    out = dict(row)
    for key in _JSON_STRING_KEYS:
        text = out.get(key)
        if not isinstance(text, str):
            continue
        try:
            value = json.loads(text)
        except ValueError as err:
            raise ctx.error(
                key, f"expected JSON text, got unparseable text ({err})", "Fix or drop the row."
            ) from err
        del out[key]
        target = key[: -len("_json")]
        if target == "metadata":
            if isinstance(value, dict):
                out.setdefault("metadata", value)
        elif isinstance(value, list) and not out.get(target):
            out[target] = value
    return out


def bridge_tool_trace(row: dict[str, Any]) -> dict[str, Any]:
    """A platform pull's ``tool_trace`` as ``steps`` (input -> arguments,
    output -> result), when the row has neither messages nor steps."""
    trace = row.get("tool_trace")
    if row.get("messages") or row.get("steps") or not isinstance(trace, list):
        return row
    out = dict(row)
    out["steps"] = [
        {"tool": step.get("tool"), "arguments": step.get("input"), "result": step.get("output")}
        for step in trace
        if isinstance(step, dict)
    ]
    return out


def join_trl(row: dict[str, Any]) -> dict[str, Any]:
    """TRL rows back to one conversation: ``prompt`` + ``completion`` message
    lists become ``messages``, and ``prompt_text`` is the ask again."""
    prompt, completion = row.get("prompt"), row.get("completion")
    if isinstance(prompt, list) and isinstance(completion, list) and not row.get("messages"):
        out = {k: v for k, v in row.items() if k not in ("prompt", "completion")}
        out["messages"] = list(prompt) + list(completion)
        if isinstance(row.get("prompt_text"), str):
            out["prompt"] = row["prompt_text"]
        return out
    if "prompt_text" in row and "prompt" not in row:
        out = dict(row)
        out["prompt"] = out["prompt_text"]
        return out
    return row


def join_preference(pair: dict[str, Any]) -> dict[str, Any]:
    """Exported one-turn preference rows back to whole conversations per side:
    TRL's ``prompt`` message list + one ``chosen``/``rejected`` turn, and
    Fireworks' ``input.messages`` + ``preferred_output``/``non_preferred_output``."""
    if isinstance(pair.get("input"), dict) and "preferred_output" in pair:
        prefix = list(pair["input"].get("messages") or [])
        out = {k: v for k, v in pair.items() if k not in ("input", "preferred_output", "non_preferred_output")}
        out["chosen"] = prefix + list(pair.get("preferred_output") or [])
        out["rejected"] = prefix + list(pair.get("non_preferred_output") or [])
        if pair["input"].get("tools") and "tools" not in out:
            out["tools"] = pair["input"]["tools"]
        return out
    prompt = pair.get("prompt")
    if isinstance(prompt, list) and isinstance(pair.get("chosen"), list) and isinstance(pair.get("rejected"), list):
        out = dict(pair)
        out["chosen"] = list(prompt) + list(pair["chosen"])
        out["rejected"] = list(prompt) + list(pair["rejected"])
        out["prompt"] = pair.get("prompt_text")
        return out
    return pair


def conversation(row: dict[str, Any]) -> list[dict[str, Any]]:
    """User and agent turns from ``prompt`` + ``steps`` + ``final_text``.

    Same semantics as ``whileai.simulations.conversation``: an ``opener`` is
    the agent's first turn; a step is a user turn, a tool call (the call on
    the assistant turn, its result as a tool message, the result JSON-encoded
    unless it is text) or spoken text; trailing user turns are dropped unless
    the agent errored; ``final_text`` fills an empty last assistant turn or is
    appended, unless an assistant turn already said it.
    """
    messages: list[dict[str, Any]] = []
    opener = str(row.get("opener") or "")
    if opener:
        messages.append({"role": "assistant", "content": opener})
    ask = str(row.get("prompt") or "")
    if ask:
        messages.append({"role": "user", "content": ask})
    for step in row.get("steps") or ():
        if isinstance(step, dict):
            _append_step(messages, step)
    final = str(row.get("final_text") or "")
    if not final.startswith("<agent error"):
        while len(messages) > 1 and messages[-1].get("role") == "user":
            messages.pop()
    if not final:
        return messages
    for message in messages:  # an assistant turn already said it (built turns hold text)
        if message["role"] == "assistant" and message["content"] == final and final.strip():
            return messages
    last = messages[-1] if messages else None
    if last is not None and last.get("role") == "assistant":
        if not str(last.get("content") or "").strip():
            last["content"] = final
    else:
        messages.append({"role": "assistant", "content": final})
    return messages


def _append_step(messages: list[dict[str, Any]], step: dict[str, Any]) -> None:
    if step.get("user"):
        messages.append({"role": "user", "content": str(step["user"])})
        return
    text = str(step.get("text") or "")
    tool = step.get("tool")
    if tool:
        call = {"name": tool, "arguments": step.get("arguments") or {}}
        messages.append({"role": "assistant", "content": text, "tool_calls": [call]})
        result = step.get("result")
        content = result if isinstance(result, str) else _RESULT_ENCODER.encode(result)
        messages.append({"role": "tool", "name": tool, "content": content})
    elif text:
        messages.append({"role": "assistant", "content": text})


# ---------------------------------------------------------------- messages


def decode_arguments(arguments: Any) -> Any:
    """Unwrap up to three layers of JSON string encoding."""
    value = arguments
    for _ in range(3):
        if not isinstance(value, str):
            break
        try:
            value = json.loads(value)
        except ValueError:
            break
    return value


def wire_arguments(arguments: Any) -> str:
    """Arguments as OpenAI wire JSON text, encoded exactly as whileai does."""
    if type(arguments) is dict:  # the common shape, an object of texts, written directly
        parts = []
        for key, item in arguments.items():
            if type(key) is not str or type(item) is not str:
                break
            parts.append(f"{_ESCAPE_ASCII(key)}: {_ESCAPE_ASCII(item)}")
        else:
            return "{" + ",".join(parts) + "}"  # whileai's separators: (",", ": ")
    value = decode_arguments(arguments)
    if isinstance(value, str):
        return value
    return _ARGUMENTS_ENCODER.encode(value or {})


# ---------------------------------------------------------------- scalars

class Encoder:
    """``json.JSONEncoder(**options).encode``, with its C encoder built once.

    ``JSONEncoder.encode`` builds a new C encoder on every call, which costs
    more than encoding a small object (1.6 of 2.2 us for a tool call's
    arguments); at a few encodes per row that is a fifth of the builder's
    time. Output is the same text: the same C function with the same options."""

    def __init__(self, **options: Any) -> None:
        self._python = json.JSONEncoder(**options)
        self._markers: dict[int, Any] = {}
        self._encode = None
        make = getattr(json.encoder, "c_make_encoder", None)
        python = self._python
        if make is not None and python.indent is None:
            strings = json.encoder.encode_basestring_ascii if python.ensure_ascii else json.encoder.encode_basestring
            self._encode = make(
                self._markers if python.check_circular else None, python.default, strings, None,
                python.key_separator, python.item_separator, python.sort_keys, python.skipkeys, python.allow_nan,
            )

    def encode(self, value: Any) -> str:
        if self._encode is None:
            return self._python.encode(value)
        try:
            return "".join(self._encode(value, 0))
        except BaseException:
            self._markers.clear()  # an error mid-way leaves containers marked as open
            raise


#: ``json.dumps``' string writer with ``ensure_ascii`` (the C one when there is one)
_ESCAPE_ASCII = json.encoder.encode_basestring_ascii
#: One encoder each, built once.
_ARGUMENTS_ENCODER = Encoder(separators=(",", ": "), default=str)
#: ``json.dumps(value, default=str)``, as whileai encodes a tool result
_RESULT_ENCODER = Encoder(default=str)
JSON_ENCODER = Encoder(ensure_ascii=False)

#: value types whose ``==`` is exact (no ``1 == 1.0 == True``, no ``0.0 == -0.0``) once the types match
_EXACT_TYPES = frozenset((str, int, bool, type(None)))


def encode_json_column(values: Sequence[Any]) -> list[str | None]:
    """``JSON_ENCODER.encode`` of each value (None stays None). An object of
    scalars under text keys equal to the one before it (same keys in the same
    order, same value types, equal values: a run's ``lineage``, the same on
    every row) reuses that one's text instead of encoding it again."""
    encode = JSON_ENCODER.encode
    out: list[str | None] = []
    last_key: Any = None
    last_text = ""
    for value in values:
        if value is None:
            out.append(None)
        elif type(value) is dict:
            key = (tuple(value.items()), tuple(map(type, value.values())))
            if key != last_key:
                last_text = encode(value)
                exact = _EXACT_TYPES.issuperset(key[1]) and all(type(name) is str for name in value)
                last_key = key if exact else None
            out.append(last_text)
        else:
            out.append(encode(value))
    return out


#: column kind -> the Python types a value may have (None: any JSON value)
_ALLOWED: dict[str, frozenset[type] | None] = {
    "string": frozenset((str,)),
    "float64": frozenset((int, float)),
    "int64": frozenset((int,)),
    "int8": frozenset((int,)),
    "bool": frozenset((bool,)),
    "list<float64>": frozenset((list,)),
    "json": None,
}
_EXPECTED = {
    "string": "a string",
    "float64": "a number",
    "int64": "an integer",
    "int8": "an integer",
    "bool": "true or false",
    "list<float64>": "a list of numbers",
}


def column_kinds(features: dict[str, Any]) -> dict[str, str]:
    """Each column's converter name, from its ``datasets`` feature."""
    kinds: dict[str, str] = {}
    for name, feature in features.items():
        kind = type(feature).__name__
        if kind == "Value":
            kinds[name] = feature.dtype
        elif kind == "Json":
            kinds[name] = "json"
        elif kind == "List" and type(feature.feature).__name__ == "Value":
            kinds[name] = f"list<{feature.feature.dtype}>"
        else:
            kinds[name] = "object"
    return kinds


def typed_value(value: Any, kind: str, ctx: RowContext, key: str) -> Any:
    """``value`` converted for a column of ``kind``, or an error naming the row
    and key. Null stays null (the row did not carry the key). Booleans are not
    numbers here: ``True`` in a reward column is an error, not ``1.0``."""
    if value is None:
        return None
    allowed = _ALLOWED[kind]
    if allowed is None:
        return JSON_ENCODER.encode(value)
    if type(value) in allowed and (kind != "list<float64>" or all(type(x) in (int, float) for x in value)):
        return value
    raise ctx.error(
        key,
        f"expected {_EXPECTED[kind]}, got {type_name(value)} {json.dumps(value, default=str)[:60]}",
        "Fix the row, or load it with the 'raw' config, which keeps any value.",
    )
