"""Guard and classifier templates: the whole conversation put into one prompt with a verdict asked after it.

A safety classifier (Llama-Guard-, ShieldGemma-, Granite-Guardian-style) or a
judge renders every message of the conversation as text inside a single prompt,
with instructions or policy text around it, and closes it with a fixed question
("is the last turn safe? answer yes or no") before the model's answer. Its
assistant messages are the *judged* text, not what the model generates, so
there is nothing to train a chat model on and no generation block to add: a
patch that wrapped them would supervise input text.

Told apart by rendering, not by names. A chat template renders a
conversation's start as a prefix of the whole (the user turn, then the reply
after it). A classifier writes the same closing instruction after the last
message, whichever it is, so ``[user]`` is not a prefix of ``[user, assistant]``
and both end with one closing text of words. That closing text is compared
with the messages' contents taken out (a verdict question may quote the judged
message) and word by word (it may name the judged role: "is the last *user*
message harmful" against "... *assistant* message ..."). Markers such as
``<|im_end|>`` are not words, so an end-of-turn marker is never a verdict
question; and a closing text that is the assistant's own header (a chat template
that opens the next assistant turn after every conversation, with or without
``add_generation_prompt``) is not one either: the same words stand right before
the reply. A template that refuses a conversation ending with the user's
message (a response judge) is compared on one and two exchanges instead.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from difflib import SequenceMatcher
from typing import TYPE_CHECKING, Any

from whileai_datasets.chat_template.analysis.probes import PINNED_NOW, common_prefix
from whileai_datasets.chat_template.analysis.unpatchable import Unpatchable
from whileai_datasets.chat_template.rendering.render import render_plain
from whileai_datasets.errors import TemplateError

if TYPE_CHECKING:
    from whileai_datasets.chat_template.analysis.analysis import Analysis

_USER = {"role": "user", "content": "Is the museum open on Sundays?"}
_REPLY = {"role": "assistant", "content": "Yes, from ten to six."}
_USER_AGAIN = {"role": "user", "content": "And on public holidays?"}
_REPLY_AGAIN = {"role": "assistant", "content": "Only in the afternoon."}
#: (shorter, longer) conversations: the shorter is the longer's start.
_PAIRS = (("whether it is the user's or the assistant's", [_USER], [_USER, _REPLY]),
          ("of one exchange and of two", [_USER, _REPLY], [_USER, _REPLY, _USER_AGAIN, _REPLY_AGAIN]))
_CONTENTS = tuple(str(m["content"]) for m in (_USER, _REPLY, _USER_AGAIN, _REPLY_AGAIN))
HOLE = "\x00"  # where a message's content stood in a closing text
MIN_WORDS = 3  # a closing instruction, not an end-of-turn marker or a one-word label
MIN_SIMILARITY = 0.7  # share of words two closing texts have in common (difflib's ratio)
PROBLEM = (
    "this is a guard/classifier template, not a chat-training template: it puts the whole conversation "
    "into one user prompt ({detail}), so its assistant messages are judged input, not text the model generates"
)
HINT = (
    "Train on the chat model's own template (or a shipped one: ChatTemplate.shipped(...)); a classifier is "
    "fine-tuned on its verdicts, with the conversation as the prompt and the verdict as the completion."
)


def words(text: str) -> list[str]:
    """The words of rendered text: markers in angle brackets (``<|eot_id|>``, ``<think>``) and holes left out."""
    kept, depth = [], 0
    for char in text:
        if char == "<":
            depth += 1
        elif char == ">" and depth:
            depth -= 1
            kept.append(" ")
        elif not depth:
            kept.append(" " if char == HOLE else char)
    return [w for w in "".join(kept).split() if any(c.isalpha() for c in w)]


def _closing(text: str, last: str) -> tuple[str, int] | None:
    """What follows the last message's content, with every message content replaced by HOLE; and where the
    content starts (None: the content is not rendered)."""
    at = text.rfind(last)
    if at < 0:
        return None
    rest = text[at + len(last) :]
    for content in _CONTENTS:
        rest = rest.replace(content, HOLE)
    return rest, at


def _opens_the_reply(closing: list[str], text: str, reply_at: int, before: str) -> bool:
    """Whether the closing words are the header written right before the reply (after the message before it):
    all of it, or the header and more (CodeLlama-70B-Instruct closes every conversation with
    ``Source: assistant`` / ``Destination: user`` where a reply opens with ``Source: assistant``)."""
    start = text.rfind(before, 0, reply_at)
    opener = words(text[start + len(before) if start >= 0 else 0 : reply_at])
    if not closing:
        return False
    if opener[-len(closing) :] == closing:
        return True
    # the header and a short addressing tail, never the header and a question
    return bool(opener) and closing[: len(opener)] == opener and len(closing) - len(opener) <= max(2, len(opener))


def _pair_evidence(short: str, long: str, short_last: str, long_last: str, before: str, which: str) -> str | None:
    if long.startswith(short):
        return None
    ends = _closing(short, short_last), _closing(long, long_last)
    if ends[0] is None or ends[1] is None:
        return None
    (after_short, _), (after_long, reply_at) = ends
    short_words, long_words = words(after_short), words(after_long)
    if len(long_words) < MIN_WORDS or _opens_the_reply(long_words, long, reply_at, before):
        return None
    similarity = SequenceMatcher(None, short_words, long_words, autojunk=False).ratio()
    if similarity < MIN_SIMILARITY:
        return None
    at = common_prefix(short, long)
    return (f"the same closing text {' '.join(long_words)[:70]!r} follows the last message {which}, "
            f"and adding a reply rewrites the prompt from character {at}")


def classifier_evidence(render: Callable[[list[dict[str, Any]]], str]) -> str | None:
    """What shows a template puts the conversation into one prompt and asks for a verdict, or None.

    ``render(messages)`` renders without the generation prompt and raises
    ``TemplateError`` on a conversation the template refuses."""
    for which, short_messages, long_messages in _PAIRS:
        try:
            short, long = render(short_messages), render(long_messages)
        except TemplateError:
            continue  # a response judge refuses to end on the user: try whole exchanges
        return _pair_evidence(short, long, str(short_messages[-1]["content"]), str(long_messages[-1]["content"]),
                              str(long_messages[-2]["content"]), which)
    return None


class ClassifierTemplate(Unpatchable):
    """A guard/classifier template: the conversation is the prompt, the answer a verdict."""

    refusal_class = "classifier"


#: a template variable no conversation supplies (a guard's policy text: ShieldGemma reads ``guideline``)
_UNSUPPLIED = re.compile(r"the template reads '([A-Za-z_]\w*)', which is neither a message field nor a render argument")
PLACEHOLDER = "Placeholder policy text."


def analysis_renderer(analysis: Analysis) -> Callable[[list[dict[str, Any]]], str]:
    """``render(messages)`` with the analysis' template and keywords, without the generation prompt.

    A variable the template reads that no conversation or render argument supplies (the policy of a guard)
    is given a placeholder text, so the template is judged on what it does with the conversation."""
    extra: dict[str, str] = {}

    def render(messages: list[dict[str, Any]]) -> str:
        while True:
            try:
                return render_plain(analysis.text, messages, kwargs={**analysis.kwargs, **extra}, now=PINNED_NOW,
                                    name=analysis.name)
            except TemplateError as err:
                unsupplied = _UNSUPPLIED.search(err.problem)
                if unsupplied is None or unsupplied.group(1) in extra or len(extra) >= 4:
                    raise
                extra[unsupplied.group(1)] = PLACEHOLDER

    return render


def refuse_classifier(analysis: Analysis) -> None:
    """Raise ``ClassifierTemplate`` when the analysed template is a guard/classifier template."""
    detail = classifier_evidence(analysis_renderer(analysis))
    if detail is not None:
        raise ClassifierTemplate(PROBLEM.format(detail=detail), location=analysis.name, hint=HINT)
