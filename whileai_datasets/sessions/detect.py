"""Which agent wrote a file, by its content (never its name), and its conversations read into rows.

Every agent module of this room offers the same small interface:

* ``AGENT``: the ``agent`` column's value; ``LAYOUT``: ``"jsonl"`` (one JSON value per line), ``"json"`` (one
  JSON document) or ``"text"``;
* ``sniff(head)``: whether a file is this agent's, from its head (``jsonl``: the first up to 16 parsed values;
  ``json``: the parsed document; ``text``: the first 64 KiB). False for other agents' files and for whileai rows;
* ``read(source, path)``: one dict per conversation (``messages``, ``tools``, ``tools_source``, ``agent``,
  ``session_id``, ``source_file``, ``conversation``, ``session_notes``). ``source`` is ``(line, value)`` pairs
  (``jsonl``), the parsed document (``json``) or the whole text (``text``);
* optionally ``OPTIONS``: the builder's options its ``read`` takes as keywords (pi's ``branches``);
* optionally ``sniff_document``/``read_document`` for an older one-document layout of a ``jsonl`` agent, and
  ``MARKERS`` (keys and ``type`` values typical of its files), which names the closest layout of an unknown log.

Adding an agent is one line in ``READERS``. A file no reader takes that still looks like an event log (objects
with ``type`` / ``event`` / ``timestamp`` keys and no conversation key) is refused with its first line and the
closest known layout, never read as rows; a session whose last line is cut short is refused naming that line.
"""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import IO, Any

import orjson

from whileai_datasets.reading import read_errors
from whileai_datasets.rows.normalize import RowContext
from whileai_datasets.sessions.common import SessionFormatError

#: The agent modules of this room, in the order they are asked (one line each).
READERS = (
    "claude_code",
    "codex",
    "gemini",
    "copilot",
    "hermes",
    "aider",
    "openhands",
    "cline",
    "droid",
    "pi",
)
#: Bytes of a file looked at to decide.
HEAD_BYTES = 64 << 10
#: The largest one-document file parsed whole to sniff it.
DOCUMENT_BYTES = 64 << 20
#: Parsed values of a JSONL head handed to ``sniff``.
HEAD_VALUES = 16
#: Row keys that hold a conversation in the row shapes the generic reader takes.
CONVERSATION_KEYS = frozenset(("messages", "conversations", "prompt", "steps", "chosen", "rejected", "tool_trace",
                               "messages_json", "steps_json", "completion", "response", "final_text", "input"))
#: Keys that make a JSONL object look like an event of a log rather than a row.
EVENT_KEYS = frozenset(("type", "event", "timestamp", "event_type", "payload", "data"))
#: Known layouts' typical keys and type values, for agents whose module names none (``MARKERS``).
_MARKERS: dict[str, frozenset[str]] = {
    "claude_code": frozenset(("type", "message", "sessionId", "uuid", "parentUuid", "isSidechain", "user",
                              "assistant", "summary", "leafUuid")),
    "codex": frozenset(("type", "payload", "timestamp", "session_meta", "response_item", "event_msg",
                        "turn_context", "record_type")),
    "gemini": frozenset(("sessionId", "projectHash", "startTime", "id", "type", "content", "gemini", "$set",
                         "$rewindTo", "toolCalls")),
    "copilot": frozenset(("type", "data", "id", "timestamp", "parentId", "session.start", "user.message",
                          "assistant.message", "tool.execution_complete")),
    "hermes": frozenset(("id", "source", "model", "system_prompt", "messages", "started_at")),
}


def readers() -> list[ModuleType]:
    return [importlib.import_module(f"whileai_datasets.sessions.{name}") for name in READERS]


@dataclass
class Session:
    """A file detected as an agent's session: the module that reads it, and how (``layout``)."""

    reader: ModuleType
    layout: str  # "jsonl", "json" (the document parsed) or "text"
    document: Any = None

    @property
    def agent(self) -> str:
        return str(self.reader.AGENT)


