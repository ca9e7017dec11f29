"""The exceptions whileai_datasets raises.

Every error carries three fields, ``problem`` (what was wrong, expected vs got),
``location`` (file and line, row and column path, or template and line) and
``hint`` (what to do next). One ``__str__`` assembles them, so no message is
glued together by hand at the raise site.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from concurrent.futures.process import BrokenProcessPool

#: The folders this package's code runs from (``builders`` is a link: its own folder too).
_PACKAGE_DIRS = tuple({os.path.join(folder, "") for here in (os.path.dirname(os.path.abspath(__file__)),)
                       for folder in (here, os.path.realpath(here), os.path.realpath(os.path.join(here, "builders")))})


class WhileaiError(Exception):
    """Base class: ``problem`` at ``location``; ``hint`` says what to do."""

    def __init__(self, problem: str, *, location: str | None = None, hint: str | None = None) -> None:
        self.problem = problem
        self.location = location
        self.hint = hint
        super().__init__(str(self))

    def __str__(self) -> str:
        text = f"{self.location}: {self.problem}" if self.location else self.problem
        if self.hint:
            text = f"{text}. {self.hint}" if not text.endswith((".", "!", "?")) else f"{text} {self.hint}"
        return text

    def __reduce__(self):  # type: ignore[no-untyped-def]
        # keyword-only fields must survive pickling (datasets' num_proc workers)
        return (_rebuild, (type(self), self.problem, self.location, self.hint))


def _rebuild(cls: type[WhileaiError], problem: str, location: str | None, hint: str | None) -> WhileaiError:
    return cls(problem, location=location, hint=hint)


class ExportFormatError(WhileaiError, ValueError):
    """A row or file does not have the shape whileai writes."""


class OptionError(WhileaiError, ValueError):
    """An option has a value it cannot take (a choice outside its vocabulary, a flag that is not a bool, a
    count that is not a whole number in range). Every entry point raises this one class, worded the same,
    for the same mistake."""


class SchemaError(WhileaiError, TypeError):
    """A batch or column does not have the canonical schema a step needs."""


class TemplateError(WhileaiError, ValueError):
    """A chat template cannot be parsed, inspected, patched or rendered."""


class RenderBudgetError(TemplateError):
    """A chat template's render went over its ``RenderBudget`` (output size or wall time)."""


class PublishError(WhileaiError, RuntimeError):
    """Publishing to the Hub was refused or failed."""


class WriteError(WhileaiError, OSError):
    """An output could not be written (or replaced) whole; ``errno`` says why
    where the OS did, and the old file (if any) is untouched."""


class ParseWorkerError(WhileaiError, BrokenProcessPool):
    """A worker process parsing a file died (a signal, the OOM killer); a
    ``BrokenProcessPool`` too, so code that catches the pool's own error still does."""


class UnsupportedVersionError(WhileaiError, RuntimeError):
    """An installed dependency is outside the range this package supports."""


class NothingToTrainWarning(UserWarning):
    """Rows that carry no loss: a trainer sees them, learns nothing from them, and (averaging the loss per
    row or per batch) trains the rest a little less. The message gives the count, the cause and the first
    location; ``whileai_datasets.audit`` lists every cause over a whole dataset."""


class DuplicateSystemWarning(UserWarning):
    """Rows that open with two system messages (``system_prompt=`` given for rows that already carry their own):
    the model is trained to expect both. The message gives the count and the first location."""


class UnreadKeysWarning(UserWarning):
    """Keys of the rows that no row shape reads: message keys outside the ones a message is read by (a
    misspelt ``contnet`` loads as empty content), and row keys that look meant to be read (a near miss of a
    read key, or ``response`` / ``output`` beside a conversation read from other keys). The message gives
    each key's count and first location, with a "did you mean" for near misses (``rows.unread_keys``)."""


def causes(err: BaseException) -> Iterator[BaseException]:
    """`err`, then each exception behind it (``__cause__``, else ``__context__``), each once: a cycle ends the walk."""
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def stacklevel_outside() -> int:
    """The ``stacklevel`` that points a warning its caller raises at the first frame outside this package: the
    user's call, however many of the package's functions lie between (``export_dataset(engine="ray")`` runs
    the Ray export three calls down)."""
    frame = sys._getframe(1)
    level = 1
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIRS):
        frame, level = frame.f_back, level + 1
    return level
