"""Find the secrets and personal data in a table of rows, a chunk at a time, counted by kind with places.

Arrow does the reading: each string leaf (``leaves``) goes through ``pyarrow.compute.match_substring_regex``
with every rule in one RE2 pattern (``rules.PREFILTER``), which keeps the few strings worth a look; only those
reach Python, where ``rules.spans`` finds each value exactly and checks it. So the cost is one pass of RE2 over
the text, plus Python for the strings that hold something. ``Findings`` keeps counts and the first few places of
each kind (never a value: a masked preview at most), the same size whatever the row count, and adds up chunk by
chunk or block by block.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from whileai_datasets.privacy import rules
from whileai_datasets.privacy.leaves import Leaf, leaves

#: Places kept per kind (the first in row order).
FIRST_PLACES = 5


@dataclass(frozen=True)
class Hit:
    """The strings of one leaf that hold something: their positions in the leaf and their spans."""

    leaf: Leaf
    positions: np.ndarray
    texts: list[str]
    spans: list[list[rules.Span]]


def hits(table: pa.Table, *, personal: bool = True) -> Iterator[Hit]:
    """Every string of ``table`` holding a secret (or, with ``personal``, personal data), leaf by leaf.

    One regex call covers every leaf (their values concatenated): RE2 compiles the combined pattern once per
    table, not once per leaf (a chunked array would compile it once per chunk)."""
    found = [leaf for leaf in leaves(table) if len(leaf.values) and leaf.values.null_count < len(leaf.values)]
    if not found:
        return
    pattern = rules.PREFILTER if personal else rules.SECRETS_PREFILTER
    every = pa.concat_arrays([leaf.values.cast(pa.large_string()) for leaf in found])
    flags = pc.fill_null(pc.match_substring_regex(every, pattern), False).to_numpy(zero_copy_only=False)
    if not flags.any():
        return
    starts = np.cumsum([0] + [len(leaf.values) for leaf in found])
    for leaf, start, end in zip(found, starts[:-1], starts[1:]):
        positions = np.flatnonzero(flags[start:end])
        if not len(positions):
            continue
        texts = leaf.values.take(pa.array(positions, pa.int64())).to_pylist()
        spans = [rules.spans(text, personal=personal) for text in texts]
        keep = [i for i, found_spans in enumerate(spans) if found_spans]
        if keep:
            yield Hit(leaf, positions[keep], [texts[i] for i in keep], [spans[i] for i in keep])


@dataclass
class KindCount:
    """One kind: rows holding it, values found, the first places (row, field, masked preview)."""

    rows: int = 0
    values: int = 0
    first: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"rows": self.rows, "values": self.values, "first": [dict(p) for p in self.first]}


@dataclass
class Findings:
    """Secrets and personal data found in rows, by kind; ``add`` a chunk at a time, ``merge`` another's."""

    scanned_rows: int = 0
    secret_rows: int = 0
    personal_rows: int = 0
    kinds: dict[str, KindCount] = field(default_factory=dict)

    @property
    def secrets(self) -> dict[str, KindCount]:
        return {kind: found for kind, found in self.kinds.items() if kind in rules.SECRET_KINDS}

    @property
    def personal(self) -> dict[str, KindCount]:
        return {kind: found for kind, found in self.kinds.items() if kind in rules.PERSONAL_KINDS}

    def add(self, table: pa.Table, offset: int = 0, *, personal: bool = True, split: str | None = None) -> tuple[
            np.ndarray, np.ndarray]:
        """Scan ``table`` (its rows numbered from ``offset``); the rows holding a secret and those holding
        personal data, as boolean arrays."""
        secret_rows = np.zeros(table.num_rows, dtype=bool)
        personal_rows = np.zeros(table.num_rows, dtype=bool)
        per_kind: dict[str, set[int]] = {}
        for hit in hits(table, personal=personal):
            for position, text_spans in zip(hit.positions, hit.spans):
                row, where = hit.leaf.place(int(position))
                for span in text_spans:
                    per_kind.setdefault(span.kind, set()).add(row)
                    found = self.kinds.setdefault(span.kind, KindCount())
                    found.values += 1
                    place = {"row": offset + row, "field": where, "preview": rules.masked(span.value)}
                    if split is not None:
                        place = {"split": split, **place}
                    found.first.append(place)
                    (secret_rows if span.kind in rules.SECRET_KINDS else personal_rows)[row] = True
        for kind, rows in per_kind.items():
            found = self.kinds[kind]
            found.rows += len(rows)
            found.first = sorted(found.first, key=lambda p: (p.get("split") or "", p["row"]))[:FIRST_PLACES]
        self.scanned_rows += table.num_rows
        self.secret_rows += int(secret_rows.sum())
        self.personal_rows += int(personal_rows.sum())
        return secret_rows, personal_rows

    def merge(self, other: Findings, row_offset: int = 0) -> None:
        """Add ``other`` (its rows numbered from ``row_offset`` here)."""
        self.scanned_rows += other.scanned_rows
        self.secret_rows += other.secret_rows
        self.personal_rows += other.personal_rows
        for kind, found in other.kinds.items():
            mine = self.kinds.setdefault(kind, KindCount())
            mine.rows += found.rows
            mine.values += found.values
            moved = [{**p, "row": p["row"] + row_offset} for p in found.first]
            mine.first = sorted(mine.first + moved, key=lambda p: (p.get("split") or "", p["row"]))[:FIRST_PLACES]

    def to_dict(self) -> dict[str, Any]:
        """``scanned_rows``, ``secret_rows``, ``personal_rows``, and ``secrets`` / ``personal``: kind ->
        ``{"rows", "values", "first": [{"row", "field", "preview"}]}`` (kinds found only, in ``rules.RULES`` order)."""
        order = [rule.kind for rule in rules.RULES]
        ordered = sorted(self.kinds.items(), key=lambda item: order.index(item[0]))
        return {"scanned_rows": self.scanned_rows, "secret_rows": self.secret_rows,
                "personal_rows": self.personal_rows,
                "secrets": {k: v.to_dict() for k, v in ordered if k in rules.SECRET_KINDS},
                "personal": {k: v.to_dict() for k, v in ordered if k in rules.PERSONAL_KINDS}}

    def to_json(self) -> str:
        """Every count and place as JSON text (``from_json`` reads it back): how a Ray worker sends it."""
        return json.dumps({"scanned_rows": self.scanned_rows, "secret_rows": self.secret_rows,
                           "personal_rows": self.personal_rows,
                           "kinds": {kind: found.to_dict() for kind, found in self.kinds.items()}})

    @classmethod
    def from_json(cls, text: str) -> Findings:
        data = json.loads(text)
        kinds = {kind: KindCount(found["rows"], found["values"], found["first"])
                 for kind, found in data["kinds"].items()}
        return cls(data["scanned_rows"], data["secret_rows"], data["personal_rows"], kinds)

    def describe_secrets(self, limit: int = 3) -> str:
        """The secret kinds found, with rows and first places, for an error (no value, not even masked)."""
        parts = []
        for kind, found in self.secrets.items():
            places = "; ".join(_place(p) for p in found.first[:limit])
            parts.append(f"{kind} in {found.rows} row{'s' if found.rows != 1 else ''} ({places})")
        return ", ".join(parts)


def _place(place: dict[str, Any]) -> str:
    split = f"split {place['split']!r} " if place.get("split") else ""
    return f"{split}row {place['row']} {place['field']}"


def scan_tables(tables: Iterable[pa.Table], *, personal: bool = True, split: str | None = None) -> Findings:
    """``Findings`` of ``tables`` in order (rows numbered across them)."""
    found = Findings()
    offset = 0
    for table in tables:
        found.add(table, offset, personal=personal, split=split)
        offset += table.num_rows
    return found
