"""pi (``~/.pi/agent/sessions/--<cwd>--/<time>_<id>.jsonl``) and OpenClaw (``~/.openclaw/agents/<agent>/sessions/
<id>.jsonl``, written by the pi agent it embeds) session trees.

The first line is the header ``{"type": "session", "version", "id", "timestamp", "cwd"}``; every later entry has
an ``id`` and a ``parentId`` (version 1 files have neither and run in file order). ``message`` entries hold
``user`` (text and images), ``assistant`` (``text``, ``thinking``, ``toolCall`` blocks), ``toolResult``
(``toolCallId``, text and image content), ``bashExecution`` (a command the user ran, which pi hands the model as
a user turn reading ``Ran `<command>``` and the output in a fenced block; ``excludeFromContext`` ones are left
out) and ``custom`` messages. ``custom_message`` entries reach the model as user turns; ``branch_summary`` and
``compaction`` summaries are context (``weight`` 0). ``custom``, ``label``, ``session_info``, ``model_change`` and
``thinking_level_change`` entries hold no conversation (counted).

Each leaf of the tree is a conversation, the path from the root to it, never interleaved with another branch:
``branches="all"`` (the default) yields every leaf's path (``conversation`` ``"branch:<leaf id>"``, or
``"main"`` when the tree has one leaf), but for a branch that, cut to its last complete turn, holds nothing
another branch does not (counted); ``branches="current"`` only the path to the last entry written, where pi
resumes. A ``compaction`` on a path makes the model see its summary, then the entries from
``firstKeptEntryId`` on: that is the row, and what the model saw just before the compaction is a row of its own
(``"pre-compaction:<n>"``, n counting compactions in file order). OpenClaw files are told by their header's
``cwd``, a folder under ``.openclaw`` (its agents' workspace); the row's ``agent`` says which. Neither agent
records tool schemas in the session: they are inferred from the calls (a table of pi's built-in tools would be
wrong for some of its releases: ``edit`` took ``oldText``/``newText``, later a list of ``edits``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any, Literal

from whileai_datasets._options import check_choice
from whileai_datasets.sessions.common import SessionFormatError, complete_turns, file_stem
from whileai_datasets.sessions.assembly import (
    CallBook,
    assistant_blocks,
    content_of,
    complete_row,
    image_of,
    message,
)

#: Which branches of a tree become rows.
Branches = Literal["all", "current"]

AGENT = "pi"
LAYOUT = "jsonl"
#: The builder's options ``read`` takes (``load_dataset(..., branches="current")``).
OPTIONS = ("branches",)
#: Keys and ``type`` values typical of pi and OpenClaw sessions (to name the closest layout of an unknown log).
MARKERS = frozenset(("type", "session", "message", "id", "parentId", "cwd", "version", "model_change",
                     "thinking_level_change", "compaction", "branch_summary", "custom", "custom_message", "label",
                     "session_info", "firstKeptEntryId"))
#: Entry types that reach the model through their own conversion below.
_CONTEXT_ENTRIES = frozenset({"message", "custom_message", "branch_summary", "compaction"})


def sniff(head: list[Any]) -> bool:
    """The first record is pi's session header: ``type`` ``"session"`` with a string ``id`` and ``cwd``."""
    first = head[0] if head else None
    return (isinstance(first, dict) and first.get("type") == "session" and isinstance(first.get("id"), str)
            and isinstance(first.get("cwd"), str))


def agent_of(header: dict[str, Any]) -> str:
    """``"openclaw"`` when the session ran in a folder under ``.openclaw``, else ``"pi"``."""
    return "openclaw" if ".openclaw" in str(header.get("cwd")).replace("\\", "/").split("/") else AGENT


