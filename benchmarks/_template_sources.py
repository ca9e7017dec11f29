"""Find chat templates inside unpacked packages: Jinja files, JSON and GGUF metadata, string literals.

Used by ``fetch_template_corpus.py``. A candidate is kept when it mentions
``messages``, has a Jinja tag and parses with jinja2; candidates are deduplicated
by the sha256 of their exact text (the first one found keeps the name, later
ones are listed as ``dup:<first>`` in SOURCES.tsv). Each kept template gets a
tier, so the benchmark reports real model templates apart from test fixtures:

* ``model``: a template a package ships for a model (a ``.jinja`` file, GGUF or
  JSON metadata, a *named* string constant in library code, a model template
  pasted into llama.cpp's ``test-chat-template.cpp``);
* ``pooling``: vLLM's embedding and rerank prompts (``examples/pooling/``);
* ``snippet``: test fixtures, generator fragments and unnamed literals, which
  are mostly pieces a library patches at run time.
"""

from __future__ import annotations

import ast
import io
import json
import struct
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import jinja2

Candidate = tuple[str, str, str]  # (name, text, kind)
_ENV = jinja2.Environment(extensions=["jinja2.ext.loopcontrols", "jinja2.ext.do"])
_GENERATION_TAGS = ("{% generation %}", "{% endgeneration %}", "{%- generation %}", "{%- endgeneration %}",
                    "{%- generation -%}", "{%- endgeneration -%}")


def looks_like_chat_template(text: object) -> bool:
    """Whether ``text`` is Jinja that parses and reads ``messages``."""
    if not isinstance(text, str) or len(text) < 40 or "messages" not in text:
        return False
    if "{%" not in text and "{{" not in text:
        return False
    for tag in _GENERATION_TAGS:  # the stock parser does not know the generation extension
        text = text.replace(tag, "")
    try:
        _ENV.parse(text)
    except jinja2.TemplateError:
        return False
    return True


def safe_name(text: str) -> str:
    """A file-name stem: letters, digits and ``._-`` kept, other runs become one ``_``."""
    out: list[str] = []
    for char in text:
        keep = char.isascii() and (char.isalnum() or char in "._-")
        if keep:
            out.append(char)
        elif not out or out[-1] != "_":
            out.append("_")
    return "".join(out).strip("_")[:90] or "template"


def _from_json(path: Path) -> Iterator[Candidate]:
    try:
        data = json.loads(path.read_text(errors="replace"))
    except ValueError:
        return
    stack: list[tuple[object, list[str]]] = [(data, [])]
    while stack:
        node, keys = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, value in items:
            if key == "chat_template" and isinstance(value, str):
                yield "_".join([path.stem, *keys]), value, "json:chat_template"
            elif key == "chat_template" and isinstance(value, list):  # named variants
                for item in value:
                    if isinstance(item, dict) and isinstance(item.get("template"), str):
                        yield f"{path.stem}_{item.get('name', 'x')}", item["template"], "json:chat_template[]"
            else:
                stack.append((value, keys if isinstance(key, int) else [*keys, str(key)]))


def _from_python(path: Path) -> Iterator[Candidate]:
    try:
        tree = ast.parse(path.read_text(errors="replace"))
    except (SyntaxError, ValueError):
        return
    named: dict[int, str] = {}
    for node in ast.walk(tree):
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else \
            node.target if isinstance(node, ast.AnnAssign) else None
        value = getattr(node, "value", None)
        if isinstance(target, ast.Name) and isinstance(value, ast.Constant) and isinstance(value.value, str):
            named[id(value)] = target.id
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and "messages" in node.value:
            yield f"{path.stem}.{named.get(id(node), f'L{node.lineno}')}", node.value, f"py-string:L{node.lineno}"


def _unescape(body: str) -> str:
    try:
        return str(ast.literal_eval('"' + body.replace("\r", "").replace("\n", "\\n") + '"'))
    except (SyntaxError, ValueError):
        return body


def c_literals(source: str, raw_prefix: str = 'R"') -> Iterator[tuple[int, str]]:
    """(offset, text) of the string literals of C++ (or Rust, ``raw_prefix='r#"'``) source, adjacent ones
    joined as the compiler joins them; comments are skipped."""
    at, joined, joined_at, last_end = 0, None, 0, 0
    while at < len(source):
        char = source[at]
        if source.startswith("//", at):
            at = source.find("\n", at) if source.find("\n", at) >= 0 else len(source)
            continue
        if source.startswith("/*", at):
            end = source.find("*/", at + 2)
            at = len(source) if end < 0 else end + 2
            continue
        start = at
        if char == "'":  # a character literal such as '"' (a Rust lifetime has no closing quote here)
            width = 4 if source[at + 1 : at + 2] == "\\" else 3
            at += width if source[at + width - 1 : at + width] == "'" else 1
            continue
        if source.startswith(raw_prefix[:-1], at) and at + 1 < len(source) and source[at + 1] in '"#':
            text, at = _raw_literal(source, at + 1)
        elif char == '"':
            end = at + 1
            while end < len(source) and source[end] != '"':
                end += 2 if source[end] == "\\" else 1
            text, at = _unescape(source[at + 1 : end]), end + 1
        else:
            at += 1
            continue
        if joined is not None and not source[last_end:start].strip():
            joined += text
        else:
            if joined is not None:
                yield joined_at, joined
            joined, joined_at = text, start
        last_end = at
    if joined is not None:
        yield joined_at, joined


