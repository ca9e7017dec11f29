"""``mask_report``: the totals of a tokenized dataset, so what a trainer will learn is seen before it trains.

Read from the columns ``tokenize`` writes (``num_tokens``, ``num_supervised_tokens``,
``tokens_truncated`` and the rest), summed with ``pyarrow.compute`` over the whole table.
"""

from __future__ import annotations

from typing import Any

from whileai_datasets.errors import SchemaError
from whileai_datasets.tokenize.token_columns import UNSUPERVISED_COLUMN

__all__ = ["mask_report", "naive_ratio"]


def naive_ratio(tokens: int, supervised: int) -> float | None:
    """What training every token (TRL's default on ``messages`` rows) trains against the mask: the tokens of
    the rows a tokenized dataset holds (those with a supervised token) over their supervised tokens. The
    audit and ``mask_report`` both say this one figure."""
    return tokens / supervised if supervised else None


def mask_report(tokenized: Any, source_rows: int | None = None) -> dict[str, Any]:
    """Totals of a tokenized dataset: tokens, supervised tokens, what the naive
    ``messages`` route would supervise (every token), truncation, the mask
    method per row (``mask_methods``), the rows dropped by ``on_bad_row='skip'``
    (``bad_rows_dropped``) and those dropped for having no supervised token (``rows_dropped_unsupervised``),
    and the assistant turns that carry loss but have nothing to write (``empty_assistant_turns``: no
    content, reasoning or tool call; each trains only its end-of-turn marker where the template writes one).

    A batch's dropped rows are counted on its first kept row: the one place a ``datasets.map`` keeps,
    whatever ``num_proc`` and the cache do. A batch that kept no row leaves no count; given the source's
    row count (``source_rows``), its rows are the ones no count explains: ``rows_dropped_in_empty_batches``
    (tokenize's warnings named their causes when it ran; ``whileai_datasets.audit`` counts each cause over a
    dataset, and a smaller ``batch_size`` leaves fewer such batches). With ``truncation="split_turns"`` a
    row can become several: the rows then count pieces, and the source's row count explains nothing."""
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
        "naive_over_masked": naive_ratio(tokens, supervised),
        "rows_truncated": int(pc.sum(pc.greater(table["tokens_truncated"], 0)).as_py() or 0) if table.num_rows else 0,
        "tokens_truncated": total("tokens_truncated"),
        "supervised_tokens_truncated": total("supervised_tokens_truncated"),
    }
    report["bad_rows_dropped"] = total("bad_rows_dropped") if "bad_rows_dropped" in table.column_names else 0
    counted = UNSUPERVISED_COLUMN in table.column_names
    if counted:
        report["rows_dropped_unsupervised"] = total(UNSUPERVISED_COLUMN)
    if "mask_method" in table.column_names and table.num_rows:
        counts = pc.value_counts(table["mask_method"]).to_pylist()
        report["mask_methods"] = {item["values"]: item["counts"] for item in counts}
    else:
        report["mask_methods"] = {}
    report["empty_assistant_turns"] = empty_assistant_turns(table)
    if source_rows is not None:
        unexplained = source_rows - table.num_rows - report["bad_rows_dropped"]
        if counted or not table.num_rows:  # what the kept rows' counts leave: the rows of batches that kept none
            report.setdefault("rows_dropped_unsupervised", 0)
            report["rows_dropped_in_empty_batches"] = unexplained - report["rows_dropped_unsupervised"]
        else:  # rows tokenized before the unsupervised count rode beside the bad one (a cache of then)
            report["rows_dropped_unsupervised"] = unexplained
            report["rows_dropped_in_empty_batches"] = 0
    return report


def _is_empty(flat: Any, name: str) -> Any:
    """Per message: whether field ``name`` is missing, null or of length 0 (True where the field is absent)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if name not in {field.name for field in flat.type}:
        return pa.array([True] * len(flat), pa.bool_())
    values = pc.struct_field(flat, name)
    if pa.types.is_list(values.type) or pa.types.is_large_list(values.type):
        length = pc.list_value_length(values)
    elif pa.types.is_string(values.type) or pa.types.is_large_string(values.type):
        length = pc.utf8_length(values)
    else:
        return pc.is_null(values)
    return pc.fill_null(pc.equal(length, 0), True)


def empty_assistant_turns(table: Any) -> int:
    """Assistant messages with loss and nothing to write, counted over the whole table (column-wise)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not table.num_rows or "messages" not in table.column_names or "loss_mask" not in table.column_names:
        return 0
    messages = pc.list_flatten(table["messages"])
    if isinstance(messages, pa.ChunkedArray):
        messages = messages.combine_chunks()
    flags = pc.list_flatten(table["loss_mask"])
    if len(flags) != len(messages) or not pa.types.is_struct(messages.type):
        return 0  # not canonical rows (a loss_mask entry per message): nothing to count
    empty = pc.and_(pc.equal(pc.struct_field(messages, "role"), "assistant"), pc.equal(pc.cast(flags, pa.int8()), 1))
    for name in ("content", "parts", "tool_calls", "reasoning_content"):
        empty = pc.and_(empty, _is_empty(messages, name))
    return int(pc.sum(pc.cast(pc.fill_null(empty, False), pa.int64())).as_py() or 0)