class _Tree:
    """The file's entries by id, in file order, with each one's line and parent."""

    def __init__(self, source: Iterator[tuple[int, Any]], path: str) -> None:
        self.path = path
        self.entries: dict[str, dict[str, Any]] = {}
        self.lines: dict[str, int] = {}
        self.parents: dict[str, str | None] = {}
        self.order: list[str] = []
        self.header: dict[str, Any] = {}
        previous: str | None = None
        for line, record in source:
            if not isinstance(record, dict) or not isinstance(record.get("type"), str):
                raise SessionFormatError(f"a record without a string 'type' ({type(record).__name__})",
                                         path=path, line=line, hint="pi writes one typed JSON object per line; "
                                                                    "the line is damaged: fix or remove it")
            if record["type"] == "session" and not self.header:
                self.header = record
                continue
            key, parent = self._link(record, line, previous)
            self.entries[key], self.lines[key], self.parents[key] = record, line, parent
            self.order.append(key)
            previous = key

    def _link(self, record: dict[str, Any], line: int, previous: str | None) -> tuple[str, str | None]:
        if "id" not in record and "parentId" not in record:  # version 1: a chain in file order
            return f"line {line}", previous
        key, parent = record.get("id"), record.get("parentId")
        if not isinstance(key, str) or key in self.entries or (parent is not None and parent not in self.entries):
            raise SessionFormatError(f"entry id {key!r} with parentId {parent!r}: the id must be a new string and "
                                     "the parent an entry written before it", path=self.path, line=line,
                                     hint="The tree is damaged (a line lost or edited): fix or remove the entry")
        return key, parent

    def leaves(self) -> list[str]:
        parents = set(self.parents.values())
        return [key for key in self.order if key not in parents]

    def path_to(self, leaf: str) -> list[str]:
        keys: list[str] = []
        key: str | None = leaf
        while key is not None:
            keys.append(key)
            key = self.parents[key]
        return keys[::-1]


def read(source: Iterator[tuple[int, Any]], path: str, *,
         branches: Branches = "all") -> Iterator[dict[str, Any]]:
    """One row per branch of the tree (or the current one), and one per compaction before it."""
    check_choice(branches, "branches", Branches)
    tree = _Tree(source, path)
    agent = agent_of(tree.header)
    session_id = str(tree.header.get("id") or file_stem(path))
    leaves = tree.leaves() if branches == "all" else tree.order[-1:]
    compactions = {key: number for number, key in
                   enumerate((key for key in tree.order if tree.entries[key]["type"] == "compaction"), 1)}
    rows: list[dict[str, Any]] = []
    skipped: Counter[str] = Counter()
    done: set[str] = set()
    for leaf in leaves:
        keys = tree.path_to(leaf)
        for at, key in enumerate(keys):
            if key in compactions and key not in done:
                done.add(key)
                rows += _row(tree, keys[:at], f"pre-compaction:{compactions[key]}", agent, session_id,
                             skipped)
        rows += _row(tree, keys, "main" if len(leaves) == 1 else f"branch:{leaf}", agent, session_id, skipped)
    rows = _within_none(rows, skipped)
    if not rows:
        raise SessionFormatError("the session holds no complete assistant turn on any branch: nothing to train "
                                 "on", path=path, hint="Leave this file out of data_files")
    rows[0]["session_notes"] = dict(sorted((Counter(rows[0]["session_notes"]) + skipped).items()))
    yield from rows


def _within_none(rows: list[dict[str, Any]], skipped: Counter[str]) -> list[dict[str, Any]]:
    """The rows but those whose messages open another row (a branch abandoned before its first answer, cut back
    to the turns it shares with another branch, trains nothing new): counted as ``branches_within_another``."""
    kept = []
    for index, row in enumerate(rows):
        mine = row["messages"]
        if any(other["messages"][:len(mine)] == mine and (len(other["messages"]) > len(mine) or later < index)
               for later, other in enumerate(rows) if later != index):
            skipped["branches_within_another"] += 1
        else:
            kept.append(row)
    return kept


def _row(tree: _Tree, keys: list[str], name: str, agent: str, session_id: str,
         skipped: Counter[str]) -> list[dict[str, Any]]:
    notes: Counter[str] = Counter()
    messages = _context(tree, keys, notes)
    if not complete_turns(messages, Counter()):
        skipped["parts_without_an_assistant_turn"] += 1
        return []
    return [complete_row(messages, notes, agent=agent, session_id=session_id, path=tree.path,
                             conversation=name)]


