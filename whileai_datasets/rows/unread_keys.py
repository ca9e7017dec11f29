"""Keys the reader does not read, counted so that nothing the user wrote goes without a word.

Two kinds, each counted per key with the first place it was seen:

* message keys outside the ones a message is read by (``role``, ``content``, ``reasoning_content``,
  ``tool_calls``, ``name``, ``tool_call_id`` and the training flags ``weight`` / ``loss``), unless
  their value is null (nothing is lost then: OpenAI responses carry ``"refusal": null``). They are
  dropped, or kept in the message's ``extra`` with ``keep_message_keys=True``; neither renders them.
* row keys that look meant to be read: a near miss of a key the reader reads (``mesages``), or a
  key other formats hold a turn under (``response``, ``output``, ``answer``, ...) on a row read
  from other keys. Other row keys are metadata (whileai rows carry any number; the ``raw`` config
  keeps them all) and are not counted.

A key that is a near miss of one read (``contnet``), or a known other name of one (``thinking``
for ``reasoning_content``), gets a "did you mean". ``Unread`` adds rows up and merges across the
builder's jobs as ``BadRows`` does; the builder and the export say it once per dataset with an
``UnreadKeysWarning``.
"""

from __future__ import annotations

import difflib
import functools
from dataclasses import dataclass, field
from typing import Any

from whileai_datasets import option_names
from whileai_datasets.rows.normalize import RowContext

#: message keys the reader reads
MESSAGE_KEYS = ("role", "content", "reasoning_content", "tool_calls", "name", "tool_call_id", "weight", "loss")
#: row keys the reader reads in some row shape (the carried columns are added by ``Unread.row_keys``)
ROW_KEYS = ("messages", "conversations", "conversation", "prompt", "steps", "final_text", "opener", "tool_trace",
            "completion",
            "messages_json", "steps_json", "metadata_json", "prompt_text", "tools", "system", "images", "videos", "audios", "loss_mask",
            "response", "system_prompt")
#: whileai's row keys (``schemas/row-v1.json``): metadata, never a near miss of another key
WHILEAI_ROW_KEYS = frozenset((
    "ask", "ask_family", "calibration", "conversation_id", "failure_class", "fault_detected", "faults", "final_text",
    "finish_reason", "gold_labels", "gold_reward", "group_id", "history", "intent_known", "judge_meta", "judge_name",
    "judge_status", "label_source", "length", "lineage", "llm_reason", "llm_reward", "logprob", "markers", "messages",
    "model_version", "n_tokens", "opener", "opening", "phrasing", "policy_version", "pressure", "privileged",
    "prompt", "quality", "quality_reason", "quality_scores", "qwen_reward", "reason", "reward", "rollout_index",
    "sampling", "scenario_id", "schema_version", "spec_id", "stance", "steps", "texture", "tier", "token_logprobs",
    "tone", "tool_known", "tools", "ts", "user", "user_model", "vagueness", "world_state", "writer_model"))
#: other names of a key that is read: what the key most likely meant
OTHER_NAMES = {"thinking": "reasoning_content", "reasoning": "reasoning_content", "text": "content",
               "value": "content", "from": "role", "functions": "tools", "function_call": "tool_calls",
               "output": "response", "answer": "response", "reply": "response",
               "instruction": "prompt", "query": "prompt", "question": "prompt"}
#: the row keys a reply is read from (``rows.conversations.prompt_reply``)
REPLY = ("response", "completion")
#: row keys other formats hold a turn under
TURN_KEYS = frozenset(("response", "completion", "output", "answer", "reply", "chosen", "rejected", "instruction",
                       "input", "query", "question", "text", "preferred_output", "non_preferred_output",
                       "rejected_response", "rejected_messages"))
#: row keys that hold a side of a preference pair: the ``preference`` config reads them (``rows.pairs``)
PAIR_SIDE_KEYS = frozenset(("chosen", "rejected", "preferred_output", "non_preferred_output", "rejected_response",
                            "rejected_messages"))
#: distinct keys kept per kind (counts of the rest go to the total only)
KEEP = 50


