"""``anonymize(key=...)``: secrets out, people pseudonymized, every other character kept.

Each string of the batch (message contents, tool-call arguments, tool results, reasoning, metadata: every
string leaf of every column, Json values' text included) is scanned as ``whileai_datasets.privacy`` scans it.
A secret becomes a typed placeholder (``<secret:aws_access_key>``); an email address or a user name (a
home-directory path's, an ``ls -l`` owner's) becomes a pseudonym keyed by HMAC-SHA256 with ``key``: the same
name gets the same pseudonym in every row, message, field and run with the same key, and no one without the
key can tell which name it was. Only the spans found are replaced, inside the text as it is: tool-call
arguments stay JSON text (never decoded and written again, so ``0.00005`` stays ``0.00005``), the punctuation
after a name stays, and a string with nothing in it is not touched.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from whileai_datasets._typing import Batch
from whileai_datasets.columnar import _arrow
from whileai_datasets.errors import OptionError
from whileai_datasets.privacy import rules
from whileai_datasets.privacy.leaves import replaced
from whileai_datasets.privacy.scanning import hits

#: The per-row count of what was replaced: a list of {kind, count}, null for a row with nothing replaced.
REPORT_COLUMN = "anonymized"
_REPORT_TYPE = pa.list_(pa.struct([("kind", pa.string()), ("count", pa.int64())]))


@dataclass(frozen=True)
class Anonymize:
    """Replace secrets with typed placeholders and pseudonymize emails and user names, nothing else changed.

    Args:
        key: The pseudonyms' secret key (text or bytes, kept private): the same key gives the same pseudonyms
            in every run. Required unless ``personal=False``.
        personal: Pseudonymize emails (``user-<hash>@example.com``) and user names of home-directory paths and
            ``ls -l`` owners (``user-<hash>``); False replaces secrets only.
        report_column: The column counting what each row had replaced, by kind (None: no column).
    Returns:
        The batch with every string that held something rewritten, and ``report_column``.
    Raises:
        OptionError: no ``key`` while ``personal`` is on.
    Example:
        >>> from whileai_datasets import transforms as wai_transforms
        >>> ds = ds.with_format("arrow").map(wai_transforms.anonymize(key=my_key), batched=True)  # doctest: +SKIP
    """

    key: str | bytes | None = None
    personal: bool = True
    report_column: str | None = REPORT_COLUMN

    def __post_init__(self) -> None:
        if self.personal and not self.key:
            raise OptionError("anonymize needs a key for the pseudonyms of emails and user names, and none was given",
                              location="anonymize(key=None)",
                              hint="Pass key= (a secret of yours, the same in every run for the same pseudonyms), "
                                   "or personal=False to replace secrets only")

    def __call__(self, batch: Batch, indices: list[int] | None = None) -> Batch:
        return _arrow.like(batch, self.table(_arrow.as_table(batch)))

    def table(self, table: pa.Table) -> pa.Table:
        """This transform on a table."""
        counts = np.zeros((table.num_rows, len(rules.RULES)), dtype=np.int64)
        order = {rule.kind: i for i, rule in enumerate(rules.RULES)}
        new: dict[tuple[str, ...], pa.Array] = {}
        skip = {self.report_column} if self.report_column else set()
        scanned = table.drop_columns([c for c in table.column_names if c in skip])
        for hit in hits(scanned, personal=self.personal):
            texts = []
            for position, text, spans in zip(hit.positions, hit.texts, hit.spans):
                row = hit.leaf.place(int(position))[0]
                for span in spans:
                    counts[row, order[span.kind]] += 1
                texts.append(self.rewrite(text, spans))
            values = new.get(hit.leaf.path, hit.leaf.values)
            mask = np.zeros(len(values), dtype=bool)
            mask[hit.positions] = True
            new[hit.leaf.path] = pc.replace_with_mask(values, pa.array(mask), pa.array(texts, values.type))
        out = replaced(table, new) if new else table
        if self.report_column:
            out = _arrow.set_column(out, self.report_column, _report(counts))
        return out

    def rewrite(self, text: str, spans: list[rules.Span]) -> str:
        """``text`` with each span replaced (spans in order, not overlapping); every other character kept."""
        pieces, last = [], 0
        for span in spans:
            pieces += [text[last:span.start], self.replacement(span)]
            last = span.end
        pieces.append(text[last:])
        return "".join(pieces)

    def replacement(self, span: rules.Span) -> str:
        """What a span becomes: a placeholder naming its kind, or a pseudonym."""
        if span.kind in rules.SECRET_KINDS:
            return f"<secret:{span.kind}>"
        name = "user-" + self._digest("email:" + span.value.lower() if span.kind == "email" else "user:" + span.value)
        return f"{name}@example.com" if span.kind == "email" else name

    def _digest(self, text: str) -> str:
        key = self.key.encode() if isinstance(self.key, str) else bytes(self.key or b"")
        return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()[:10]


def anonymize(key: str | bytes | None = None, *, personal: bool = True,
              report_column: str | None = REPORT_COLUMN) -> Anonymize:
    """``Anonymize(key, personal=..., report_column=...)``: see ``Anonymize``."""
    return Anonymize(key, personal, report_column)


def _report(counts: np.ndarray) -> pa.Array:
    """Per row, the kinds replaced and how many of each (null where nothing was)."""
    kinds = [rule.kind for rule in rules.RULES]
    rows, columns = np.nonzero(counts)
    lengths = np.bincount(rows, minlength=counts.shape[0])
    structs = pa.StructArray.from_arrays([pa.array([kinds[c] for c in columns], pa.string()),
                                          pa.array(counts[rows, columns], pa.int64())], names=["kind", "count"])
    offsets = _arrow.offsets_of(lengths)
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), structs, mask=pa.array(lengths == 0)).cast(
        _REPORT_TYPE)
