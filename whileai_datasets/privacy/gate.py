"""Publishing's check: scan every split before the first request, refuse on a secret, and tell the card.

``screen`` runs before a publish opens the repo (the local engine), or once the Ray workers' blocks are
scanned and before the driver opens it: with ``secrets="refuse"`` (the default) a secret stops the publish
with an error naming the kinds and places (never a value), and nothing was sent; ``"redact"`` publishes each
secret replaced by a typed placeholder (``transforms.anonymize`` with ``personal=False``); ``"allow"``
publishes them as they are, and the card says so. Personal data never stops a publish: the card counts it,
and ``anonymize(key=...)`` pseudonymizes it first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from whileai_datasets._options import check_choice
from whileai_datasets._typing import SecretsPolicy
from whileai_datasets.errors import PublishError
from whileai_datasets.privacy import rules
from whileai_datasets.privacy.scanning import Findings, scan_tables

#: How publish names the option in its messages.
OPTION = "secrets"


def check_policy(policy: str) -> SecretsPolicy:
    """``policy`` checked against ``SecretsPolicy``'s values."""
    return check_choice(policy, OPTION, SecretsPolicy)  # type: ignore[no-any-return]


def screen(splits: Mapping[str, Any], policy: str, read: Callable[[Any], Iterable[pa.Table]]) -> Findings:
    """Scan every split (name -> a ``datasets.Dataset``, read a chunk at a time by ``read``) and apply ``policy``.

    Splits that partition one table (``split_by``'s: selections of the same rows, each row in one split) are
    scanned as that table, in its own order (no row looked up through the selections), and each place found is
    named by its split and its row there."""
    check_policy(policy)
    shared = _partition(splits)
    if shared is not None:
        base, names, split_of, position = shared
        found = scan_tables(read(base))
        for kind in found.kinds.values():
            kind.first = sorted(({"split": names[split_of[place["row"]]], **place, "row": int(position[place["row"]])}
                                 for place in kind.first), key=lambda p: (p["split"], p["row"]))
    else:
        found = Findings()
        for name, ds in splits.items():
            found.merge(scan_tables(read(ds), split=name))
    judge(found, policy)
    return found


def _same_rows(one: Any, other: Any) -> bool:
    """Whether two datasets' tables are the same Arrow data (the same buffers, column by column)."""
    def buffers(ds: Any) -> list[tuple[int, ...]]:
        table = ds.data.table
        return [tuple(b.address if b is not None else 0 for b in chunk.buffers())
                for column in table.columns for chunk in column.chunks]

    return bool(one.data.table.schema == other.data.table.schema and buffers(one) == buffers(other))


def _partition(splits: Mapping[str, Any]) -> tuple[Any, list[str], np.ndarray, np.ndarray] | None:
    """The one table ``splits`` select from, each split's name, and per row of it its split and its row there;
    None unless every split is a selection of the same table and every row is in exactly one."""
    from datasets import Dataset

    sets = list(splits.values())
    if len(sets) < 2 or not all(isinstance(ds, Dataset) and ds._indices is not None and _same_rows(ds, sets[0])
                                for ds in sets):
        return None
    n = sets[0].data.num_rows
    split_of = np.full(n, -1, dtype=np.int64)
    position = np.zeros(n, dtype=np.int64)
    for index, ds in enumerate(sets):
        rows = ds._indices.column(0).to_numpy()  # select's mapping; datasets has no public accessor
        if (split_of[rows] != -1).any():
            return None
        split_of[rows] = index
        position[rows] = np.arange(len(rows))
    if (split_of < 0).any():
        return None
    return Dataset(sets[0].data, info=sets[0].info), list(splits), split_of, position


def judge(found: Findings, policy: str) -> None:
    """Refuse ``found``'s secrets under ``"refuse"``: a ``PublishError`` with the kinds and first places."""
    if policy != "refuse" or not found.secret_rows:
        return
    raise PublishError(
        f"found secrets in {found.secret_rows} of {found.scanned_rows} rows: {found.describe_secrets()}",
        location="publish (before any upload)",
        hint="Nothing was uploaded and no repo was created or changed. Remove them from the rows, or pass "
             "secrets='redact' (CLI: --secrets redact) to publish each replaced by a typed placeholder, or "
             "secrets='allow' to publish them as they are (the card says so); whileai_datasets.audit(...) lists "
             "them with masked previews")


def scan(data: Any, *, personal: bool = True, batch_size: int = 4096) -> Findings:
    """Secrets and personal data in ``data`` (a ``datasets`` ``Dataset``, ``IterableDataset`` or ``DatasetDict``,
    or a ``pyarrow.Table``), read ``batch_size`` rows at a time: memory stays flat in the row count.

    Example:
        >>> found = scan(ds)  # doctest: +SKIP
        >>> found.secret_rows, found.to_dict()["secrets"]  # doctest: +SKIP
    """
    if isinstance(data, pa.Table):
        return scan_tables([data], personal=personal)
    if isinstance(data, Mapping):  # a DatasetDict: every split, each place naming its split
        found = Findings()
        for name, split in data.items():
            found.merge(scan_tables(split.with_format("arrow").iter(batch_size=batch_size), personal=personal,
                                    split=name))
        return found
    return scan_tables(data.with_format("arrow").iter(batch_size=batch_size), personal=personal)


def refuse_secrets(data: Any) -> Findings:
    """``scan(data)``, raising the ``PublishError`` a publish raises when a secret is found: call it before
    ``datasets``' own ``push_to_hub``, which uploads whatever the rows hold."""
    found = scan(data)
    judge(found, "refuse")
    return found


def card_view(found: Findings | None, policy: str) -> dict[str, Any] | None:
    """What the card says about the scan: what was scanned, what was found (by kind) and what was done."""
    if found is None:
        return None
    secrets = {kind: count.rows for kind, count in found.secrets.items()}
    personal = {kind: count.rows for kind, count in found.personal.items()}
    done = {"refuse": "none was found, so nothing was redacted",
            "redact": "each was replaced by a typed placeholder such as `<secret:aws_access_key>` before upload",
            "allow": "**they were published as they are** (`secrets='allow'`)"}[policy]
    if not secrets:
        done = "nothing was redacted"
    return {
        "policy": policy,
        "scanned_rows": found.scanned_rows,
        "kinds": ", ".join(rule.kind for rule in rules.RULES),
        "secret_rows": found.secret_rows,
        "secrets": ", ".join(f"{kind} ({rows} rows)" for kind, rows in secrets.items()) or "none",
        "secrets_done": done,
        "personal_rows": found.personal_rows,
        "personal": ", ".join(f"{kind} ({rows} rows)" for kind, rows in personal.items()) or "none",
        "yaml": {"policy": policy, "scanned_rows": found.scanned_rows, "secret_rows": found.secret_rows,
                 "personal_rows": found.personal_rows, "secrets": secrets, "personal": personal,
                 "redacted": bool(secrets) and policy == "redact"},
    }