def detect(name: str, handle: IO[bytes]) -> Session | None:
    """The session ``handle`` holds (left at its start), or None for a file of whileai rows. Raises
    ``SessionFormatError`` for an event log no reader takes, and for a ``.md`` file that is no Aider history."""
    seekable = getattr(handle, "seekable", None)
    if not callable(seekable) or not seekable():
        return None  # a compressed stream: sessions are read from plain files
    head = _peek(handle, HEAD_BYTES)
    whole = len(head) < HEAD_BYTES
    text = head.decode("utf-8", "replace").lstrip("\ufeff \t\r\n")
    if not text.startswith(("{", "[")):
        for module in readers():
            if module.LAYOUT == "text" and module.sniff(text):
                return Session(module, "text")
        if name.lower().endswith(".md"):
            raise SessionFormatError("a .md file is read only as an Aider chat history, and this one does not "
                                     "open with '# aider chat started at'", path=name, line=1,
                                     hint="Pass the .aider.chat.history.md that aider wrote, or leave the file out.")
        return None
    values, first_line_parses = _head_values(head, whole)
    if values:
        for module in readers():
            if module.LAYOUT == "jsonl" and module.sniff(values):
                return Session(module, "jsonl")
    # a document is parsed whole only when a reader may take it: an object (an older Gemini CLI session), or an
    # array when a reader of one-document layouts is registered (a large JSON array of rows is not parsed twice)
    wanted = text.startswith("{") or any(module.LAYOUT == "json" for module in readers())
    if wanted and ((not first_line_parses and _small(handle)) or (whole and len(values) == 1)):
        document = _document(handle) if not first_line_parses else values[0]
        if document is None:
            _refuse_cut_document(name, handle)
        for module in readers():
            if module.LAYOUT == "json" and module.sniff(document):
                return Session(module, "json", document)
            if module.LAYOUT == "jsonl" and hasattr(module, "sniff_document") and module.sniff_document(document):
                return Session(module, "json", document)
    if values and _looks_like_events(values):
        raise _unknown_log(name, values)
    return None


#: The columns a conversation read from a session keeps when it is written out as a row (an export of it).
SESSION_COLUMNS = frozenset(("agent", "session_id", "source_file", "conversation"))


def carries_session_columns(handle: IO[bytes]) -> bool:
    """Whether a file of rows holds conversations read from sessions and written out (their ``agent``,
    ``session_id``, ``source_file`` and ``conversation`` keys), so that loading it again keeps those columns.
    The handle is left at its start."""
    seekable = getattr(handle, "seekable", None)
    if not callable(seekable) or not seekable():
        return False
    head = _peek(handle, HEAD_BYTES)
    values, _ = _head_values(head, len(head) < HEAD_BYTES)
    return any(isinstance(value, dict) and SESSION_COLUMNS <= value.keys() for value in values[:1])


def rows(session: Session, handle: IO[bytes], name: str, options: dict[str, Any] | None = None
         ) -> Iterator[tuple[RowContext, dict[str, Any]]]:
    """``(context, conversation)`` for each conversation of the session; refuses a session with none. Of the
    builder's `options`, a reader is handed those its ``OPTIONS`` name (pi's ``branches``)."""
    reader = session.reader
    chosen = {key: value for key, value in (options or {}).items() if key in getattr(reader, "OPTIONS", ())}
    if session.layout == "text":
        conversations = reader.read(handle.read().decode("utf-8", "replace"), name, **chosen)
    elif session.layout == "json":
        document = session.document if session.document is not None else _document(handle)
        read = reader.read if reader.LAYOUT == "json" else reader.read_document
        conversations = read(document, name, **chosen)
    else:
        conversations = reader.read(_lines(handle, name), name, **chosen)
    count = 0
    for count, conversation in enumerate(conversations, 1):
        if not any(m.get("role") == "assistant" for m in conversation["messages"]):
            raise SessionFormatError(f"the {reader.AGENT} reader gave conversation {conversation['conversation']!r} "
                                     "no assistant turn", path=name, hint="Report this file's layout.")
        yield RowContext(name, None, count - 1), conversation
    if not count:
        raise SessionFormatError(f"no complete assistant turn in this {reader.AGENT} session: nothing to train on",
                                 path=name, hint="A session that stopped before the agent's first answer holds no "
                                 "training row; leave the file out.")


