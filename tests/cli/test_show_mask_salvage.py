"""``show-mask --salvage`` shows what ``tokenize(salvage=True)`` trains: the same tokens marked, row by row, on
tool rows Llama 3.1 and Gemma 3 cannot take whole, and a note naming what was kept and cut."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import write_jsonl
from tests.support.salvage_rows import REFUSED, ROWS, SALVAGED, salvage_tokenizer
from whileai_datasets import cli
from whileai_datasets.tokenize.notices import SalvagedRowsWarning
from whileai_datasets.tokenize.token_masks import tokenize


@pytest.fixture(scope="module", params=list(REFUSED))
def setting(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    import datasets

    root = tmp_path_factory.mktemp("show-mask-salvage")
    tokenizer = salvage_tokenizer(request.param)
    tokenizer.save_pretrained(str(root / "tok"))
    path = write_jsonl(root / "rows.jsonl", ROWS)
    ds = datasets.load_dataset("whileai/export", data_files=str(path), split="train", cache_dir=str(root / "cache"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SalvagedRowsWarning)
        tokenized = tokenize(tokenizer, salvage=True)(ds.with_format("arrow")[:]).to_pylist()
    return {"name": request.param, "tokenizer": tokenizer, "path": path, "tok": root / "tok", "tokenized": tokenized}


def _show(capsys: pytest.CaptureFixture[str], setting: dict[str, Any], *more: str) -> tuple[int, str, str]:
    code = cli.main(["show-mask", str(setting["path"]), "--tokenizer", str(setting["tok"]), "--no-color", *more])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_show_mask_with_salvage_marks_the_tokens_tokenize_trains(setting: dict[str, Any],
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _show(capsys, setting, "--rows", str(len(ROWS)), "--salvage", "--json")
    assert code == 0
    shown, tokenizer = json.loads(out), setting["tokenizer"]
    assert [row["row"] for row in shown] == list(range(len(ROWS)))
    for row, tokenized in zip(shown, setting["tokenized"]):
        ids, mask = tokenized["input_ids"], tokenized["assistant_masks"]
        assert (row["tokens"], row["supervised"]) == (len(ids), sum(mask))
        assert "".join(run["text"] for run in row["runs"]) == tokenizer.decode(ids)  # the same render
        trained = tokenizer.decode([i for i, m in zip(ids, mask) if m])
        assert "".join(run["text"] for run in row["runs"] if run["supervised"]) == trained
        salvaged = [note for note in row["notes"] if note.startswith("salvaged (--salvage)")]
        assert len(salvaged) == (row["row"] in REFUSED[setting["name"]])
        if salvaged:
            said, later = SALVAGED[setting["name"]]
            assert salvaged[0].endswith(said)
            assert f"sorry about parcel {row['row']}" in trained and "checking the depot" not in trained
            assert (later in trained) if later else "depot" not in trained


def test_show_mask_without_salvage_refuses_the_row_the_template_cannot_take(setting: dict[str, Any],
                                                                            capsys: pytest.CaptureFixture[str]) -> None:
    row = REFUSED[setting["name"]][0]
    code, _, err = _show(capsys, setting, "--row", str(row))
    assert code == 1 and f"row {row}: " in err and "row 0, " not in err  # the source's row, once
