"""Sections a later stage adds to a dataset card, with the files they show (the audit's summary and plots).

The card is the hub stage's, but what a section says may come from stages after it (the audit
runs the export's pipeline and tokenize, which sit above the hub). So the hub takes a section as
data: its Markdown, appended after the card's own text, and the files it links (an SVG plot,
say), committed beside the card in the same commit, at paths relative to the repo's root.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from whileai_datasets.errors import PublishError

__all__ = ["CardSection"]

#: Where a section's files may go: one folder of their own, never over the data or the card.
SECTION_FOLDER = "card"


@dataclass(frozen=True)
class CardSection:
    """A card section: a ``## title``, its Markdown body, and files (repo path -> bytes) it links.

    Paths must lie under ``card/`` (e.g. ``card/audit/lengths.svg``), so a section never
    writes over a shard or the card itself.
    """

    title: str
    markdown: str
    files: Mapping[str, bytes] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for path in self.files:
            parts = path.split("/")
            if parts[0] != SECTION_FOLDER or len(parts) < 2 or ".." in parts or "" in parts:
                raise PublishError(f"a card section's file must lie under {SECTION_FOLDER}/, got {path!r}",
                                   location=f"card section {self.title!r}",
                                   hint=f"Name it {SECTION_FOLDER}/<section>/<file>.")


def sections_text(sections: Sequence[CardSection]) -> str:
    """The Markdown of every section, each under its ``##`` heading."""
    return "".join(f"\n## {section.title}\n\n{section.markdown.strip()}\n" for section in sections)


def section_files(sections: Sequence[CardSection]) -> dict[str, bytes]:
    """Every section's files; two sections may not name the same path."""
    files: dict[str, bytes] = {}
    for section in sections:
        for path, data in section.files.items():
            if path in files:
                raise PublishError(f"two card sections write {path!r}", location=f"card section {section.title!r}",
                                   hint="Give each section's files their own folder under card/.")
            files[path] = data
    return files
