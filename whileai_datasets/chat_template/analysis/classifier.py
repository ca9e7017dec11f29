"""Guard and classifier templates: the whole conversation put into one user prompt.

A safety classifier (Llama-Guard-style, ShieldGemma-style) renders every
message of the conversation as text inside a single prompt and closes it with a
fixed instruction ("is the last turn safe?") before the model's answer. Its
assistant messages are the *judged* text, not what the model generates, so
there is nothing to train a chat model on and no generation block to add: a
patch that wrapped them would supervise input text.

Told apart by rendering, not by names: a chat template renders a conversation's
start as a prefix of the whole (the user turn, then the reply after it), while
a classifier writes the same closing instruction after the last message,
whichever it is, so ``[user]`` is not a prefix of ``[user, assistant]`` and both
end with one trailer of words (not an end-of-turn marker) that follows the
assistant's text.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from whileai_datasets.chat_template.analysis.probes import Probe, common_prefix
from whileai_datasets.chat_template.analysis.refusals import Unpatchable
from whileai_datasets.errors import TemplateError

if TYPE_CHECKING:
    from whileai_datasets.chat_template.analysis.analysis import Analysis

_USER = {"role": "user", "content": "Is the museum open on Sundays?"}
_REPLY = {"role": "assistant", "content": "Yes, from ten to six."}
PROBLEM = (
    "this is a guard/classifier template, not a chat-training template: it puts the whole conversation "
    "into one user prompt ({detail}), so its assistant messages are judged input, not text the model generates"
)
HINT = (
    "Train on the chat model's own template (or a shipped one: ChatTemplate.shipped(...)); a classifier is "
    "fine-tuned on its verdicts, with the conversation as the prompt and the verdict as the completion."
)


def _common_suffix(a: str, b: str) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[-1 - n] == b[-1 - n]:
        n += 1
    return n


def classifier_evidence(render: Callable[[list[dict[str, Any]]], str]) -> str | None:
    """What shows a template puts the conversation into one prompt, or None.

    ``render(messages)`` renders without the generation prompt and raises
    ``TemplateError`` on a conversation the template refuses."""
    try:
        alone, answered = render([_USER]), render([_USER, _REPLY])
    except TemplateError:
        return None
    if answered.startswith(alone):
        return None  # the conversation's start is a prefix of the whole: a chat template
    reply_at = answered.rfind(str(_REPLY["content"]))
    user_at = alone.rfind(str(_USER["content"]))
    if reply_at < 0 or user_at < 0 or answered.find(str(_USER["content"])) < 0:
        return None
    trailer = _common_suffix(alone, answered)
    after_reply = answered[reply_at + len(str(_REPLY["content"])) :]
    after_user = alone[user_at + len(str(_USER["content"])) :]
    shared = after_reply[len(after_reply) - min(trailer, len(after_reply)) :]
    if not after_user.endswith(shared) or len(shared.strip()) < len(after_reply.strip()) // 2:
        return None
    if len(shared.split()) < 3:  # an end-of-turn marker, not a closing instruction
        return None
    at = common_prefix(alone, answered)
    return (f"the same closing text {shared.strip()[:60]!r} follows the last message whether it is the user's or "
            f"the assistant's, and adding a reply rewrites the prompt from character {at}")


class ClassifierTemplate(Unpatchable):
    """A guard/classifier template: the conversation is the prompt, the answer a verdict."""

    refusal_class = "classifier"


def analysis_renderer(analysis: Analysis) -> Callable[[list[dict[str, Any]]], str]:
    """``render(messages)`` with the analysis' template and keywords, without the generation prompt."""
    return lambda messages: analysis.plain(Probe("classifier", messages), messages, False)


def refuse_classifier(analysis: Analysis) -> None:
    """Raise ``ClassifierTemplate`` when the analysed template is a guard/classifier template."""
    detail = classifier_evidence(analysis_renderer(analysis))
    if detail is not None:
        raise ClassifierTemplate(PROBLEM.format(detail=detail), location=analysis.name, hint=HINT)