def _context(tree: _Tree, keys: list[str], notes: Counter[str]) -> list[dict[str, Any]]:
    """What the model saw along `keys`: after the last compaction on it, its summary and the entries from
    ``firstKeptEntryId`` on."""
    messages: list[dict[str, Any]] = []
    last = max((at for at, key in enumerate(keys) if tree.entries[key]["type"] == "compaction"), default=None)
    if last is not None:
        compaction = tree.entries[keys[last]]
        kept = compaction.get("firstKeptEntryId")
        start = keys.index(kept) if kept in keys[:last] else last
        messages.append(message("user", str(compaction.get("summary", "")), weight=0))
        notes["compaction_summaries"] += 1
        keys = keys[start:last] + keys[last + 1:]
    book = CallBook(tree.path)
    for key in keys:
        messages += _entry(tree.entries[key], tree.lines[key], notes, book)
    return messages


def _entry(entry: dict[str, Any], line: int, notes: Counter[str], book: CallBook) -> list[dict[str, Any]]:
    kind = entry["type"]
    if kind == "message":
        return _message(entry.get("message"), line, notes, book)
    if kind == "custom_message":
        return [message("user", _content(entry.get("content"), book.path, line))]
    if kind == "branch_summary":
        notes["branch_summaries"] += 1
        return [message("user", str(entry.get("summary", "")), weight=0)]
    if kind not in _CONTEXT_ENTRIES:
        notes[f"{kind}_entries"] += 1
    return []


def _message(payload: Any, line: int, notes: Counter[str], book: CallBook) -> list[dict[str, Any]]:
    role = payload.get("role") if isinstance(payload, dict) else None
    if role in ("user", "custom", "hookMessage"):
        return [message("user", _content(payload.get("content"), book.path, line))]
    if role == "assistant":
        assistant = _assistant(payload.get("content"), line, notes, book)
        return [assistant] if assistant else []
    if role == "toolResult":
        call_id = payload.get("toolCallId")
        name = book.name_of(call_id, line)
        return [message("tool", _content(payload.get("content"), book.path, line), tool_call_id=call_id,
                        name=name)]
    if role == "bashExecution":
        if payload.get("excludeFromContext"):
            notes["user_bash_executions_out_of_context"] += 1
            return []
        return [message("user", f"Ran `{payload.get('command', '')}`\n```\n{payload.get('output', '')}\n```")]
    if role in ("branchSummary", "compactionSummary"):
        notes["compaction_summaries" if role == "compactionSummary" else "branch_summaries"] += 1
        return [message("user", str(payload.get("summary", "")), weight=0)]
    raise SessionFormatError(f"a message entry with role {role!r}, expected one of 'user', 'assistant', "
                             "'toolResult', 'bashExecution', 'custom'", path=book.path, line=line,
                             hint="The entry is damaged or from a newer pi: fix or remove it")


def _assistant(content: Any, line: int, notes: Counter[str], book: CallBook) -> dict[str, Any] | None:
    blocks = content if isinstance(content, list) else [{"type": "text", "text": str(content or "")}]
    return assistant_blocks(blocks, notes, book, line, call_type="toolCall", arguments_key="arguments")


def _content(value: Any, path: str, line: int) -> str | list[dict[str, Any]]:
    """A user, custom or tool-result content: a string, or text and image blocks as parts."""
    if isinstance(value, str):
        return value
    parts = []
    for block in value if isinstance(value, list) else ():
        if isinstance(block, dict) and block.get("type") == "text":
            parts.append({"type": "text", "text": str(block.get("text", ""))})
        elif isinstance(block, dict) and block.get("type") == "image":
            parts.append(image_of(str(block.get("mimeType")), str(block.get("data"))))
        else:
            raise SessionFormatError(f"a content block {block!r:.80}: expected text or image blocks", path=path,
                                     line=line, hint="The entry is damaged or from a newer pi: fix or remove it")
    return content_of(parts)
