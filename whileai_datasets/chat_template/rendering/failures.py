"""What a render that failed inside the template says: the name it missed, or the item the row lacks.

A template fails for two very different reasons: it reads a name the render was not
given (``eos_token`` when the special tokens were not passed), or the row lacks what the
template indexes (``messages[0]`` of an empty conversation: jinja2 says "list object has no
element 0"). Blaming the messages for the first sends the user the wrong way, so each
failure names its cause and the way out.
"""

from __future__ import annotations

import re

import jinja2

#: jinja2's words for a name that is not defined: ``'eos_token' is undefined``.
_UNDEFINED_NAME = re.compile(r"^'(?P<name>[A-Za-z_][A-Za-z0-9_]*)' is undefined$")
#: jinja2's words for an index or key the value does not have: ``list object has no element 0``.
_MISSING_ITEM = re.compile(r"has no (element|attribute) ")


def failure_problem_and_hint(err: Exception) -> tuple[str, str]:
    """The problem and the hint of a ``TemplateError`` for an exception raised inside a template."""
    text = str(err)
    found = _UNDEFINED_NAME.match(text) if isinstance(err, jinja2.exceptions.UndefinedError) else None
    if found and found["name"].endswith("_token"):
        name = found["name"]
        return (f"the template reads {name!r}, a special token this render was not given",
                f"Pass it: render(..., {name}=tokenizer.{name}), or load the template with "
                "ChatTemplate.from_tokenizer(tokenizer), which passes the tokenizer's special tokens.")
    if found:
        name = found["name"]
        return (f"the template reads {name!r}, which is neither a message field nor a render argument",
                f"Pass it as render(..., {name}=...) if the template expects it as an argument.")
    if isinstance(err, jinja2.exceptions.UndefinedError) and _MISSING_ITEM.search(text):
        return (f"the template reads an item this conversation does not have ({text})",
                "The template expects a message, part or field the row lacks (an empty conversation, an empty "
                "content list, a missing key): check the row.")
    return (f"the template failed to render: {type(err).__name__}: {err}",
            "Check that the messages have the shape this template expects.")
