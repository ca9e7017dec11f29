"""Checks for option values that are not vocabularies: flags and counts.

``format`` and ``mask_mode`` are checked against their ``Literal``
vocabularies; these are the other two kinds. A flag must be a real ``bool``
(``unroll="no"`` is a non-empty string, so Python reads it as true: refused
rather than obeyed backwards), and a count a real ``int`` (``True`` is an int
to Python but not a count here; ``"10"`` and ``2.5`` are refused rather than
converted, and a negative count is refused rather than clamped to 0).
"""

from __future__ import annotations

from typing import Any

from whileai_datasets.errors import ExportFormatError, WhileaiError


def check_flag(value: Any, name: str, *, error: type[WhileaiError] = ExportFormatError,
               location: str | None = None) -> bool:
    """``value`` when it is ``True`` or ``False``; else ``error`` naming the option."""
    if type(value) is not bool:
        raise error(f"{name} must be True or False, got {type(value).__name__} {value!r}",
                    location=location or name,
                    hint=f"Pass {name}=True or {name}=False; a string such as 'no' is not read as False.")
    return value


def check_count(value: Any, name: str, *, minimum: int = 0, optional: bool = True,
                error: type[WhileaiError] = ExportFormatError, location: str | None = None,
                hint: str | None = None) -> int | None:
    """``value`` when it is an ``int`` of at least ``minimum`` (or None, when ``optional``); else ``error``."""
    if value is None and optional:
        return None
    if type(value) is not int or value < minimum:
        allowed = f"a whole number, {minimum} or more" + (", or None" if optional else "")
        raise error(f"{name} must be {allowed}, got {type(value).__name__} {value!r}",
                    location=location or name,
                    hint=hint or f"Pass e.g. {name}={max(minimum, 2000)}.")
    return value
