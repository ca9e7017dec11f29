"""``mask_report`` after ``ds.map(tokenize(...), batched=True)``: every dropped row is counted, a batch that
kept no row included, whether the map ran in one process or two, and whether its output came from the cache.

The rows are made here so that which row is bad (a private-use character the renderer refuses) and which
trains nothing (a loss mask of zeros) is known by construction, and so which batch keeps none.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest

from whileai_datasets.tokenize import mask_report
from whileai_datasets.tokenize.token_masks import tokenize

#: Per batch of 3: "g" a row that trains, "b" a bad row, "u" a row that trains nothing.
BATCHES = ["bbb", "gbu", "uuu", "bgg", "ubb", "ggg"]
BATCH_SIZE = 3


def _row(i: int, kind: str) -> dict[str, Any]:
    content = f"answer {i}" if kind != "b" else f"answer \ue000 {i}"
    return {"messages": [{"role": "user", "content": f"question {i}"}, {"role": "assistant", "content": content}],
            "loss_mask": [0, 0 if kind == "u" else 1]}


def _dataset(tmp_path: Path | None) -> Any:
    import datasets

    rows = [_row(i, kind) for i, kind in enumerate("".join(BATCHES))]
    if tmp_path is None:
        return datasets.Dataset.from_list(rows)
    path = tmp_path / "rows.jsonl"  # from a file: the map's output is cached beside it
    path.write_text("\n".join(__import__("json").dumps(r) for r in rows) + "\n", encoding="utf-8")
    return datasets.load_dataset("json", data_files=str(path), split="train", cache_dir=str(tmp_path / "cache"))


def _expected() -> dict[str, int]:
    """What the batches hold, by construction: a batch with a kept row counts its own drops; one with none
    (no "g") is counted whole in rows_dropped_in_empty_batches."""
    kept = [b for b in BATCHES if "g" in b]
    return {"rows": "".join(BATCHES).count("g"),
            "bad_rows_dropped": sum(b.count("b") for b in kept),
            "rows_dropped_unsupervised": sum(b.count("u") for b in kept),
            "rows_dropped_in_empty_batches": sum(len(b) for b in BATCHES if "g" not in b)}


def _report(ds: Any, transform: Any, num_proc: int | None) -> dict[str, Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # each batch warns; the warnings are tested elsewhere
        out = ds.map(transform, batched=True, batch_size=BATCH_SIZE, num_proc=num_proc)
    report = mask_report(out, len(ds))
    return {key: report[key] for key in _expected()}


@pytest.mark.parametrize("num_proc", [None, 2])
def test_a_batch_that_keeps_no_row_is_still_counted(qwen_tokenizer: Any, tmp_path: Path,
                                                    num_proc: int | None) -> None:
    transform = tokenize(qwen_tokenizer, on_bad_row="skip")
    ds = _dataset(tmp_path)
    assert _report(ds, transform, num_proc) == _expected()
    again = tokenize(qwen_tokenizer, on_bad_row="skip")  # an equal transform: datasets reads the cache
    assert _report(ds, again, num_proc) == _expected()
    total = sum(v for k, v in _expected().items() if k != "rows")
    assert total == len(ds) - _expected()["rows"]  # every dropped row is in one count


def test_every_row_dropped_is_counted_in_empty_batches(qwen_tokenizer: Any) -> None:
    ds = _dataset(None).select(range(BATCH_SIZE))  # "bbb": the whole dataset drops
    report = _report(ds, tokenize(qwen_tokenizer, on_bad_row="skip"), None)
    assert report == {"rows": 0, "bad_rows_dropped": 0, "rows_dropped_unsupervised": 0,
                      "rows_dropped_in_empty_batches": BATCH_SIZE}


def test_the_warning_of_a_batch_that_keeps_no_row_says_where_it_is_counted(qwen_tokenizer: Any) -> None:
    from whileai_datasets.tokenize.token_masks import BadMaskRowsWarning

    ds = _dataset(None).select(range(2 * BATCH_SIZE))
    with pytest.warns(BadMaskRowsWarning) as caught:
        ds.map(tokenize(qwen_tokenizer, on_bad_row="skip"), batched=True, batch_size=BATCH_SIZE)
    said = [str(w.message) for w in caught if issubclass(w.category, BadMaskRowsWarning)]
    assert len(said) == 2
    assert "keeps no row to carry the count" in said[0] and "rows_dropped_in_empty_batches" in said[0]
    assert "mask_report counts them as bad_rows_dropped" in said[1]
