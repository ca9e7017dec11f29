"""What a chat template leaves out of (or adds to) the render, found by rendering probes.

``ChatTemplate.inspect()`` already renders probe conversations and says whether a system message, the
tool schemas and reasoning in earlier turns reach the text; this adds probes of its own: a
``reasoning_content`` field (rendered or not), content given as a list of text parts (rendered as its
text, or left out or written as the parts' data), an image part beside text (marked in the render, or
leaving nothing) and a default system prompt the template writes when a
conversation has none (Qwen2.5's "You are Qwen, created by Alibaba Cloud..."), found by rendering a
user turn with and without a system message and comparing what precedes it. The audit then counts
the rows each finding touches.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from whileai_datasets.errors import TemplateError
from whileai_datasets.tokenize.template_input import InputForm, template_messages

_USER, _SYSTEM, _REASONING = "PROBE-USER-7f3a", "PROBE-SYSTEM-7f3a", "PROBE-REASONING-7f3a"
_PART = "PROBE-PART-7f3a"


@dataclass(frozen=True)
class TemplateFacts:
    """What the template does with each kind of content (None: the probes could not tell)."""

    name: str
    mask_method: str | None
    renders_system: bool | None
    renders_tools: bool | None
    renders_reasoning_content: bool | None
    think_in_history: str  # "keeps", "drops" or "unknown"
    default_system_prompt: str | None
    #: content as a list of text parts: rendered as its text (True), or left out or written as the parts'
    #: data, e.g. ``[{'type': 'text', ...}]`` (False)
    renders_content_parts: bool | None = None
    #: text-only content parts are handed to the template as one string (``chat_template.masks.text_parts``):
    #: it concatenates strings and fails on parts
    joins_text_parts: bool = False
    #: tool-call ids are handed to the template rewritten into 9 characters (``chat_template.masks.tool_ids``)
    rewrites_tool_call_ids: bool = False
    #: content holding an image part beside text, as ``tokenize`` hands it (``tokenize.template_input``):
    #: "rendered" (the image is marked in the render), "text_only" (the text is, the image leaves nothing),
    #: "dropped" (neither reaches the render); None when the template fails on it (the rows fail, by cause)
    image_parts: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "mask_method": self.mask_method, "renders_system": self.renders_system,
                "renders_tools": self.renders_tools, "renders_reasoning_content": self.renders_reasoning_content,
                "think_in_history": self.think_in_history, "default_system_prompt": self.default_system_prompt,
                "renders_content_parts": self.renders_content_parts, "joins_text_parts": self.joins_text_parts,
                "rewrites_tool_call_ids": self.rewrites_tool_call_ids, "image_parts": self.image_parts}


def resolve(tokenizer: Any, template: Any) -> Any:
    """The ``ChatTemplate`` the audit renders with: ``template`` (a ``ChatTemplate``, its text, a file or a
    shipped family name), else the tokenizer's own; None when there is neither."""
    from whileai_datasets.chat_template import ChatTemplate

    if template is None:
        if tokenizer is None or getattr(tokenizer, "chat_template", None) is None:
            return None
        return _shared(ChatTemplate.from_tokenizer(tokenizer))
    if isinstance(template, ChatTemplate):
        return template
    text = str(template)
    if "{" not in text and os.path.exists(text):
        return _shared(ChatTemplate.from_file(text))
    if "{" not in text:
        return _shared(ChatTemplate.shipped(text))
    return _shared(ChatTemplate(text))


#: Templates ``resolve`` made, by what they are (``_key``), each with its facts by name: a ``ChatTemplate`` keeps
#: what inspecting it found, so the audits of one process inspect and probe one template once.
_SHARED: dict[tuple[Any, ...], tuple[Any, dict[str | None, TemplateFacts]]] = {}
_SHARED_TEMPLATES = 8


def _key(chat: Any) -> tuple[Any, ...]:
    tokens = tuple(sorted((str(k), repr(v)) for k, v in chat.special_tokens.items()))
    return chat.text, chat.name, tokens, repr(chat.budget)


def _shared(chat: Any) -> Any:
    """The template ``resolve`` made before for the same text, name, special tokens and budget, else ``chat``."""
    key = _key(chat)
    if key not in _SHARED:
        if len(_SHARED) >= _SHARED_TEMPLATES:
            _SHARED.pop(next(iter(_SHARED)))
        _SHARED[key] = (chat, {})
    return _SHARED[key][0]


