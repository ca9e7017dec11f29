"""The export route under salvage: ``export_dataset`` renders nothing (it takes no tokenizer or template), so what
its file trains is decided where it is tokenized. Its rows, read back with ``load_dataset("whileai/export")`` and
tokenized with ``salvage=True``, train exactly what the source rows train through ``load_dataset`` + ``tokenize``
with the same option and template: the tool rows Llama 3.1 and Gemma 3 cannot take whole are salvaged the same way,
whether they reach the template from the source or from the export's OpenAI-shaped file."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import write_jsonl
from tests.support.salvage_rows import REFUSED, ROWS, salvage_tokenizer
from whileai_datasets import export_dataset
from whileai_datasets.tokenize.notices import SalvagedRowsWarning
from whileai_datasets.tokenize.token_masks import tokenize

TOKENS = ("input_ids", "attention_mask", "assistant_masks", "num_supervised_tokens")


def _tokenized(path: Path, tokenizer: Any, cache: Path) -> list[dict[str, Any]]:
    import datasets

    ds = datasets.load_dataset("whileai/export", data_files=str(path), split="train", cache_dir=str(cache))
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always", SalvagedRowsWarning)
        table = tokenize(tokenizer, salvage=True)(ds.with_format("arrow")[:])
    assert any(issubclass(w.category, SalvagedRowsWarning) for w in said)
    return table.select(list(TOKENS)).to_pylist()


@pytest.mark.parametrize("name", list(REFUSED))
def test_the_exported_file_tokenized_with_salvage_trains_what_the_source_does(name: str, tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "rows.jsonl", ROWS)
    report = export_dataset(str(source), str(tmp_path / "out.jsonl"), strip_think=False)  # load_dataset's default
    assert report["n"] == len(ROWS)
    tokenizer = salvage_tokenizer(name)
    exported = _tokenized(tmp_path / "out.jsonl", tokenizer, tmp_path / "cache")
    assert exported == _tokenized(source, tokenizer, tmp_path / "cache")
    assert len(exported) == len(ROWS)  # no conversation lost whole
