"""``mask_report``: the totals of a tokenized dataset, so what a trainer will learn is seen before it trains.

Read from the columns ``tokenize`` writes (``num_tokens``, ``num_supervised_tokens``,
``tokens_truncated`` and the rest), summed with ``pyarrow.compute`` over the whole table.
"""

from __future__ import annotations

from typing import Any

from whileai_datasets.errors import SchemaError

__all__ = ["mask_report"]


def mask_report(tokenized: Any, source_rows: int | None = None) -> dict[str, Any]:
    """Totals of a tokenized dataset: tokens, supervised tokens, what the naive
    ``messages`` route would supervise (every token), truncation, the mask
    method per row (``mask_methods``), the rows dropped by ``on_bad_row='skip'``
    (``bad_rows_dropped``; counted on the first kept row of each batch, so a
    batch that kept no row at all is only in its warning) and the rows
    dropped for having no supervised token (given the source's row count)."""
    table = tokenized.with_format("arrow")[:] if hasattr(tokenized, "with_format") else tokenized
    import pyarrow.compute as pc

    def total(name: str) -> int:
        if name not in table.column_names:
            if table.num_rows == 0:  # every row was dropped: datasets adds no columns to an empty result
                return 0
            raise SchemaError(f"no {name!r} column", hint="Report on the output of wai_transforms.tokenize.")
        return int(pc.sum(table[name]).as_py() or 0)

    tokens, supervised = total("num_tokens"), total("num_supervised_tokens")
    report: dict[str, Any] = {
        "rows": table.num_rows,
        "tokens": tokens,
        "supervised_tokens": supervised,
        "naive_supervised_tokens": tokens,
        "naive_over_masked": (tokens / supervised) if supervised else None,
        "rows_truncated": int(pc.sum(pc.greater(table["tokens_truncated"], 0)).as_py() or 0) if table.num_rows else 0,
        "tokens_truncated": total("tokens_truncated"),
        "supervised_tokens_truncated": total("supervised_tokens_truncated"),
    }
    report["bad_rows_dropped"] = total("bad_rows_dropped") if "bad_rows_dropped" in table.column_names else 0
    if "mask_method" in table.column_names and table.num_rows:
        counts = pc.value_counts(table["mask_method"]).to_pylist()
        report["mask_methods"] = {item["values"]: item["counts"] for item in counts}
    else:
        report["mask_methods"] = {}
    if source_rows is not None:
        report["rows_dropped_unsupervised"] = source_rows - table.num_rows - report["bad_rows_dropped"]
    return report