def template_facts(chat: Any, name: str | None = None) -> TemplateFacts:
    """What ``chat`` renders and drops; ``name`` (default: the template's own) is how the report names it. Found
    once per template ``resolve`` shares (``_shared``)."""
    entry = _SHARED.get(_key(chat))
    known = entry[1] if entry is not None and entry[0] is chat else None
    if known is not None and name in known:
        return known[name]
    facts = _probed_facts(chat, name)
    if known is not None:
        known[name] = facts
    return facts


def _probed_facts(chat: Any, name: str | None) -> TemplateFacts:
    report = chat.inspect()
    joins = report.content_parts == "joined"  # tokenize joins text parts: the text reaches the render
    return TemplateFacts(
        name=name or chat.name, mask_method=report.mask_method, renders_system=report.supports_system,
        renders_tools=report.supports_tools, renders_reasoning_content=_renders_reasoning(chat),
        think_in_history=report.think_in_history, default_system_prompt=default_system_prompt(chat),
        renders_content_parts=True if joins else _renders_text_parts(chat), joins_text_parts=joins,
        rewrites_tool_call_ids=report.tool_call_ids == "nine_characters", image_parts=_image_parts(chat),
    )


def _text(chat: Any, messages: list[dict[str, Any]]) -> str | None:
    try:
        return str(chat.render(messages).text)
    except TemplateError:
        return None


def _renders_reasoning(chat: Any) -> bool | None:
    text = _text(chat, [{"role": "user", "content": _USER},
                        {"role": "assistant", "content": "ok", "reasoning_content": _REASONING}])
    return None if text is None else _REASONING in text


def _renders_text_parts(chat: Any) -> bool | None:
    """Whether a user turn given as ``[{"type": "text", "text": ...}]`` reaches the render as its text: not
    left out, not written as the part's own data (a template that prints ``message.content`` as it is
    writes the list's repr, keys and all), and not failing where the same turn as a string renders."""
    text = _text(chat, [{"role": "user", "content": [{"type": "text", "text": _PART}]},
                        {"role": "assistant", "content": "ok"}])
    if text is None:  # it fails on parts: False if it renders the same turn given as a string
        return None if _text(chat, [{"role": "user", "content": _PART}, {"role": "assistant", "content": "ok"}]) is None \
            else False
    return _as_text(text)


def _as_text(rendered: str) -> bool:
    """Whether the probe part's text is in ``rendered`` as text, not inside a written-out part."""
    if _PART not in rendered:
        return False
    at = rendered.index(_PART)
    near = rendered[max(0, at - 40): at]
    return not ("'text'" in near or '"text"' in near or "'type'" in near or '"type"' in near)


def _image_parts(chat: Any) -> str | None:
    """What reaches the render of a user turn holding a text part and an image part, both handed to the
    template as ``tokenize`` hands them (``template_input``): compared with the same turn without the image."""
    form = InputForm.of(chat.mask_plan())

    def render(content: list[dict[str, Any]]) -> str | None:
        return _text(chat, template_messages([{"role": "user", "content": content},
                                              {"role": "assistant", "content": "ok"}], form))

    text = {"type": "text", "text": _PART}
    with_image = render([text, {"type": "image", "image": "probe.png"}])
    if with_image is None:
        return None
    if not _as_text(with_image):
        return "dropped"
    return "text_only" if with_image == render([text]) else "rendered"


def default_system_prompt(chat: Any) -> str | None:
    """The text a template writes in place of a missing system message, or None when it writes none.

    What precedes the user turn rendered alone is compared with what precedes it after a system
    message: past their common head and tail, the lone render holds the default, the other the probe's
    own system text."""
    alone = _text(chat, [{"role": "user", "content": _USER}])
    framed = _text(chat, [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": _USER}])
    if alone is None or framed is None or _USER not in alone or _SYSTEM not in framed:
        return None
    a, b = alone[: alone.index(_USER)], framed[: framed.index(_USER)]
    head = len(os.path.commonprefix([a, b]))
    tail = len(os.path.commonprefix([a[head:][::-1], b[head:][::-1]]))
    middle, probe = a[head: len(a) - tail], b[head: len(b) - tail]
    return middle.strip() or None if _SYSTEM in probe and middle.strip() else None
