"""Text-only content parts as one string, for a template that concatenates strings: a lossless rewrite.

A row may give a message's content as a list of parts (``[{"type": "text", "text": "..."}]``, the OpenAI
form). Templates that accept parts write each text part's text one after another (Llama 3.1, Gemma 3,
Qwen2-VL: no separator); templates written for strings build the turn with ``+`` (Qwen2.5's
``'<|im_start|>' + message['role'] + '\\n' + message['content']``, Mistral's) and fail with jinja2's
"can only concatenate str (not "list") to str". For those, content whose parts are all text is handed to
the template as the parts' texts joined with nothing between them: the same characters a parts-reading
template writes, so the tokens that train are the row's own text. Content holding any other part (an
image) is left as it is, and the template's refusal stays the row's finding.

Whether a template needs this is found from its behaviour, never its name (``parts_form``): a probe
conversation whose contents are text parts fails to render, or renders without their text (Qwen3 writes
nothing for a list, others write the list's own data), and the same conversation with string contents
renders the text.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

PartsForm = Literal["as_given", "joined"]


def text_only(content: Any) -> bool:
    """Whether ``content`` is a non-empty list of text parts (each ``{"type": "text", "text": <str>}``)."""
    return isinstance(content, list) and bool(content) and all(
        isinstance(part, Mapping) and part.get("type") == "text" and isinstance(part.get("text"), str)
        for part in content)


def joined(content: list[Mapping[str, Any]]) -> str:
    """The texts of text-only parts, one after another."""
    return "".join(part["text"] for part in content)


def join_text_parts(messages: Sequence[Mapping[str, Any]], form: PartsForm) -> list[dict[str, Any]]:
    """``messages`` with every text-only parts content as one string under ``form="joined"`` (the messages
    that change are copied; the others are the same objects)."""
    out = [m if isinstance(m, dict) else dict(m) for m in messages]
    if form == "as_given":
        return out
    for index, message in enumerate(out):
        if text_only(message.get("content")):
            out[index] = {**message, "content": joined(message["content"])}
    return out


def has_text_parts(messages: Sequence[Mapping[str, Any]]) -> bool:
    """Whether any message's content is text-only parts (what ``join_text_parts`` rewrites)."""
    return any(text_only(message.get("content")) for message in messages)


def parts_form(render: Callable[[list[dict[str, Any]]], str | None],
               messages: list[dict[str, Any]]) -> PartsForm:
    """``"joined"`` when ``render`` does not bring ``messages``' parts (contents as text parts) to the render
    as their text (it fails on them, writes nothing for a list, or writes the list's own data) and brings
    them there with the parts joined into strings; ``"as_given"`` otherwise. ``render`` returns None where it
    fails."""
    texts = [joined(m["content"]) for m in messages if text_only(m.get("content"))]
    given = render(messages)
    if given is not None and _reads(given, texts):
        return "as_given"
    strings = render(join_text_parts(messages, "joined"))
    return "joined" if strings is not None and _reads(strings, texts) else "as_given"


def _reads(rendered: str, texts: list[str]) -> bool:
    """Whether ``rendered`` holds each text as text: not missing, not inside a written-out part."""
    return all(text in rendered and f"'text': '{text}'" not in rendered and f'"text": "{text}"' not in rendered
               for text in texts)
