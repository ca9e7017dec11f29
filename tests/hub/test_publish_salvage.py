"""``publish(..., salvage=True)``: the `tokenized` and default configs train what the chat template takes of a row it
cannot take whole, as ``tokenize(salvage=True)`` does, and the card names what was salvaged with the audit's figures.

Tool rows that Llama 3.1 (text beside a call) and Gemma 3 (the tool role) cannot take whole are published with a
tokenizer carrying each template to the local hub, then read back through the real clients. Functions without a
``test_`` prefix run in a client process (conftest: ``Identity.run``).
"""

from __future__ import annotations

import json
import uuid
import warnings
from typing import Any

import pytest

from tests.conftest import write_jsonl
from tests.support.salvage_rows import CUT, REFUSED, ROWS, salvage_tokenizer

CONFIGS = ("default", "tokenized")


# --- client side ---------------------------------------------------------------------------------
def publish_and_read(cases: list[dict[str, str]], token: str) -> list[dict[str, Any]]:
    """Each case's saved rows published with its tokenizer and salvage, then its card and trainer-ready configs read
    back (one client process for every case)."""
    from datasets import load_dataset, load_from_disk
    from huggingface_hub import DatasetCard, hf_hub_download
    from transformers import AutoTokenizer

    from whileai_datasets.hub import publish

    out = []
    for case in cases:
        repo_id = case["repo_id"]
        result = publish(load_from_disk(case["rows"]), repo_id, token=token, salvage=True,
                         tokenizer=AutoTokenizer.from_pretrained(case["tokenizer"]))
        card = DatasetCard.load(hf_hub_download(repo_id, "README.md", repo_type="dataset", token=token))
        back = {name: load_dataset(repo_id, None if name == "default" else name, split="train", token=token).to_list()
                for name in CONFIGS}
        out.append({"trainers": result["trainers"], "card": " ".join(str(card.text).split()), **back})
    return out


# --- the test machine ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def published(cases: dict[str, dict[str, Any]], hub: Any, tmp_path_factory: pytest.TempPathFactory
              ) -> dict[str, dict[str, Any]]:
    from tests.hub.conftest import TOKENS, Identity

    alice = Identity("alice", TOKENS["alice"], tmp_path_factory.mktemp("alice"), hub)
    listed = [{"rows": case["rows"], "tokenizer": case["tokenizer"],
               "repo_id": f"alice/salvage-{name}-{uuid.uuid4().hex[:8]}"} for name, case in cases.items()]
    return dict(zip(cases, alice.run(publish_and_read, cases=listed, token=alice.token)))


@pytest.fixture(scope="module")
def cases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    import datasets

    from whileai_datasets import audit
    from whileai_datasets.tokenize.notices import SalvagedRowsWarning
    from whileai_datasets.tokenize.token_masks import tokenize

    root = tmp_path_factory.mktemp("publish-salvage")
    path = write_jsonl(root / "rows.jsonl", ROWS)
    ds = datasets.load_dataset("whileai/export", data_files=str(path), split="train", cache_dir=str(root / "cache"))
    ds.save_to_disk(str(root / "rows"))
    out = {}
    for name in REFUSED:
        tokenizer = salvage_tokenizer(name)
        tokenizer.save_pretrained(str(root / name))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SalvagedRowsWarning)
            tokenized = tokenize(tokenizer, salvage=True)(ds.with_format("arrow")[:])
        out[name] = {"rows": str(root / "rows"), "tokenizer": str(root / name), "tokenized": tokenized.to_pylist(),
                     "audit": audit(ds, tokenizer=tokenizer, salvage=True, trl_default=True)}
    return out


@pytest.mark.parametrize("name", list(REFUSED))
def test_publish_with_salvage_trains_what_the_audit_with_salvage_counts(name: str, cases: dict[str, Any],
                                                                        published: dict[str, Any]) -> None:
    case, found = cases[name], published[name]
    audited = case["audit"]
    supervised = audited.supervised_tokens
    # the tokenized config: tokenize(salvage=True)'s rows, every conversation kept, the audit's count
    assert [(r["input_ids"], r["assistant_masks"]) for r in found["tokenized"]] == \
        [(r["input_ids"], r["assistant_masks"]) for r in case["tokenized"]]
    assert len(found["tokenized"]) == len(ROWS) and sum(map(sum, (r["assistant_masks"] for r in found["tokenized"]))) \
        == supervised
    card = found["card"]
    assert f"**exact**, the {supervised} tokens the mask marks" in card
    refused = REFUSED[name]
    cut = audited.to_dict()["findings"]["salvaged"]["amount"]
    assert cut == CUT[name] * len(refused)  # Gemma 3: the call turn and its answer; Llama 3.1: the call turn
    assert (f"Salvaged (`salvage=True`): {len(refused)} conversations the chat template cannot take whole train what "
            "it takes of them") in card and f"their {cut} loss-carrying turns kept as context or cut" in card
    # the default config: no turn salvage does not train; TRL's figure is the audit's
    route, ours = found["trainers"]["trl-default"], audited.trainers["trl-default"]
    assert len(found["default"]) == 3 * 4 + 1 - cut  # 3 marked turns a tool row, 1 the plain row
    assert (route["rows"], route["exact"], route["how"]) == (ours["rows"], ours["exact"], ours["how"])
    assert route["how"] == f"exact: TRL labels {supervised} tokens, the {supervised} the mask marks"
    assert f"**Exact**: TRL labels {supervised} tokens" in card
    for i in range(4):  # a salvaged row's completions: the turns it trains (Gemma 3: its first exchange only)
        turns = [r for r in found["default"] if _message(r["prompt"][0])["content"] == f"parcel {i} is late"]
        assert len(turns) == (3 - CUT[name] if i in refused else 3)
        if i in refused and name == "llama3_1":  # the call turn is context: in the answer's prompt, not a completion
            assert [_message(t["completion"][0])["content"] for t in turns] == [f"sorry about parcel {i}",
                                                                      f"parcel {i} waits at depot {i + 3}"]



def _message(value: Any) -> dict[str, Any]:
    """A message of the default config as read back: datasets 4.7 hands a Json value inside a list back as its
    JSON text, later releases as the object."""
    return json.loads(value) if isinstance(value, str) else value

def test_publish_refuses_salvage_without_a_tokenizer_before_anything_is_sent(cases: dict[str, Any]) -> None:
    from datasets import load_from_disk

    from whileai_datasets.errors import PublishError
    from whileai_datasets.hub import publish

    rows = load_from_disk(cases["gemma3"]["rows"])
    with pytest.raises(PublishError, match=r"salvage=True keeps the turns before one the chat template cannot take"):
        publish(rows, "alice/never", token="no-such-token", salvage=True)


def test_push_salvage_without_a_tokenizer_names_the_flags(cases: dict[str, Any],
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    from whileai_datasets import cli

    assert cli.main(["push", cases["gemma3"]["rows"], "alice/never", "--salvage"]) == 1
    said = capsys.readouterr().err
    assert "--salvage keeps the turns before one the chat template cannot take, and no tokenizer was given" in said
    assert "Pass --tokenizer (the one you will train with), or drop --salvage." in said
