"""The privileged-leak check of one raw row, and a report that adds rows up.

``privileged`` (what only the grader saw) is never a column of training rows,
so the facts the export's leak gate needs are taken from each raw row while
the builder reads it (``LeakScan.check``), and carried beside the dataset: the
source is never read a second time. The semantics are whileai's
``leak_report`` (``whileai.simulations.score.privileged``); the gate tests hold
them equal.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from whileai_datasets.rows.content import spoken_texts
from whileai_datasets.rows.normalize import conversation

LEAK_MIN_QUOTE_CHARS = 12
#: ``privileged`` keys whose text must not be quoted, in whileai's order
LEAK_KEYS = ("reference", "principle", "hidden_state")
#: entries a report lists (``n_leaked`` counts every one)
KEEP_LEAKED = 20


def norm(text: Any) -> str:
    """Whitespace runs collapsed to one space, stripped, lowercased.

    ``str.split()`` splits on exactly the characters ``re``'s ``\\s`` matches
    in a str pattern (``str.isspace``), so this equals whileai's
    ``re.sub(r"\\s+", " ", text).strip().lower()`` at a third of the cost."""
    return " ".join(str(text or "").split()).lower()


def needles(privileged: Any, min_len: int) -> list[tuple[str, str]]:
    """``(field path, normalized text)`` of every string in the block at
    least ``min_len`` characters long, depth first in key order."""
    if not isinstance(privileged, dict):
        return []
    found: list[tuple[str, str]] = []
    get = privileged.get
    for key in LEAK_KEYS:
        value = get(key)
        if not value:
            continue
        if type(value) is str:  # the common shapes (a text, an object of texts) without a call
            text = " ".join(value.split()).lower()
            if len(text) >= min_len:
                found.append((key, text))
        elif type(value) is dict:
            for sub, item in value.items():
                if type(item) is str:
                    text = " ".join(item.split()).lower()
                    if len(text) >= min_len:
                        found.append((f"{key}.{sub}", text))
                else:
                    _walk(f"{key}.{sub}", item, min_len, found)
        else:
            _walk(key, value, min_len, found)
    return found


def _walk(path: str, value: Any, min_len: int, found: list[tuple[str, str]]) -> None:
    if isinstance(value, str):
        text = " ".join(value.split()).lower()
        if len(text) >= min_len:
            found.append((path, text))
    elif isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, str):  # the common leaf, without a call
                text = " ".join(item.split()).lower()
                if len(text) >= min_len:
                    found.append((f"{path}.{key}", text))
            else:
                _walk(f"{path}.{key}", item, min_len, found)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _walk(path, item, min_len, found)


def assistant_text(row: dict[str, Any], turns: Sequence[dict[str, Any]] | None = None) -> str:
    """The final reply and every assistant turn, lowercased. ``turns`` is the
    conversation already rebuilt from this very row's steps, when the caller
    has it (the builder does)."""
    messages = row.get("messages")
    if isinstance(messages, list) and messages:
        turns = [m for m in messages if isinstance(m, dict)]
    elif turns is None:
        turns = conversation(row)
    # a role compares equal to "assistant" exactly when whileai's str(role or "") does (JSON values)
    parts = [str(row.get("final_text") or "")]
    for message in turns:
        if message.get("role") == "assistant":
            parts.extend(spoken_texts(message))  # text, text parts and reasoning
    return "\n".join(p for p in parts if p).lower()


def row_leak(
    row: dict[str, Any],
    min_len: int = LEAK_MIN_QUOTE_CHARS,
    turns: Sequence[dict[str, Any]] | None = None,
    said: Sequence[str] | None = None,
) -> dict[str, str] | None:
    """``None``: nothing to check; ``{}``: checked, no leak; else the first quoted field.

    ``said``, when the caller has it (the builder does), is the text of each
    assistant turn of this very row's conversation, every one plain text: what
    ``assistant_text`` would collect from them, without walking the turns again."""
    found = needles(row.get("privileged"), min_len)
    if not found:
        return None
    if said is None:
        hay = norm(assistant_text(row, turns))
    else:
        # whileai lowercases the joined texts before normalizing them; lowercasing
        # once after gives the same text (test_leaks proves it over every code point)
        hay = " ".join("\n".join((str(row.get("final_text") or ""), *said)).split()).lower()
    for path, needle in found:
        if needle in hay:
            return {"field": path, "needle": needle[:80]}
    return {}


class LeakScan:
    """whileai's ``leak_report``, fed one raw row at a time; parts of a file
    scanned apart (shards, worker processes) add up with ``merge`` in file order."""

    def __init__(self, min_len: int = LEAK_MIN_QUOTE_CHARS) -> None:
        self.min_len = min_len
        self.n_rows = 0
        self.n_checked = 0
        self.n_leaked = 0
        self.exported = False
        #: the first ``KEEP_LEAKED`` entries, in row order
        self.leaked: list[dict[str, Any]] = []

    def add(self, row: Any) -> None:
        if not isinstance(row, dict):
            return
        self.n_rows += 1
        self.check(row)

    def check(
        self, row: dict[str, Any], turns: Sequence[dict[str, Any]] | None = None, said: Sequence[str] | None = None
    ) -> None:
        """Check a row already counted in ``n_rows`` (``turns`` and ``said`` as for ``row_leak``)."""
        found = row_leak(row, self.min_len, turns, said) if "privileged" in row else None
        if found is None:
            self.exported = self.exported or "scenario_id" in row
            return
        self.n_checked += 1
        if found:
            self.n_leaked += 1
            if len(self.leaked) < KEEP_LEAKED:
                self.leaked.append(
                    {"scenario_id": row.get("scenario_id"), "rollout_index": row.get("rollout_index"), **found}
                )

    def state(self) -> dict[str, Any]:
        """What ``merge`` takes (JSON-ready)."""
        return {
            "n_rows": self.n_rows,
            "n_checked": self.n_checked,
            "n_leaked": self.n_leaked,
            "exported": self.exported,
            "leaked": list(self.leaked),
        }

    def merge(self, state: dict[str, Any]) -> None:
        """Add the ``state()`` of rows that come after every row counted so far."""
        self.n_rows += int(state["n_rows"])
        self.n_checked += int(state["n_checked"])
        self.n_leaked += int(state["n_leaked"])
        self.exported = self.exported or bool(state["exported"])
        self.leaked.extend(state["leaked"][: KEEP_LEAKED - len(self.leaked)])

    def report(self) -> dict[str, Any]:
        n_leaked = self.n_leaked
        rate = n_leaked / self.n_checked if self.n_checked else 0.0
        if not self.n_checked:
            summary = (
                f"checked 0 of {self.n_rows} rows: none carried privileged context, so this says nothing about leaks"
            )
            if self.exported:
                summary += (
                    ". These came through the export (rows(), save(), push()), which scrubs "
                    "privileged at any depth -- pass data.trajectories, which keeps it"
                )
        elif not n_leaked:
            summary = f"checked {self.n_checked} of {self.n_rows} rows: no reply quoted its privileged context"
        else:
            summary = (
                f"checked {self.n_checked} of {self.n_rows} rows: {n_leaked} quoted privileged context ({rate:.0%})"
            )
        return {
            "n_rows": self.n_rows,
            "n_checked": self.n_checked,
            "n_leaked": n_leaked,
            "rate": round(rate, 4),
            "checked": self.n_checked > 0,
            "leaked": self.leaked[:KEEP_LEAKED],
            "summary": summary,
        }