def _raw_literal(source: str, at: int) -> tuple[str, int]:
    """A raw literal starting at its opening quote or hashes: C++ ``R"delim(...)delim"``, Rust ``r#"..."#``."""
    if source[at] == "#" or source.startswith('"', at) and "(" not in source[at : at + 18]:
        hashes = 0
        while source[at + hashes] == "#":
            hashes += 1
        closing = '"' + "#" * hashes
        end = source.find(closing, at + hashes + 1)
        end = len(source) if end < 0 else end
        return source[at + hashes + 1 : end], end + len(closing)
    open_paren = source.find("(", at)
    delimiter = source[at + 1 : open_paren]
    closing = ")" + delimiter + '"'
    end = source.find(closing, open_paren)
    end = len(source) if end < 0 else end
    return source[open_paren + 1 : end], end + len(closing)


def _from_c_like(path: Path, raw_prefix: str, kind: str) -> Iterator[Candidate]:
    source = path.read_text(errors="replace")
    line, counted = 1, 0
    for offset, text in c_literals(source, raw_prefix):
        line, counted = line + source.count("\n", counted, offset), offset  # literals come in order
        yield f"{path.stem}.L{line}", text, f"{kind}:L{line}"


#: GGUF value types (gguf.h): fixed widths; 8 is a string (uint64 length + bytes), 9 an array.
_GGUF_WIDTH = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_GGUF_STRING, _GGUF_ARRAY = 8, 9
#: A metadata string longer than this is not a chat template (and a corrupt length would read the whole file).
_GGUF_MAX_STRING = 1 << 20


def _gguf_skip(handle: BinaryIO, kind: int) -> None:
    """Move past one value of type ``kind`` without reading it (a vocab array is one seek per token)."""
    if kind in _GGUF_WIDTH:
        handle.seek(_GGUF_WIDTH[kind], 1)
    elif kind == _GGUF_STRING:
        handle.seek(struct.unpack("<Q", handle.read(8))[0], 1)
    elif kind == _GGUF_ARRAY:
        inner, count = struct.unpack("<IQ", handle.read(12))
        if inner in _GGUF_WIDTH:
            handle.seek(_GGUF_WIDTH[inner] * count, 1)
        else:
            for _ in range(count):
                _gguf_skip(handle, inner)
    else:
        raise ValueError(f"GGUF value type {kind} is not one gguf.h defines")


def _gguf_string(handle: BinaryIO) -> str:
    (length,) = struct.unpack("<Q", handle.read(8))
    if length > _GGUF_MAX_STRING:
        raise ValueError(f"a GGUF string of {length} bytes (more than {_GGUF_MAX_STRING}): not metadata")
    return handle.read(length).decode("utf-8", "replace")


def gguf_chat_templates(path: Path) -> Iterator[tuple[str, str]]:
    """(key, text) of the ``tokenizer.chat_template*`` strings in a GGUF file's header, read without loading
    anything else: vocab arrays are skipped by seeking, tensors are never reached."""
    with path.open("rb") as raw:
        handle = io.BufferedReader(raw, buffer_size=1 << 16)
        magic, version = struct.unpack("<4sI", handle.read(8))
        if magic != b"GGUF" or version not in (2, 3):
            return  # not a GGUF file, or version 1 (32-bit counts), which no package ships any more
        _tensors, entries = struct.unpack("<QQ", handle.read(16))
        for _ in range(entries):
            key = _gguf_string(handle)
            (kind,) = struct.unpack("<I", handle.read(4))
            if key.startswith("tokenizer.chat_template") and kind == _GGUF_STRING:
                yield key, _gguf_string(handle)
            else:
                _gguf_skip(handle, kind)


def _from_gguf(path: Path) -> Iterator[Candidate]:
    try:
        found = list(gguf_chat_templates(path))
    except (ValueError, struct.error) as err:
        print(f"  skipped {path.name}: not a readable GGUF header ({err})", file=sys.stderr)
        return
    for key, value in found:
        yield f"{path.stem}.{key[len('tokenizer.chat_template'):].strip('.') or 'default'}", value, f"gguf:{key}"


def candidates(path: Path, root: Path) -> Iterator[Candidate]:
    """The template candidates of one file of an unpacked package."""
    suffix = path.suffix.lower()
    if suffix in (".jinja", ".j2", ".jinja2"):
        yield path.stem, path.read_text(errors="replace"), "jinja-file"
    elif suffix == ".json" and path.stat().st_size < 50_000_000:
        yield from _from_json(path)
    elif suffix == ".py":
        yield from _from_python(path)
    elif suffix in (".cpp", ".cc", ".h", ".hpp") and path.name.startswith("test-chat"):
        yield from _from_c_like(path, 'R"', "cpp-string")
    elif suffix == ".rs":
        yield from _from_c_like(path, 'r#"', "rust-string")
    elif suffix == ".gguf":
        yield from _from_gguf(path)


def tier(path_in_package: str, kind: str, name: str) -> str:
    """``model``, ``pooling`` or ``snippet`` (module docstring)."""
    if "examples/pooling/" in path_in_package:
        return "pooling"
    generated = ("template_generator", "jinja_generator", "simple_eval_common", "test-chat-auto-parser")
    if kind.startswith("rust-string") or any(part in path_in_package for part in generated):
        return "snippet"
    if kind.startswith("py-string"):
        in_tests = "/tests/" in "/" + path_in_package or Path(path_in_package).name.startswith("test_")
        unnamed = name.split(".")[1].startswith("L") if "." in name else False
        if in_tests or unnamed:
            return "snippet"
    return "model"