def _peek(handle: IO[bytes], size: int) -> bytes:
    """Up to ``size`` bytes from the handle's position, which it is left at. A compressed file cut short ends
    the peek where its readable bytes end (lzma and bz2 raise ``EOFError`` rather than return what they
    decoded): telling the layout needs only its head, and the reader that follows names the cut's line."""
    start = handle.tell()
    parts: list[bytes] = []
    got = 0
    try:
        while got < size:
            part = handle.read(min(1 << 14, size - got))
            if not part:
                break
            parts.append(part)
            got += len(part)
    except EOFError:
        pass  # the head read so far is what the file holds before its cut
    handle.seek(start)
    return b"".join(parts)


def _head_values(head: bytes, whole: bool) -> tuple[list[Any], bool]:
    """The first parsed values of a JSONL head, and whether its first line parses at all."""
    lines = head.split(b"\n")
    if not whole:
        lines.pop()  # cut by the head's end
    values: list[Any] = []
    for number, raw in enumerate(lines):
        if not raw.strip():
            continue
        try:
            values.append(orjson.loads(raw))
        except orjson.JSONDecodeError:
            if not values:
                return [], False
            break
        if len(values) >= HEAD_VALUES:
            break
    return values, True


def _small(handle: IO[bytes]) -> bool:
    """Whether a file is small enough to parse whole just to sniff it (a session document is; a large JSON
    array of rows is read element by element by the generic reader)."""
    start = handle.tell()
    try:
        size = handle.seek(0, os.SEEK_END)
    except (OSError, ValueError):  # a compressed stream cannot seek from its end: read as far as the limit
        size = start + len(handle.read(DOCUMENT_BYTES + 1))
    handle.seek(start)
    return size - start <= DOCUMENT_BYTES


def _document(handle: IO[bytes]) -> Any:
    start = handle.tell()
    data = handle.read()
    handle.seek(start)
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return None  # not JSON: the generic reader refuses it in its own words


def _lines(handle: IO[bytes], name: str) -> Iterator[tuple[int, Any]]:
    """``(line number, value)`` per non-blank line; a line that is not JSON is refused, and a last line cut short
    (no newline, not JSON) is named as such."""
    loads = orjson.loads
    for number, raw in enumerate(handle, 1):
        if raw.isspace() or not raw:  # (no copy of a long line, as strip() makes)
            continue
        try:
            value = loads(raw)
        except orjson.JSONDecodeError as err:
            if not raw.endswith(b"\n"):
                raise SessionFormatError("the last line is cut short (it ends without a newline and is not whole "
                                         "JSON)", path=name, line=number,
                                         hint="The session was still being written, or the copy is incomplete: "
                                         "copy it again once the agent has stopped, or drop the last line.") from err
            raise SessionFormatError(f"not valid JSON ({err})", path=name, line=number,
                                     hint="Each line of a session log holds one JSON value.") from err
        yield number, value


