"""Rows of a ``.json`` file that holds one JSON array of rows, read element by element.

LLaMA-Factory's demo data and many Hub datasets are written so (``json.dump(rows, f)``). The
file is never read whole: the bytes are decoded a block at a time into a text window, and the
standard library's C scanner (``json.JSONDecoder.raw_decode``) parses one element at a time at
a position in the window, which also says where the element ends (so its line is known for
errors, and the window is cut behind it). An element the window cuts short is parsed again
once more text is in, the block doubling each time, so one long element costs a few parses.

Why not ijson: it would be a new dependency, it yields ``Decimal`` unless told otherwise, and its
errors carry no position that maps to a line. Why not orjson, which the JSONL reader uses: it
parses a whole text only and cannot say where a value ends inside a longer one.

Two other documents are read here too, so that every path that reads arrays (the builder, the
Ray engine, the audit's line numbers) reads them the same: a file of one object written over
several lines is one row (``reading.file_kind.opens_multiline_object``), and an array whose first
element is a message rather than a row is one conversation: its one row holds the elements as
``messages``.

An element that parses but is not a good row (not an object, a bad role, ...) is that row's
error (``on_bad_row="skip"`` skips it); text that is not JSON stops the read, since no element
after it can be found for sure.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Iterator
from typing import IO, Any

from whileai_datasets.errors import ExportFormatError
from whileai_datasets.reading.read_errors import nesting_error, unencodable_error
from whileai_datasets.rows.conversations import CONVERSATION_KEYS
from whileai_datasets.rows.normalize import RowContext

#: Bytes decoded at a time (doubled while one element is longer than the window).
BLOCK_BYTES = 1 << 20
#: A parse error this close to the window's end may be the window's end: read more first.
_NEAR_END = 64
#: A ``\\uD800``-``\\uDFFF`` escape: the one way a lone surrogate gets into parsed text.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_WHITESPACE = " \t\n\r"


class ArrayRowContext(RowContext):
    """A row of a JSON array: ``file line N (array index M)``, N the line its element starts on."""

    __slots__ = ()

    def at(self, path: str = "") -> str:
        where = f"{self.source} line {self.line} (array index {self.row})"
        return f"{where}, {path}" if path else where


class _Window:
    """The decoded text not yet consumed, and the line each position is on."""

    def __init__(self, handle: IO[bytes], source: str) -> None:
        self.handle = handle
        self.source = source
        self.decoder = codecs.getincrementaldecoder("utf-8-sig")()
        self.text = ""
        self.pos = 0
        self.eof = False
        #: the line of ``text[counted]`` (1-based)
        self.line = 1
        self.counted = 0

    def more(self, size: int) -> None:
        """Cut what is consumed and decode ``size`` more bytes onto the window."""
        self.line_at(self.pos)
        self.text, self.counted, self.pos = self.text[self.pos :], 0, 0
        data = self.handle.read(size)
        try:
            self.text += self.decoder.decode(data, final=not data)
        except UnicodeDecodeError as err:
            raise ExportFormatError(
                f"the file is not UTF-8 text ({err.reason} in a block of {len(data)} bytes)",
                location=f"{self.source} line {self.line_at(len(self.text))}",
                hint="JSON files are UTF-8; convert the file (e.g. iconv -t UTF-8) and load it again.",
            ) from err
        self.eof = not data

    def line_at(self, pos: int) -> int:
        """The line ``text[pos]`` is on; ``pos`` must not be before the last position asked."""
        self.line += self.text.count("\n", self.counted, pos)
        self.counted = pos
        return self.line

    def peek(self) -> str:
        """The next character that is not whitespace ("" at the end of the file), consumed up to it."""
        while True:
            text, pos = self.text, self.pos
            while pos < len(text) and text[pos] in _WHITESPACE:
                pos += 1
            self.pos = pos
            if pos < len(text) or self.eof:
                return text[pos] if pos < len(text) else ""
            self.more(BLOCK_BYTES)


def iter_json_array_rows(handle: IO[bytes], source: str) -> Iterator[tuple[RowContext, Any]]:
    """``(context, parsed row)`` per element of the JSON array ``handle`` holds; an element that is
    not a storable row is an ``ExportFormatError`` yielded in its place (as the JSONL reader does)."""
    window = _Window(handle, source)
    decode = json.JSONDecoder().raw_decode
    if window.peek() == "{":  # one object written over several lines: the file's one row
        one = RowContext(source, window.line_at(window.pos), 0)
        value, start, end = _element(window, decode, one)
        window.pos = end
        _check_end(window, "object's closing '}'")
        yield one, _storable(window.text, start, end, value, one)
        return
    if window.peek() != "[":
        raise _syntax_error(window, None, "the file does not start with '['")
    window.pos += 1
    index = 0
    if window.peek() == "]":
        window.pos += 1
        _check_end(window)
        return
    messages: list[Any] | None = None
    while True:
        if not window.peek():
            raise _syntax_error(window, index, "the array is not closed: the file ends inside it")
        ctx = ArrayRowContext(source, window.line_at(window.pos), index)
        value, start, end = _element(window, decode, ctx)
        window.pos = end
        value = _storable(window.text, start, end, value, ctx)
        if index == 0 and is_message(value):  # one conversation's messages, not rows: its one row
            first, messages = ctx, []
        if messages is not None:
            if isinstance(value, ExportFormatError):
                raise value
            messages.append(value)
        else:
            yield ctx, value
        index += 1
        after = window.peek()
        if after == ",":
            window.pos += 1
        elif after == "]":
            window.pos += 1
            _check_end(window)
            if messages is not None:
                yield RowContext(source, first.line, 0), {"messages": messages}
            return
        else:
            got = repr(after) if after else "the end of the file"
            raise _syntax_error(window, index, f"expected ',' or ']' after array index {index - 1}, got {got}")


def _element(window: _Window, decode: Any, ctx: RowContext) -> tuple[Any, int, int]:
    """The element at the window's position: its value and where it starts and ends."""
    size = BLOCK_BYTES
    while True:
        start = window.pos
        try:
            value, end = decode(window.text, start)
        except json.JSONDecodeError as err:
            cut = err.pos >= len(window.text) - _NEAR_END or err.msg.startswith("Unterminated string")
            if window.eof or not cut:
                raise _syntax_error(window, ctx.row, f"not valid JSON ({err.msg.removesuffix(' at')})", err.pos) from err
        except RecursionError as err:
            raise nesting_error(ctx, err) from err
        else:
            if end < len(window.text) or window.eof:  # a number that ends at the window's end may go on
                return value, start, end
        window.more(size)
        size *= 2


