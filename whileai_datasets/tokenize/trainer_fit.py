"""Whether a trainer keeps what ``tokenize`` made: its own ``max_length`` against the rows' lengths.

``tokenize(tok, max_length=L)`` cuts rows to L tokens, and the audit counts what trains at L; a trainer
given a smaller limit cuts again, in silence (TRL's ``SFTConfig()`` defaults to 1024). ``check_max_length``
reads the tokenized rows (``input_ids`` and ``assistant_masks``, or ``labels``) and says how many rows
the trainer's limit cuts and how many supervised tokens go with them, with a ``TrainerCutWarning``.
The limit the rows were tokenized with is read back from them too: ``tokenize`` records it in every row
(``tokenized_max_length``), and every row it cut holds exactly ``max_length`` tokens (``tokens_truncated`` > 0).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from whileai_datasets.errors import SchemaError
from whileai_datasets.tokenize.token_columns import LIMIT_COLUMN

__all__ = ["TrainerCutWarning", "check_max_length"]


class TrainerCutWarning(UserWarning):
    """The trainer's ``max_length`` is shorter than rows of the tokenized dataset: it cuts them again, and
    trains fewer tokens than ``tokenize``, ``mask_report`` and the audit count."""


def _limit(trainer: Any) -> int | None:
    """``max_length`` of an int / None, an ``SFTConfig`` or a trainer holding one (``.args``)."""
    if trainer is None or isinstance(trainer, int):
        return trainer
    args = getattr(trainer, "args", trainer)
    if not hasattr(args, "max_length"):
        raise SchemaError(f"expected a max_length (int or None), an SFTConfig or an SFTTrainer, got "
                          f"{type(trainer).__name__}", location="check_max_length",
                          hint="Pass the SFTConfig you will train with: check_max_length(tokenized, args).")
    return args.max_length  # type: ignore[no-any-return]


def _table(dataset: Any) -> pa.Table:
    data = getattr(dataset, "data", dataset)  # a Dataset's Arrow table (indices applied below)
    table = getattr(data, "table", data)
    if not isinstance(table, pa.Table):
        raise SchemaError(f"expected a tokenized Dataset or pyarrow Table, got {type(dataset).__name__}",
                          location="check_max_length", hint="Pass the dataset tokenize made.")
    indices = getattr(dataset, "_indices", None)
    if indices is not None:  # a selected or shuffled Dataset: its rows, not the whole table's
        table = table.take(indices.column(0))
    return table


def check_max_length(dataset: Any, trainer: Any) -> dict[str, Any]:
    """What a trainer's ``max_length`` cuts from tokenized rows; warns (``TrainerCutWarning``) when it cuts.

    Args:
        dataset: The rows ``tokenize`` made (``input_ids`` plus ``assistant_masks`` or ``labels``), as a
            ``Dataset`` or ``pyarrow.Table``; extra columns are ignored.
        trainer: The trainer's limit: an int (None: no limit), an ``SFTConfig`` or an ``SFTTrainer``.
    Returns:
        ``{"trainer_max_length", "tokenized_max_length" (recorded by ``tokenize``, or read from the rows it
        cut; None when neither tells, or the rows were tokenized without a limit),
        "longest", "rows", "rows_cut", "supervised_tokens", "supervised_tokens_cut"}``.
    Raises:
        SchemaError: the rows have no ``input_ids`` or no mask, or ``trainer`` has no ``max_length``.
    Example:
        >>> check_max_length(train, SFTConfig(output_dir="sft", max_length=4096))  # doctest: +SKIP
    """
    limit = _limit(trainer)
    table = _table(dataset)
    mask_name = next((n for n in ("assistant_masks", "labels") if n in table.column_names), None)
    if "input_ids" not in table.column_names or mask_name is None:
        raise SchemaError(f"the rows have no 'input_ids' and 'assistant_masks' (or 'labels') columns (they have "
                          f"{table.column_names})", location="check_max_length",
                          hint="Pass the dataset tokenize made, before any column is dropped from it.")
    lengths = pc.list_value_length(table.column("input_ids")).to_numpy(zero_copy_only=False).astype(np.int64)
    masks = table.column(mask_name).combine_chunks()
    values = masks.flatten().to_numpy(zero_copy_only=False)
    trained = values != -100 if mask_name == "labels" else values != 0
    offsets = masks.offsets.to_numpy().astype(np.int64)
    starts = np.repeat(offsets[:-1] - offsets[0], np.diff(offsets))
    position = np.arange(len(values)) - starts
    cut = trained & (position >= limit) if limit is not None else np.zeros(len(values), dtype=bool)
    report = {"trainer_max_length": limit, "tokenized_max_length": _tokenized_limit(table),
              "longest": int(lengths.max()) if len(lengths) else 0, "rows": table.num_rows,
              "rows_cut": int((lengths > limit).sum()) if limit is not None else 0,
              "supervised_tokens": int(trained.sum()), "supervised_tokens_cut": int(cut.sum())}
    if report["rows_cut"]:
        _warn(report)
    return report


def _tokenized_limit(table: pa.Table) -> int | None:
    """The ``max_length`` the rows were tokenized with: recorded in them (``LIMIT_COLUMN``), else read from
    the rows ``tokenize`` cut (each holds exactly ``max_length`` tokens); None when neither tells."""
    recorded = table.column(LIMIT_COLUMN) if LIMIT_COLUMN in table.column_names else None
    if recorded is not None and table.num_rows and not pa.types.is_null(recorded.type):
        most = pc.max(recorded).as_py()  # (datasets concatenated from several tokenize runs: the largest)
        if most is not None:
            return int(most)
    if "tokens_truncated" not in table.column_names or "num_tokens" not in table.column_names:
        return None
    cut = table.filter(pc.greater(table.column("tokens_truncated"), 0))
    return int(pc.max(cut.column("num_tokens")).as_py()) if cut.num_rows else None


def _warn(report: dict[str, Any]) -> None:
    tokenized = report["tokenized_max_length"]
    fix = (f"pass SFTConfig(max_length={tokenized}), the max_length the rows were tokenized with"
           if tokenized is not None else f"pass SFTConfig(max_length={report['longest']}) (the longest row) or None")
    warnings.warn(
        f"the trainer's max_length={report['trainer_max_length']} cuts {report['rows_cut']:,} of "
        f"{report['rows']:,} tokenized rows (the longest holds {report['longest']:,} tokens) and "
        f"{report['supervised_tokens_cut']:,} of their {report['supervised_tokens']:,} supervised tokens: it "
        f"trains less than tokenize, mask_report and the audit count. To train what they count, {fix}, or "
        f"tokenize with max_length={report['trainer_max_length']}.",
        TrainerCutWarning, stacklevel=2)