def _refuse_cut_document(name: str, handle: IO[bytes]) -> None:
    """Refuse a JSON array that is not whole JSON where the elements before its cut are a session's events (an
    OpenHands trajectory copied half way) or an event log's, naming the line of the cut; return for any other
    text (the generic reader refuses it in its own words)."""
    start = handle.tell()
    text = handle.read().decode("utf-8", "replace")
    handle.seek(start)
    opening = text.lstrip("\ufeff \t\r\n")
    if not opening.startswith("["):
        return
    decoder, at, elements = json.JSONDecoder(), len(text) - len(opening) + 1, []
    try:
        json.loads(text)
    except json.JSONDecodeError as err:
        cut = err
    except RecursionError:  # nested deeper than JSON is parsed here: the generic reader names the row
        return
    else:
        return
    while len(elements) < HEAD_VALUES:
        while at < len(text) and text[at] in " \t\r\n,":
            at += 1
        try:
            element, at = decoder.raw_decode(text, at)
        except (json.JSONDecodeError, RecursionError):
            break
        elements.append(element)
    agent = next((module.AGENT for module in readers() if module.LAYOUT == "json" and elements
                  and module.sniff(elements)), None)
    if agent is None and not (elements and _looks_like_events(elements)):
        return
    what = f"this {agent} session" if agent else "this event log"
    raise SessionFormatError(f"{what} is cut short: it is not whole JSON from line {cut.lineno} on ({cut.msg})",
                             path=name, line=cut.lineno,
                             hint="The session was still being written, or the copy is incomplete: copy it again "
                                  "once the agent has stopped.")


def _looks_like_events(values: list[Any]) -> bool:
    objects = [v for v in values if isinstance(v, dict)]
    if not objects or any(CONVERSATION_KEYS & v.keys() for v in objects):
        return False
    return sum(1 for v in objects if EVENT_KEYS & v.keys()) * 2 >= len(objects)


def _markers(values: list[Any]) -> set[str]:
    found: set[str] = set()
    for value in values:
        if isinstance(value, dict):
            found.update(value)
            if isinstance(value.get("type"), str):
                found.add(value["type"])
    return found


def _unknown_log(name: str, values: list[Any]) -> SessionFormatError:
    seen = _markers(values)
    scores = []
    for module in readers():
        markers = getattr(module, "MARKERS", None) or _MARKERS.get(module.AGENT, frozenset())
        if markers:
            scores.append((len(seen & markers) / len(markers), module.AGENT, sorted(seen & markers)))
    score, agent, shared = max(scores) if scores else (0.0, "", [])
    closest = (f"the closest known layout is {agent}'s (shares {', '.join(shared)}), but no {agent} record "
               "matched" if score else "it shares no keys with any known agent's layout")
    keys = sorted({key for v in values[:1] if isinstance(v, dict) for key in v})
    return SessionFormatError(
        f"this looks like an event log (keys {', '.join(keys)}) of no agent this package reads: {closest}",
        path=name, line=1,
        hint="Agent sessions are read by content: Claude Code, Codex CLI, Gemini CLI, Copilot CLI, Hermes and "
        "Aider (docs/sessions.md). Convert the log to rows with a 'messages' list, or leave the file out.")


#: The names of the files a session folder's walk looks at (an agent writes nothing else worth reading), plain or
#: compressed.
SESSION_SUFFIXES = (*(f"{kind}{codec}" for kind in (".jsonl", ".json")
                      for codec in ("", ".gz", ".bz2", ".xz", ".zst", ".lz4")), ".md")


def session_files(folder: str) -> tuple[list[str], list[str]]:
    """The session logs under ``folder`` (recursively, sorted), told by content, and the other files of the
    suffixes sessions have that are no session (Gemini CLI's ``logs.json`` of prompts, a README): the caller
    says these aloud. An event log of no known agent is refused (``detect``)."""
    found: list[str] = []
    others: list[str] = []
    for root, dirs, names in os.walk(folder):
        dirs.sort()
        for name in sorted(names):
            if not name.lower().endswith(SESSION_SUFFIXES):
                continue
            path = os.path.join(root, name)
            if not read_errors.codec_installed(read_errors.codec_of(path)):
                raise read_errors.missing_codec_error(path, path)
            with read_errors.decoded_stream(path) as handle:  # (a compressed log through its codec's module)
                try:
                    session = detect(path, handle)
                except SessionFormatError:
                    if name.lower().endswith(".md"):  # a README beside the sessions
                        session = None
                    else:
                        raise
            (found if session is not None else others).append(path)
    return found, others
