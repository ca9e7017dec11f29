"""Griffe extension: read the package's docstrings the way they are written.

The package's Google-style docstrings use two forms griffe's parser does not know, and which would
render badly (or fail ``mkdocs build --strict``) if passed through as they are:

* an ``Example:`` section (griffe reads only ``Examples:``): its ``>>>`` lines become a code example;
* one ``Args:`` entry naming several parameters that share a description
  (``system_prompt, tools, mask_mode: As whileai's training_rows.``): one entry per name.

Only the text handed to the docs is changed; the source is not.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_EXAMPLE = re.compile(r"^(\s*)Example:\s*$", re.MULTILINE)
_SHARED_ARGS = re.compile(r"^(?P<indent>[ \t]+)(?P<names>\w+(?:, \w+)+):(?P<rest>.*(?:\n(?P=indent)[ \t]+.*)*)", re.MULTILINE)


def _one_entry_per_name(match: re.Match[str]) -> str:
    indent, rest = match["indent"], match["rest"]
    return "\n".join(f"{indent}{name}:{rest}" for name in match["names"].split(", "))


def rewrite(text: str) -> str:
    return _SHARED_ARGS.sub(_one_entry_per_name, _EXAMPLE.sub(r"\1Examples:", text))


class PackageDocstrings(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = rewrite(obj.docstring.value)
