"""One renderer input: a canonical row as a given template is handed it, whatever path renders it.

The audit, ``show-mask``, ``tokenize`` (after ``load_dataset``), the export's and the Hub's figures and the
Ray engine all render rows through ``Tokenize``, and each of them reaches the template through
``template_messages`` here, so no path counts a form of the row that another path does not train. A row
reaches this function in more than one form: decoded from the canonical storage (its parts as the file wrote
them: ``{"type": "text", "value": ...}`` in LLaMA-Factory's layout, ``{"type": "image", "image": ...}``) or
after the export's wire shape (``{"type": "image_url", "image_url": {"url": ...}}``). Both come out the same:

* keys whose value is null are dropped (a typed struct fills absent keys with null; templates test
  ``'tool_calls' in message``);
* content parts take the form templates read: a part of a text type (``text``, ``input_text``,
  ``output_text``) whose text sits under ``text``, ``value`` or ``content`` becomes ``{"type": "text",
  "text": ...}``; an image, video or audio part becomes ``{"type": "image" | "video" | "audio", <kind>: ref}``
  (what Gemma 3, Llama 4, Qwen2-VL and the processors' templates test for), the reference taken from
  wherever the part held it (``image_url.url``, ``source.data``); the part's other keys are kept, and any
  other part is left as it is;
* tool-call arguments are dicts, or JSON text for a template that concatenates them
  (``MaskPlan.arguments``);
* tool-call ids are rewritten into 9 characters for a template that requires them (``MaskPlan.tool_call_ids``,
  ``chat_template.masks.tool_ids``);
* text-only parts are joined into one string for a template that concatenates strings or writes nothing
  for a list (``MaskPlan.content_parts``, ``chat_template.masks.text_parts``).

The adaptations are named in the audit (``text_parts_joined``, ``tool_call_ids_rewritten``) and in
``ChatTemplate.inspect()``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from whileai_datasets.chat_template.masks.masking import encode_arguments_in_place
from whileai_datasets.chat_template.masks.text_parts import joined, text_only
from whileai_datasets.chat_template.masks.tool_ids import rewrite_ids
from whileai_datasets.columnar._parts import IMAGE_TYPES, VIDEO_TYPES
from whileai_datasets.rows.parts import TEXT_KEYS, TEXT_TYPES, part_text

__all__ = ["InputForm", "template_messages", "template_messages_in_place"]

#: Media part types by the kind a template tests for (``{"type": "image"}``).
AUDIO_TYPES = ("audio", "audio_url", "input_audio")
_MEDIA_KIND = {**dict.fromkeys(IMAGE_TYPES, "image"), **dict.fromkeys(VIDEO_TYPES, "video"),
               **dict.fromkeys(AUDIO_TYPES, "audio")}
#: Keys (and keys of an object under them) that may hold a media part's reference, in order.
_MEDIA_REFERENCE = ("image", "image_url", "video", "video_url", "audio", "input_audio", "source", "url", "path",
                    "data", "file_data", "base64")


@dataclass(frozen=True)
class InputForm:
    """What a template reads (``ChatTemplate.mask_plan()`` finds each by rendering probes): tool-call
    arguments as dicts or JSON text, ids as given or in 9 characters, text parts as given or joined."""

    arguments: str = "dict"
    tool_call_ids: str = "as_given"
    content_parts: str = "as_given"

    @classmethod
    def of(cls, plan: Any) -> InputForm:
        """The form of a ``MaskPlan`` (or of anything with the same three attributes)."""
        return cls(plan.arguments, plan.tool_call_ids, plan.content_parts)


def template_messages(messages: Sequence[Mapping[str, Any]], form: InputForm | Any = "dict") -> list[dict[str, Any]]:
    """Canonical messages as the template is handed them (see the module docstring); ``messages`` are not
    changed. ``form``: an ``InputForm``, a ``MaskPlan``, or (the older call) the arguments' encoding alone
    (``"dict"`` or ``"text"``)."""
    out = [dict(message) for message in messages]
    template_messages_in_place(out, form)
    return out


def template_messages_in_place(messages: list[dict[str, Any]], form: InputForm | Any = "dict") -> None:
    """``template_messages`` on message dicts the caller owns and gives up (rows just decoded from Arrow)."""
    shape = form if type(form) is InputForm else _form(form)
    encode_arguments_in_place(messages, shape.arguments)  # type: ignore[arg-type]
    nine = shape.tool_call_ids == "nine_characters"
    join = shape.content_parts == "joined"
    for index, message in enumerate(messages):
        if None in message.values():
            for key in [key for key, value in message.items() if value is None]:
                del message[key]
        content = message.get("content")
        if type(content) is list:
            content = message["content"] = [_part(part) for part in content]
            if join and text_only(content):
                message["content"] = joined(content)
        if nine and (message.get("tool_calls") or message.get("tool_call_id") is not None):
            messages[index] = rewrite_ids([message], "nine_characters")[0]


def _form(form: Any) -> InputForm:
    if isinstance(form, InputForm):
        return form
    if isinstance(form, str):
        return InputForm(arguments=form)
    return InputForm.of(form)


def _part(part: Any) -> Any:
    """One content part in the form templates read (see the module docstring); the part's other keys
    (``cache_control``, a processor's ``min_pixels``) are kept."""
    if type(part) is not dict:
        return part
    kind = part.get("type")
    if kind in TEXT_TYPES or (kind is None and any(isinstance(part.get(k), str) for k in TEXT_KEYS)):
        text = part_text(part)
        if text is None or (kind == "text" and part.get("text") is text):
            return part
        return {"type": "text", "text": text, **{k: v for k, v in part.items() if k not in TEXT_KEYS and k != "type"}}
    media = _MEDIA_KIND.get(kind)  # type: ignore[arg-type]
    if media is None:
        return part
    key, reference = _reference(part)
    if kind == media and key == media and part[key] is reference:
        return part
    rest = {k: v for k, v in part.items() if k not in ("type", key)}
    return {"type": media, **({media: reference} if reference is not None else {}), **rest}


def _reference(part: Mapping[str, Any]) -> tuple[str | None, Any]:
    """A media part's reference (a URL, a path, data) and the key it sits under, wherever it is (directly,
    or in an object under that key); (None, None) when it has none."""
    for key in _MEDIA_REFERENCE:
        value = part.get(key)
        if isinstance(value, str):
            return key, value
        if isinstance(value, Mapping):
            inner = next((value[k] for k in ("url", "path", "data") if isinstance(value.get(k), str)), None)
            if inner is not None:
                return key, inner
    return None, None
