"""Where a trained turn starts and ends: the rule every mask method ends with.

A turn's trained span is what the model writes at inference for that turn:
its own output and the token that ends the turn. Two edges need more than the
turn's generation blocks or its per-turn rendering:

* the start. Whatever the generation prompt writes past its role line (a
  prefilled ``<think>``, an empty think block) is prompt: the model never
  writes it. So where a turn's span starts with (a whole-tag or whole-line
  prefix of) that prefill, the prefill is cut off, on every turn alike, also
  on the history turns the template renders without the prompt. And what the
  template writes after that point is the model's, even where a generation
  block starts later: Nemotron 3 writes ``<think></think>\n`` before a call in
  one branch and ``</think>\n`` inside the block in another, so a turn whose
  own pass holds the role line before its first span starts right after the
  role line and the prefill it repeats, on every branch alike.
* the end. A template with no end-of-turn marker (GLM-4.x) has the model stop
  by writing the next opener (``<|observation|>``, ``<|user|>``), which its
  generation config lists as a stop token. So when a stop token follows a
  turn's span directly, it is trained with the turn. A tokenizer loaded on its
  own often comes without its generation config (``from_pretrained`` of the
  tokenizer does not fetch it): then, for a template that writes no end marker
  after an assistant turn, the openers it writes right after one (found on
  probe conversations) are the stop tokens, where the tokenizer holds each as
  one added token; without that, the model would never learn to stop. A
  template that writes an end marker puts it inside the span already; the
  opener after the marker is no stop token and stays out. The same holds inside a turn: where the
  template writes text the model does not (Gemma 4's tool results, between a
  call and the turn's content), a stop token right before that text
  (``<|tool_response>``) is where the model stopped, and is trained.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from whileai_datasets.chat_template.analysis.probes import role_line
from whileai_datasets.errors import TemplateError

Span = tuple[int, int]


def prompt_prefill(generation_prompt: str) -> str:
    """What the generation prompt writes past its role line (``<think>\\n`` for Nemotron 3; '' for most)."""
    return generation_prompt[len(role_line(generation_prompt)):]


def _prefill_at(text: str, start: int, prefill: str) -> int:
    """How much of ``prefill`` the text at ``start`` repeats, cut at a tag or line end (0: none).

    A span may start inside the prefill (a block opened after ``<think>`` of a ``<think>\n`` prefill):
    the part of the prefill already before ``start`` is skipped. Only whole pieces count (up to a ``>``
    or a line break, or all of it), so text that merely agrees with the prefill for a few characters
    (``<t`` of ``<tool_call>`` against ``<think>``) stays the model's.
    """
    if not prefill:  # most templates: nothing to cut (the loop below finds the same, a row's every turn)
        return 0
    for before in range(min(len(prefill), start), -1, -1):
        if text[start - before:start] != prefill[:before]:
            continue
        rest = prefill[before:]
        if rest and text.startswith(rest, start):
            return len(rest)
        cut = next((n for n in range(len(rest) - 1, 0, -1)
                    if rest[n - 1] in ">\n" and text.startswith(rest[:n], start)), 0)
        if cut:
            return cut
    return 0


def settle_turns(text: str, turns: Iterable[Sequence[Span]], *, prefill: str = "",
                 stop_tokens: Sequence[str] = (), passes: Sequence[Span] | None = None,
                 role: str = "") -> list[Span]:
    """Each turn's spans (sorted, in order of the text) with the prefill cut and a following stop token added.

    ``turns`` holds one list of spans per loss-carrying turn; the result is every span, sorted. ``passes``
    (one per turn: where the turn's own loop pass writes) with ``role`` (the generation prompt's role
    line): a turn's first span starts where the text leaves the role line and the prefill it repeats.
    """
    stops = sorted({s for s in stop_tokens if s}, key=len, reverse=True)
    out: list[Span] = []
    for n, spans in enumerate(turns):
        spans = sorted(s for s in spans if s[1] > s[0])
        if not spans:
            continue
        first_start, first_end = spans[0]
        own = passes[n] if passes is not None and n < len(passes) else None
        opened = _after_role_line(text, own, first_start, role, prefill) if own is not None else None
        if opened is not None:
            first_start = opened
        else:
            first_start = min(first_start + _prefill_at(text, first_start, prefill), first_end)
        spans[0] = (first_start, first_end)
        out.extend(s for s in _with_stops(text, spans, stops) if s[1] > s[0])
    return sorted(out)


def _after_role_line(text: str, own: Span, first: int, role: str, prefill: str) -> int | None:
    """Where the model starts writing in a turn whose pass ``own`` holds ``role`` before ``first`` (the
    turn's first span): past the role line and the whole pieces of the prefill the text repeats there.
    None where the pass holds no role line before the span (the span decides alone)."""
    start, end = own
    if not role.strip() or end <= start or not start <= first <= end:
        return None
    at = text.rfind(role, start, first)
    if at < 0:
        return None
    opened = at + len(role)
    opened += _prefill_at(text, opened, prefill)
    return opened if opened <= first else None


def _with_stops(text: str, spans: list[Span], stops: Sequence[str]) -> list[Span]:
    """Each span with the stop token that follows it directly, where the turn's next span starts after it.

    Not only the last span: where the template writes other text inside a turn (Gemma 4 writes the tool
    results after a call, then the turn's content), the model stopped before that text, on the stop
    token there (``<|tool_response>``), and resumes after it.
    """
    out = []
    for n, (start, end) in enumerate(spans):
        following = spans[n + 1][0] if n + 1 < len(spans) else len(text)
        stop = next((s for s in stops if text.startswith(s, end) and end + len(s) <= following), "")
        out.append((start, end + len(stop)))
    return out


def _ids_to_tokens(tokenizer: Any, ids: Any) -> list[str]:
    if isinstance(ids, int):
        ids = [ids]
    if not isinstance(ids, list) or not all(isinstance(i, int) for i in ids):
        return []
    convert = getattr(tokenizer, "convert_ids_to_tokens", None) or getattr(tokenizer, "id_to_token", None)
    if convert is None:
        return []
    tokens = convert(ids) if hasattr(tokenizer, "convert_ids_to_tokens") else [convert(i) for i in ids]
    return [t for t in tokens if isinstance(t, str)]


def _generation_config(tokenizer: Any) -> Mapping[str, Any] | None:
    """The ``generation_config.json`` beside the tokenizer's files: its own folder, or the local Hub cache
    (never the network)."""
    source = str(getattr(tokenizer, "name_or_path", "") or "")
    if not source:
        return None
    path: Path | None = Path(source) / "generation_config.json"
    if not path.is_file():
        try:
            from huggingface_hub import try_to_load_from_cache

            cached = try_to_load_from_cache(source, "generation_config.json")
        except (ImportError, ValueError):
            cached = None
        path = Path(cached) if isinstance(cached, str) else None
    if path is None:
        return None
    try:
        loaded = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        # its eos ids decide which stop token a turn trains (GLM): a guess would train other tokens
        raise TemplateError(f"the generation config cannot be read: {err}", location=str(path),
                            hint="Fix or remove the file, or pass tokenize(..., stop_tokens=[...]) with the "
                                 "model's stop tokens.") from err
    return loaded if isinstance(loaded, dict) else None


def stop_tokens(tokenizer: Any, render: Render | None = None) -> tuple[str, ...]:
    """The tokens that end generation for ``tokenizer``'s model: its eos token and the eos ids of the
    generation config beside it; where there is no generation config, with ``render`` (the template's
    plain render), the openers a template without end marker writes after a turn (``opener_stops``)."""
    found: list[str] = []
    eos = getattr(tokenizer, "eos_token", None)
    if isinstance(eos, str) and eos:
        found.append(eos)
    config = _generation_config(tokenizer)
    if config is not None:
        found += _ids_to_tokens(tokenizer, config.get("eos_token_id"))
    elif render is not None:
        found += opener_stops(render, added_tokens(tokenizer))
    return tuple(dict.fromkeys(found))


#: a template's plain render of (messages, tools); None where it refuses them
Render = Callable[[list[dict[str, Any]], Any], "str | None"]
_TOOL = {"type": "function", "function": {"name": "probe_lookup", "description": "Look up.", "parameters": {
    "type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}}
_CALL = {"id": "call_probe1", "type": "function", "function": {"name": "probe_lookup", "arguments": {"q": "Qprobe"}}}


def added_tokens(tokenizer: Any) -> tuple[str, ...]:
    """The tokens added to ``tokenizer``'s vocabulary (special tokens and the like), longest first."""
    getter = getattr(tokenizer, "get_added_vocab", None)
    vocab = getter() if callable(getter) else {}
    return tuple(sorted((t for t in vocab if isinstance(t, str) and t.strip()), key=len, reverse=True))


def opener_stops(render: Render, tokens: Sequence[str]) -> tuple[str, ...]:
    """The openers a template writes right after an assistant turn, where it writes no end marker of its
    own after one (GLM-4.x: ``<|user|>`` after a reply, ``<|observation|>`` after a call), each one of
    ``tokens``; () for a template with an end marker.

    Found on probes: the conversation ending with the turn renders with nothing after the turn's text,
    and the same conversation with the next message writes the opener there.
    """
    if not tokens:
        return ()
    user, reply = {"role": "user", "content": "Uprobe ask"}, {"role": "assistant", "content": "Aprobe reply"}
    alone = render([user, reply], None)
    if alone is None or not alone.rstrip().endswith("Aprobe reply"):
        return ()
    found: list[str] = []
    follows = (([user, reply], {"role": "user", "content": "Uprobe again"}, None),
               ([user, {"role": "assistant", "content": "", "tool_calls": [_CALL]}],
                {"role": "tool", "content": "Rprobe result", "tool_call_id": "call_probe1"}, [_TOOL]))
    for turn, following, tools in follows:
        before, after = render(turn, tools), render([*turn, following], tools)
        if before is None or after is None or not after.startswith(before.rstrip()):
            continue
        rest = after[len(before.rstrip()):].lstrip()
        found += [next((t for t in tokens if rest.startswith(t)), "")]
    return tuple(t for t in dict.fromkeys(found) if t)