def _storable(text: str, start: int, end: int, value: Any, ctx: RowContext) -> Any:
    """``value``, or the error for a lone surrogate in it (Arrow cannot store it as UTF-8)."""
    if _SURROGATE_ESCAPE.search(text, start, end) is None:
        return value
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as err:
        failure = unencodable_error(ctx, err)
        failure.__cause__ = err
        return failure
    return value


def _check_end(window: _Window, closing: str = "array's closing ']'") -> None:
    """Only whitespace may follow the array (or the one object)."""
    rest = window.peek()
    if rest and closing.startswith("object"):
        raise ExportFormatError(
            f"text after the {closing} (it starts {rest!r})",
            location=f"{window.source} line {window.line_at(window.pos)}",
            hint="A .json file holds one JSON value: one row (an object) or an array of rows; write several rows as "
            "a JSON array, or as JSONL (one row per line).",
        )
    if rest:
        raise _syntax_error(window, None, f"text after the {closing} (it starts {rest!r})")


def is_message(value: Any) -> bool:
    """Whether an array's first element is a message (``role``, or a ShareGPT turn's ``from`` and
    ``value``) rather than a row: no row holds its turn's role at its top level."""
    if type(value) is not dict:
        return False
    if "role" in value:
        return not any(key in value for key in CONVERSATION_KEYS)
    return "from" in value and "value" in value and not any(key in value for key in CONVERSATION_KEYS)


def _syntax_error(window: _Window, index: int | None, problem: str, pos: int | None = None) -> ExportFormatError:
    line = window.line_at(window.pos if pos is None else max(pos, window.pos))
    where = f"{window.source} line {line}" + (f" (array index {index})" if index is not None else "")
    return ExportFormatError(
        problem,
        location=where,
        hint="A JSON array cannot be read past text that is not JSON, so no row of the file was kept: fix the "
        "file, or write it as JSONL (one row per line), where a bad line is that row's error alone.",
    )
