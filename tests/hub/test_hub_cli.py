"""`whileai-datasets push SOURCE REPO_ID`, through the same argparse wiring the main console entry uses.

Functions without a `test_` prefix run in a client process (see conftest: `Identity.run`).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

import whileai_datasets
from whileai_datasets.cli import push as hub_cli
from whileai_datasets.errors import PublishError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="whileai-datasets")
    hub_cli.add_parser(parser.add_subparsers(dest="command", required=True))
    return parser


# --- client side ---------------------------------------------------------------------------------
def push(argv: list[str]) -> dict[str, Any]:
    import contextlib
    import io

    args = _parser().parse_args(["push", *argv])
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = args.run(args)
    return {"code": code, "stdout": out.getvalue(), "stderr": err.getvalue()}


def load_groups(repo_id: str, token: str, key: str) -> dict[str, list[str]]:
    from datasets import load_dataset

    return {name: sorted(set(split[key])) for name, split in load_dataset(repo_id, "canonical", token=token).items()}


# --- tests ---------------------------------------------------------------------------------------
def test_push_publishes_a_parquet_file_split_by_key_and_prints_json(alice, hub, repo_id, rollouts, tmp_path):
    source = tmp_path / "rows.parquet"
    rollouts["train"].to_parquet(str(source))
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"n": 4, "format": "openai", "mask_mode": "assistant"}))
    alice.env_token = True

    done = alice.run(push, argv=[str(source), repo_id, "--split-by", "scenario_id", "--test-size", "0.5",
                                 "--report", str(report), "--json"])

    result = json.loads(done["stdout"])
    groups = alice.run(load_groups, repo_id=repo_id, token=alice.token, key="scenario_id")
    assert done["code"] == 0
    assert result["private"] is True
    assert result["configs"]["canonical"] == {"train": 2, "holdout": 2}
    assert result["trainers"]["llama-factory"] == {"config": "sharegpt", "rows": 8, "exact": True, "inexact": {},
                                                   "unit": "rows (one per marked turn)"}
    assert result["commit"] == hub.head(repo_id, alice.token)
    assert sorted(groups) == ["holdout", "train"]
    assert not set(groups["train"]) & set(groups["holdout"])


def load_decoded(repo_id: str, token: str) -> dict[str, Any]:
    from datasets import load_dataset

    loaded = load_dataset(repo_id, "canonical", token=token)
    return {"features": repr(loaded["train"].features["messages"]), "first": loaded["train"][0]["messages"][0],
            "rows": {name: split.num_rows for name, split in loaded.items()}}


def test_push_reads_a_whileai_jsonl_export_through_the_builder(alice, repo_id):
    sample = Path(whileai_datasets.__file__).parent / "data" / "sample.jsonl.gz"
    alice.env_token = True

    done = alice.run(push, argv=[str(sample), repo_id, "--split-by", "scenario_id", "--test-size", "0.2"])
    loaded = alice.run(load_decoded, repo_id=repo_id, token=alice.token)

    assert done["code"] == 0, done["stderr"]
    assert done["stdout"].startswith(f"Published {repo_id} (private; train ")
    assert "  configs  default: train " in done["stdout"] and "; canonical: train " in done["stdout"]
    assert loaded["features"] == "List(Json(decode=True))"
    assert None not in loaded["first"].values()  # one Json object per message: no invented None keys
    assert sum(loaded["rows"].values()) == 72


def test_push_without_a_token_exits_1_with_the_reason(anonymous, hub, saved_rollouts):
    mark = hub.mark()

    done = anonymous.run(push, argv=[saved_rollouts, "alice/never-pushed"])

    assert done["code"] == 1
    assert done["stderr"].startswith("whileai-datasets push: publish(token=None): no Hugging Face token was found")
    assert hub.requests(mark) == []


def test_push_refuses_split_by_on_a_source_that_already_has_splits(saved_rollouts, capsys):
    args = _parser().parse_args(["push", saved_rollouts, "alice/x", "--split-by", "scenario_id"])

    assert hub_cli.run(args) == 1
    assert "--split-by needs one table, but SOURCE already has splits ['holdout', 'train']" in capsys.readouterr().err


def test_load_source_rejects_an_unknown_file_type(tmp_path):
    source = tmp_path / "rows.csv"
    source.write_text("a,b\n1,2\n")

    with pytest.raises(PublishError, match=r"rows\.csv: expected a \.parquet, \.jsonl or \.json file, got \.csv"):
        hub_cli.load_source(source)


def test_load_source_reports_a_missing_path(tmp_path):
    with pytest.raises(PublishError, match=r"missing\.parquet: SOURCE does not exist"):
        hub_cli.load_source(tmp_path / "missing.parquet")


def export_and_push(source: str, output: str, repo_id: str) -> dict[str, Any]:
    import whileai_datasets as package

    report = package.export_dataset(source, output, format="trl", mask_mode="final", validate=False, push_to=repo_id)
    return dict(report["hub"])


def publish_from_python(source: str, repo_id: str) -> dict[str, Any]:
    import whileai_datasets as package

    return dict(package.publish_rollouts(source, repo_id, mask_mode="final"))


def repo_view(repo_id: str, token: str) -> dict[str, Any]:
    """What a reader sees: the files, the card's configs and headings, the default config's rows."""
    from datasets import load_dataset
    from huggingface_hub import DatasetCard, HfApi, hf_hub_download

    card = DatasetCard.load(hf_hub_download(repo_id, "README.md", repo_type="dataset", token=token))
    rows = load_dataset(repo_id, split="train", token=token)
    return {"files": sorted(HfApi(token=token).list_repo_files(repo_id, repo_type="dataset")),
            "configs": card.data.to_dict()["configs"],
            "headings": [line for line in card.text.splitlines() if line.startswith(("## ", "### `"))],
            "rows": list(rows.select_columns(["prompt", "completion"]))}


def test_push_publish_rollouts_and_export_push_to_make_the_same_repo(alice, tmp_path):
    from tests.conftest import seeded_rows, write_jsonl

    source = write_jsonl(tmp_path / "run.jsonl", seeded_rows(seed=2, mode="rl", budget=12))
    alice.login()
    name = tmp_path.name[-8:]
    exported, pushed, python = f"alice/exported-{name}", f"alice/pushed-{name}", f"alice/python-{name}"
    alice.run(export_and_push, source=str(source), output=str(tmp_path / "train.jsonl"), repo_id=exported)
    done = alice.run(push, argv=[str(source), pushed, "--mask-mode", "final"])
    published = alice.run(publish_from_python, source=str(source), repo_id=python)

    one, *others = alice.run_each(*((repo_view, {"repo_id": repo, "token": alice.token})
                                    for repo in (exported, pushed, python)))
    assert done["code"] == 0, done["stderr"]
    assert published["repo_id"] == python and published["private"] is True
    assert [c["config_name"] for c in one["configs"]] == ["default", "canonical", "messages", "sharegpt"]
    assert all(len(row["completion"]) == 1 for row in one["rows"])
    for other in others:
        assert one["files"] == other["files"]
        assert one["configs"] == other["configs"]
        assert one["headings"] == other["headings"]
        assert one["rows"] == other["rows"]


def read_card_and_plots(repo_id: str, token: str) -> dict[str, Any]:
    from huggingface_hub import HfApi, hf_hub_download

    files = HfApi(token=token).list_repo_files(repo_id, repo_type="dataset")
    card = Path(hf_hub_download(repo_id, "README.md", repo_type="dataset", token=token)).read_text(encoding="utf-8")
    plots = {f: Path(hf_hub_download(repo_id, f, repo_type="dataset", token=token)).read_text(encoding="utf-8")
             for f in files if f.startswith("card/")}
    return {"card": card, "plots": plots}


def test_push_audit_puts_what_each_split_trains_on_the_card_with_its_plots(alice, repo_id, tmp_path):
    import gzip

    from tests.support.tiny_lm import train_tokenizer, trl_template

    sample = Path(whileai_datasets.__file__).parent / "data" / "sample.jsonl.gz"
    texts = gzip.open(sample, "rt", encoding="utf-8").read().splitlines()
    train_tokenizer(texts, chat_template=trl_template("qwen2_5"), vocab_size=800).save_pretrained(str(tmp_path / "tok"))
    alice.env_token = True

    done = alice.run(push, argv=[str(sample), repo_id, "--split-by", "scenario_id", "--test-size", "0.2", "--audit",
                                 "--tokenizer", str(tmp_path / "tok")])
    seen = alice.run(read_card_and_plots, repo_id=repo_id, token=alice.token)

    assert done["code"] == 0, done["stderr"]
    card = seen["card"]
    assert "## What each split trains (whileai-datasets audit)" in card
    audited = [line for line in card.splitlines() if line.startswith(("- train: ", "- holdout: "))]
    assert len(audited) == 2 and all("`max_length=" in line and "`strip_think=" in line for line in audited)
    table = {line.split("|")[1].strip(): [cell.strip() for cell in line.split("|")[2:-1]]
             for line in card.splitlines() if line.startswith(("| train |", "| holdout |"))}
    assert sum(int(cells[0].replace(",", "")) for cells in table.values()) == 72
    assert all(int(cells[2].replace(",", "")) > 0 for cells in table.values())  # supervised tokens counted
    expected = {f"card/audit/{split}-{plot}.svg" for split in ("train", "holdout")
                for plot in ("supervised_share", "lengths")}
    assert set(seen["plots"]) == expected
    assert all(svg.startswith("<svg") for svg in seen["plots"].values())
    assert all(f"]({path})" in card for path in expected)


def command(argv: list[str]) -> dict[str, Any]:
    import contextlib
    import io

    from whileai_datasets import cli

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(argv)
    return {"code": code, "stdout": out.getvalue(), "stderr": err.getvalue()}


def test_audit_and_show_mask_read_a_published_repo_by_name(alice, repo_id, tmp_path, capsys):
    """The repo's canonical rows are the rows as exported: auditing them by name counts what auditing the
    rollouts they came from counts (think blocks already stripped on the way in), and show-mask shows the
    same tokens."""
    from tests.support.tiny_lm import train_tokenizer, trl_template
    from whileai_datasets import audit, cli

    sample = Path(whileai_datasets.__file__).parent / "data" / "sample.jsonl.gz"
    alice.env_token = True
    assert alice.run(push, argv=[str(sample), repo_id])["code"] == 0

    done = alice.run(command, argv=["audit", repo_id, "--json", "--fail-on", "zero-loss"])
    assert done["code"] == 0, done["stderr"]
    remote = json.loads(done["stdout"])
    local = audit(str(sample)).to_dict()
    assert remote["source"] == f"hf://datasets/{repo_id} (config 'canonical', split 'train')"
    assert (remote["rows"], remote["training_rows"]) == (local["rows"], local["training_rows"]) == (72, 72)
    counted = {name: found["rows"] for name, found in remote["findings"].items()}
    assert counted == {name: found["rows"] for name, found in local["findings"].items()
                       if name not in ("think_stripped", "emptied_by_think")} | {
        "think_stripped": 0, "emptied_by_think": 0}  # stripped when pushed
    assert remote["roles"] == local["roles"]

    import gzip

    texts = gzip.open(sample, "rt", encoding="utf-8").read().splitlines()
    train_tokenizer(texts, chat_template=trl_template("qwen2_5"), vocab_size=600).save_pretrained(str(tmp_path / "tok"))
    shown = ["--tokenizer", str(tmp_path / "tok"), "--rows", "2", "--row", "3", "--json"]
    remote_rows = alice.run(command, argv=["show-mask", f"hf://datasets/{repo_id}", *shown])
    assert remote_rows["code"] == 0, remote_rows["stderr"]
    assert cli.main(["show-mask", str(sample), *shown]) == 0
    local_rows = json.loads(capsys.readouterr().out)
    assert json.loads(remote_rows["stdout"]) == local_rows and all(r["supervised"] > 0 for r in local_rows)

    wrong = alice.run(command, argv=["audit", f"hf://datasets/{repo_id}", "--split", "nope"])
    assert wrong["code"] == 1 and "no split 'nope' (splits: train)" in wrong["stderr"]
    missing = alice.run(command, argv=["audit", "alice/no-such-repo"])
    assert missing["code"] == 1 and "no Hub dataset 'alice/no-such-repo'" in missing["stderr"]