@functools.lru_cache(maxsize=4096)
def did_you_mean(key: str, known: tuple[str, ...]) -> str | None:
    """The read key ``key`` most likely meant, or None (kept per key: rows of many key orders share their keys,
    and difflib's comparison was about a fifth of the reader's time on whileai's rows)."""
    if key in OTHER_NAMES and OTHER_NAMES[key] in known:
        return OTHER_NAMES[key]
    close = difflib.get_close_matches(key.lower(), known, n=1, cutoff=0.85)
    return close[0] if close else None


def row_suspects(keys: tuple[str, ...], read: frozenset[str]) -> tuple[str, ...]:
    """The keys of a row (in its key order) that look meant to be read, though no shape read them:
    keys other formats hold a turn under, and near misses of ``read`` (the keys a row is read by)."""
    known = tuple(sorted(read))
    return tuple(key for key in keys if type(key) is str and (
        key in TURN_KEYS or key not in read and key not in WHILEAI_ROW_KEYS and did_you_mean(key, known)))


@dataclass
class Unread:
    """Unread keys: ``"kind:key"`` -> ``[count, source, line, row, path]`` (where it was first seen);
    kind is "message" or "row"."""

    keys: dict[str, list[Any]] = field(default_factory=dict)
    total: int = 0

    def add(self, kind: str, key: str, ctx: RowContext, path: str) -> None:
        self.total += 1
        name = f"{kind}:{key}"
        entry = self.keys.get(name)
        if entry is not None:
            entry[0] += 1
        elif len(self.keys) < KEEP:
            self.keys[name] = [1, ctx.source, ctx.line, ctx.row, path]

    def to_dict(self) -> dict[str, Any]:
        return {"keys": {name: list(entry) for name, entry in self.keys.items()}, "total": self.total}

    def merge(self, report: dict[str, Any], *, lines_before: int = 0, rows_before: int = 0) -> None:
        """Add another part's ``to_dict()`` (later in file order: its first locations come after),
        numbered from ``lines_before`` / ``rows_before`` when it counted from the start of its part."""
        self.total += int(report.get("total", 0))
        for name, (count, source, line, row, path) in (report.get("keys") or {}).items():
            if name in self.keys:
                self.keys[name][0] += count
            elif len(self.keys) < KEEP:
                self.keys[name] = [count, source, line + lines_before if line else line, row + rows_before, path]

    def __bool__(self) -> bool:
        return self.total > 0

    def message(self, where: str, *, kept: bool) -> str:
        """The warning's text for ``where`` (a file or split); ``kept``: message keys kept in ``extra``."""
        said = []
        for name, (count, source, line, row, path) in sorted(self.keys.items(), key=lambda item: -item[1][0]):
            kind, key = name.split(":", 1)
            first = RowContext(source, line, row).at(path)
            known = MESSAGE_KEYS if kind == "message" else ROW_KEYS
            guess = did_you_mean(key, known)
            beside = " (read as the reply beside a text 'prompt' only)" if kind == "row" and guess in REPLY else ""
            if kind == "row" and key in PAIR_SIDE_KEYS:
                said.append(f"row key {key!r} in {count} row(s) (first: {first}): a side of a preference pair; "
                            f"{option_names.preference_hint()}")
                continue
            said.append(f"{kind} key {key!r} in {count} {kind}(s) (first: {first})"
                        + (f": did you mean {guess!r}{beside}?" if guess else ""))
        keep = ("" if option_names.in_command_line() else " (keep_message_keys=True keeps them in each message's "
                "'extra')")
        fate = ("message keys are kept in each message's 'extra' but no chat template renders them" if kept else
                f"message keys are dropped{keep}")
        raw = "" if option_names.in_command_line() else " (the 'raw' config keeps every key)"
        return (f"{where}: {self.total} key(s) were not read: " + "; ".join(said) + f". Unread {fate}; unread row "
                f"keys are left out of training rows{raw}. Rename a misspelt key, "
                "or move the text to a key that is read (docs: Loading, Row shapes).")
