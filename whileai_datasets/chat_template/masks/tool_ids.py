"""Tool-call ids in the form a template requires: a lossless rewrite, not a refusal.

Mistral's templates (v3 and later, as mistral-common generates them) raise "Tool call must have an id of
9 characters" for any other id, and most exported rows carry ids such as ``call_1`` or ``toolu_01A...``.
An id only pairs a call with its result, so each id is replaced by a 9-character one derived from it
(the first 9 hex digits of its SHA-256): the same id gives the same replacement in the call and in the
``tool_call_id`` of its result, and ids that differ stay different (but for a 1 in 2^36 chance). An id of 9
characters already is kept. Whether a template needs this is found by rendering a tool-call probe with its
ids as given and rewritten (``id_form``); the template then renders, and trains, the rewritten ids.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any, Literal

IdForm = Literal["as_given", "nine_characters"]
NINE = 9


def nine_character_id(value: Any) -> Any:
    """``value`` as a 9-character id (unchanged when it is one already, or not text)."""
    if not isinstance(value, str) or len(value) == NINE:
        return value
    return hashlib.sha256(value.encode("utf-8")).hexdigest()[:NINE]


def rewrite_ids(messages: Sequence[Mapping[str, Any]], form: IdForm) -> list[dict[str, Any]]:
    """``messages`` with every tool-call id and ``tool_call_id`` in ``form`` (the messages that change are
    copied; the others are the same objects)."""
    if form == "as_given":
        return [m if isinstance(m, dict) else dict(m) for m in messages]
    out = []
    for message in messages:
        calls, answered = message.get("tool_calls"), message.get("tool_call_id")
        if not calls and answered is None:
            out.append(message if isinstance(message, dict) else dict(message))
            continue
        changed = dict(message)
        if calls:
            changed["tool_calls"] = [{**call, "id": nine_character_id(call.get("id"))}
                                     if isinstance(call, Mapping) and "id" in call else call for call in calls]
        if answered is not None:
            changed["tool_call_id"] = nine_character_id(answered)
        out.append(changed)
    return out


def id_form(render: Any, messages: list[dict[str, Any]]) -> IdForm:
    """``"nine_characters"`` when ``render(messages)`` fails with the probe's ids and renders with them
    rewritten; ``"as_given"`` otherwise. ``render`` returns None for a conversation it cannot render."""
    if render(messages) is not None:
        return "as_given"
    return "nine_characters" if render(rewrite_ids(messages, "nine_characters")) is not None else "as_given"
