"""Position markers: the loop tracker that emits them and the decoder that turns them into spans.

See ``render.py`` for why spans are tracked with markers in the text.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import accumulate, count
from typing import Any

from whileai_datasets.chat_template.sandbox.environment import MARK_CLOSE, MARK_OPEN, TRACKER_NAMES, marker, trusted
from whileai_datasets.errors import TemplateError


@dataclass(frozen=True)
class GenerationBlock:
    """One rendered ``{% generation %}`` block: text[start:end], its message and template line."""

    start: int
    end: int
    message: int | None
    line: int


@dataclass(frozen=True)
class RenderedChat:
    """The rendered text with character spans.

    ``message_spans[i]`` is where message ``i`` was rendered (``(p, p)`` when the
    template rendered nothing for it); ``generation_blocks`` lists each block
    with the index of the message it belongs to. Offsets index ``text``.
    """

    text: str
    message_spans: list[tuple[int, int]]
    generation_blocks: list[GenerationBlock] = field(default_factory=list)

    @property
    def generation_spans(self) -> list[tuple[int, int]]:
        """(start, end) of every generation block, in render order."""
        return [(block.start, block.end) for block in self.generation_blocks]

    def generation_spans_of(self, message: int) -> list[tuple[int, int]]:
        """The generation spans that belong to message ``message``."""
        return [(b.start, b.end) for b in self.generation_blocks if b.message == message]


class LoopTracker:
    """The callbacks an instrumented template calls while it renders."""

    def __init__(self, messages: Sequence[Any]) -> None:
        self._messages = messages
        self._index = {id(message): i for i, message in enumerate(messages)}
        self._stack: list[list[int]] = []
        self._frames = count()

    def callbacks(self) -> dict[str, Callable[..., str]]:
        return dict(zip(TRACKER_NAMES, (self.loop_open, self.iterate, self.loop_close)))

    @trusted
    def loop_open(self, uid: int) -> str:
        self._stack.append([next(self._frames), uid, 0])
        return ""

    @trusted
    def iterate(self, item: Any) -> str:
        index = self._index.get(id(item))
        if not self._stack or index is None or self._messages[index] is not item:
            return ""
        frame = self._stack[-1]
        frame[2] = 1
        return f"{MARK_OPEN}I{frame[0]},{index},{frame[1]}{MARK_CLOSE}"  # marker("I", ...), on every pass

    @trusted
    def loop_close(self) -> str:
        frame = self._stack.pop()
        return marker("L", frame[0]) if frame[2] else ""


Event = tuple[int, str, tuple[int, ...]]


_MARKER = re.compile(f"{MARK_OPEN}([^{MARK_OPEN}{MARK_CLOSE}]*){MARK_CLOSE}")
_DAMAGED_HINT = ("The template edits text that contains a generation block or message loop "
                 "(for example `| trim` on a captured block); render it without spans.")


def decode(raw: str) -> tuple[str, list[Event]]:
    """Strip markers from ``raw``: (clean text, [(offset, kind, payload)])."""
    parts = _MARKER.split(raw)
    texts, bodies = parts[0::2], parts[1::2]
    # every marker character is inside a whole marker (one of each per marker), and no marker is empty
    if raw.count(MARK_OPEN) != len(bodies) or raw.count(MARK_CLOSE) != len(bodies) or not all(bodies):
        raise TemplateError("span markers came out of the template damaged", hint=_DAMAGED_HINT)
    known = _PAYLOADS
    if len(known) > 50_000:
        known.clear()
    events: list[Event] = []
    for position, body in zip(accumulate(map(len, texts)), bodies):
        payload = known.get(body)
        if payload is None:
            payload = known[body] = tuple(map(int, body[1:].split(","))) if len(body) > 1 else ()
        events.append((position, body[0], payload))
    return "".join(texts), events


#: Each marker body met, parsed (rows of one template repeat the same few hundred).
_PAYLOADS: dict[str, tuple[int, ...]] = {}


def loop_event(frames: list[list[int]], kind: str, payload: tuple[int, ...]) -> bool:
    """Apply a loop pass ("I") or loop end ("L") event to ``frames`` ([frame id, message] of the loop
    passes running); False for any other event."""
    if kind == "I":
        if frames and frames[-1][0] == payload[0]:
            frames[-1][1] = payload[1]
        else:
            frames.append([payload[0], payload[1]])
        return True
    if kind == "L":
        while frames and frames.pop()[0] != payload[0]:
            pass
        return True
    return False


def assemble(text: str, events: list[Event], n_messages: int) -> RenderedChat:
    """Per-message and per-block spans from decoded events.

    The text between two events belongs to the message of the innermost loop
    pass running there (its first and last character give the message's span);
    a generation block belongs to that message too, or to the last message seen
    before it when it is outside every message loop. One loop over the events,
    with the state in locals: it runs once per rendered row.
    """
    frames: list[list[int]] = []  # [frame id, message] of the loop passes running
    open_blocks: list[tuple[int, int, int | None]] = []
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    blocks: list[GenerationBlock] = []
    previous, last_owner = 0, None
    for position, kind, payload in events:
        owner = frames[-1][1] if frames else None
        if owner is not None and position > previous:
            if owner not in first:
                first[owner] = previous
            last[owner], last_owner = position, owner
        previous = position
        if loop_event(frames, kind, payload):
            continue
        if kind == "G":
            open_blocks.append((position, payload[0], owner if owner is not None else last_owner))
        elif kind == "g" and open_blocks:
            start, line, block_owner = open_blocks.pop()
            blocks.append(GenerationBlock(start, position, block_owner, line))
    owner = frames[-1][1] if frames else None
    if owner is not None and len(text) > previous:  # the text after the last event
        first.setdefault(owner, previous)
        last[owner] = len(text)
    blocks.sort(key=lambda block: (block.start, block.end))
    return RenderedChat(text, _message_spans(first, last, n_messages, len(text)), blocks)


def _message_spans(first: dict[int, int], last: dict[int, int], n: int, length: int) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    cursor = 0
    for index in range(n):
        if index in first:
            spans.append((first[index], last[index]))
            cursor = last[index]
            continue
        following = next((first[j] for j in range(index + 1, n) if j in first), length)
        starts_gap = index == 0 or (index - 1) in first
        spans.append((cursor, following) if starts_gap else (following, following))
        cursor = max(cursor, following) if starts_gap else cursor
    return spans
