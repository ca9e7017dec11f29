"""The card says what a trainer trains on, keeps datasets' YAML, and records provenance (no server needed)."""

from __future__ import annotations

import hashlib
from importlib import metadata
from pathlib import Path

import pyarrow as pa
import pytest
from datasets import Features, Json, List, Value
from datasets.info import DatasetInfosDict
from huggingface_hub import DatasetCard, DatasetCardData

from whileai_datasets.columnar._portable import portable_features
from whileai_datasets.errors import PublishError
from whileai_datasets.hub import card as card_module
from whileai_datasets.hub import layout
from whileai_datasets.hub.card import SourceFile, describe_mask, hash_sources, package_versions, render_card
from whileai_datasets.hub.configs import Config

FEATURES = Features({"messages": List(Json()), "loss_mask": List(Value("int8")), "tools": Json(),
                     "scenario_id": Value("string")})
VERSIONS = {"whileai": "0.131", "whileai-datasets": "0.1.0", "datasets": "5.2.0", "huggingface_hub": "2.4.0",
            "pyarrow": "26.0.1"}
TRL_EVERY_TOKEN = ("TRL trains on every token of every turn (trl 0.19.1 SFTTrainer reads no per-message mask); set "
                   "assistant_only_loss=True in SFTConfig to train the assistant turns only")


def _table(rows: int) -> pa.Table:
    return pa.table({"messages": pa.array([["{}"]] * rows, pa.list_(pa.string())).cast(pa.list_(pa.json_())),
                     "loss_mask": pa.array([[1]] * rows, pa.list_(pa.int8())),
                     "tools": pa.array([None] * rows, pa.string()).cast(pa.json_()),
                     "scenario_id": pa.array(["s"] * rows, pa.string())})


def _configs() -> list[Config]:
    features = portable_features(_table(1).schema)
    default = Config("default", {"train": 4, "holdout": 2}, features)
    default.facts = {"train": {"rows": 4}, "holdout": {"rows": 2}}
    canonical = Config("canonical", {"train": 4, "holdout": 2}, features)
    canonical.facts = {name: {"rows": n, "messages": n, "assistant_turns": n, "marked_turns": n,
                              "rows_without_marked_turn": 0} for name, n in (("train", 4), ("holdout", 2))}
    return [default, canonical]


def _base() -> DatasetCardData:
    """The card YAML publish builds: dataset_info per config, configs with data files per split."""
    return layout.card_data(_configs())


def _render(**options: object) -> DatasetCard:
    defaults: dict[str, object] = {"repo_id": "alice/rollouts", "private": True, "configs": _configs(),
                                   "versions": VERSIONS}
    return render_card(_base(), **{**defaults, **options})  # type: ignore[arg-type]


def test_card_says_what_trl_trains_on_and_the_supervised_share():
    report = {"n": 6, "format": "trl", "mask_mode": TRL_EVERY_TOKEN, "trained_messages": 30, "masked_messages": 0,
              "groups": 3, "warnings": []}

    text = _render(report=report).text

    assert f"- **Mask:** {TRL_EVERY_TOKEN}." in text
    assert "- **Supervised:** 30 of 30 messages (100.0%) are trained on; 0 are context only" in text
    assert "- **Groups:** 3 distinct `group_id` values" in text
    assert "The export raised no warnings." in text


def test_card_explains_the_loss_mask_of_openai_rows():
    assert describe_mask({"format": "openai", "mask_mode": "final"}) == (
        "`final`: only the last assistant message of each row is a target; earlier turns are context. "
        "The mask is the per-message `loss_mask` column: it only applies if the training code reads it.")


def test_card_without_a_report_says_the_mask_is_unknown():
    text = _render().text

    assert "cannot say which mask mode the\nexport used" in text
    assert "**Mask:**" not in text


def test_card_keeps_the_yaml_datasets_wrote_and_adds_provenance():
    sources = [SourceFile(name="run-07.jsonl", size=26, sha256="ab" * 32)]

    card = _render(split_key="scenario_id", split_groups={"train": 2, "holdout": 1}, sources=sources)
    reloaded = DatasetCard(str(card)).data

    infos = DatasetInfosDict.from_dataset_card_data(reloaded)
    # configs whose features hold Json keep them in their Parquet files only (datasets < 4.7 fails on Json YAML)
    assert infos["default"].features is None and infos["canonical"].features is None
    assert {name: info.splits["train"].num_examples for name, info in infos.items()} == {"default": 4, "canonical": 4}
    assert reloaded["configs"] == _base()["configs"]
    assert reloaded["tags"] == ["whileai"]
    assert reloaded["whileai_datasets"] == {"version": "0.1.0", "whileai": "0.131", "split_key": "scenario_id",
                                            "sources": [{"name": "run-07.jsonl", "sha256": "ab" * 32}]}
    assert "every value of it lives in exactly one split (2 in train, 1 in holdout)" in card.text


def test_card_says_where_the_tool_schemas_of_session_rows_came_from():
    with_sessions = []
    for config in _configs():
        features = Features({**config.features, "agent": Value("string"), "tools_source": Value("string")})
        with_sessions.append(Config(config.name, config.rows, features, facts=config.facts))
    card = str(render_card(layout.card_data(with_sessions), repo_id="alice/rollouts", private=False,
                           configs=with_sessions, versions=VERSIONS))
    provenance = card[card.index("## Provenance"):]
    assert "`tools_source`, where a row's tool schemas came from" in provenance
    for source in ("session", "agent_table", "inferred", "session+inferred", "agent_table+inferred"):
        assert f"`{source}`" in provenance
    assert "tools_source" not in str(_render())  # rows of no session: nothing said


def test_card_yaml_declares_the_features_of_configs_without_json():
    plain = Features({"conversations": List({"from": Value("string"), "value": Value("string")}),
                      "system": Value("string")})
    table = pa.table({"conversations": pa.array([[{"from": "human", "value": "hi"}]], pa.list_(pa.struct(
        [("from", pa.string()), ("value", pa.string())]))), "system": pa.array([""], pa.string())})

    sharegpt = Config("sharegpt", {"train": table.num_rows}, portable_features(table.schema))
    reloaded = DatasetCard(str(render_card(layout.card_data([*_configs(), sharegpt]),
                                           repo_id="alice/rollouts", private=True, configs=_configs(),
                                           versions=VERSIONS))).data

    infos = DatasetInfosDict.from_dataset_card_data(reloaded)
    assert infos["sharegpt"].features == plain
    assert "Json" not in str(reloaded.to_dict()["dataset_info"])


def test_card_shows_tool_output_cuts_and_row_count_mismatch():
    report = {"n": 9, "format": "openai", "mask_mode": "assistant", "tool_output_truncated": 1,
              "tool_output_chars_cut": 1, "max_tool_output_chars": 50}

    text = _render(report=report).text

    assert "- **Tool output:** 1 tool message cut to 50 characters, 1 character removed in total" in text
    assert "- **Rows:** 9 rows in the export, 6 published" in text


def test_card_table_cells_escape_pipes_and_warnings_stay_on_one_line():
    report = {"format": "openai", "mask_mode": "assistant", "warnings": ["rows | cut\nby the cap"]}
    sources = [SourceFile(name="a|b.jsonl", size=1, sha256="cd" * 32)]

    text = _render(report=report, sources=sources).text

    assert f"| a\\|b.jsonl | 1 | `{'cd' * 32}` |" in text
    assert "- rows | cut by the cap\n" in text


def test_card_report_block_outlasts_backticks_inside_the_report():
    report = {"format": "openai", "mask_mode": "assistant", "note": "a ```` fence"}

    text = _render(report=report).text

    assert "`````json\n" in text
    assert text.count("`````") == 2


def test_hash_sources_hashes_files_and_the_files_of_a_folder(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "b.jsonl").write_bytes(b"two\n")
    (tmp_path / "a.jsonl").write_bytes(b"one\n")

    found = hash_sources([tmp_path / "a.jsonl", tmp_path / "run"])

    assert found == [SourceFile("a.jsonl", 4, hashlib.sha256(b"one\n").hexdigest()),
                     SourceFile("run/b.jsonl", 4, hashlib.sha256(b"two\n").hexdigest())]


def test_hash_sources_rejects_a_missing_file(tmp_path):
    with pytest.raises(PublishError, match=r"gone\.jsonl: the source file to hash does not exist"):
        hash_sources([tmp_path / "gone.jsonl"])


def test_package_versions_say_not_installed_instead_of_guessing(monkeypatch):
    real = metadata.version

    def version(name: str) -> str:
        if name in ("whileai", "whileai-datasets"):
            raise metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(card_module.metadata, "version", version)
    monkeypatch.setattr("whileai_datasets._version.__version__", "9.9.9")

    versions = package_versions()

    assert versions["whileai"] == "not installed"
    assert versions["whileai-datasets"] == "9.9.9"
    assert versions["datasets"] == real("datasets")


def test_card_shows_the_trl_lines_per_config_and_never_asks_to_install_this_package():
    text = _render().text

    assert 'train = load_dataset("alice/rollouts", split="train")' in text
    assert 'rows = load_dataset("alice/rollouts", "canonical", split="train")' in text
    assert text.count("trainer = SFTTrainer(") == 1  # none for the canonical rows: TRL would train every token
    assert "trainer = SFTTrainer(" in text
    assert "run `hf auth login` (or set HF_TOKEN)" in text
    assert "### `default` (default)" in text and "### `canonical`" in text
    assert "trains the completion of each row and nothing else (6 loss-carrying assistant turns, one row each)" in text
    # no tokenizer: what TRL labels was not measured, so the card does not call it exact
    assert "**Not measured**: publish was given no tokenizer" in text and "**Exact**" not in text
    assert "whileai_datasets" not in text and "whileai-datasets push" not in text
    assert "pip install" not in text


def test_a_card_section_may_only_write_under_card_and_not_twice() -> None:
    from whileai_datasets.hub.card_sections import CardSection, section_files

    with pytest.raises(PublishError, match=r"card section 'plots': a card section's file must lie under card/, "
                                           r"got 'data/train-00000-of-00001.parquet'"):
        CardSection("plots", "text", {"data/train-00000-of-00001.parquet": b"x"})
    with pytest.raises(PublishError, match=r"must lie under card/, got 'card/../README.md'"):
        CardSection("plots", "text", {"card/../README.md": b"x"})
    one, two = CardSection("a", "", {"card/a/x.svg": b"1"}), CardSection("b", "", {"card/a/x.svg": b"2"})
    with pytest.raises(PublishError, match=r"two card sections write 'card/a/x.svg'"):
        section_files([one, two])
    assert section_files([one]) == {"card/a/x.svg": b"1"}


def test_a_new_publish_deletes_the_plots_an_earlier_card_linked() -> None:
    from whileai_datasets.hub import layout

    ops = layout.operations(Path("."), [], ["card/audit/old.svg", "card/audit/kept.svg", "notes.txt"], [], "card",
                            {"card/audit/kept.svg": b"<svg/>"})
    deleted = sorted(op.path_in_repo for op in ops if type(op).__name__ == "CommitOperationDelete")
    assert deleted == ["card/audit/old.svg"]


def test_the_default_config_is_called_exact_only_where_what_trl_labels_was_measured_equal_to_the_mask():
    from whileai_datasets.hub.card_configs import default_verdict

    def verdict(default_facts: dict[str, int], tokenized_facts: dict[str, int] | None = None) -> tuple:
        configs = [Config("default", {"train": 3}, FEATURES, facts={"train": {"rows": 3, **default_facts}})]
        if tokenized_facts is not None:
            configs.append(Config("tokenized", {"train": 3}, FEATURES, facts={"train": tokenized_facts}))
        return default_verdict(configs)

    assert verdict({}) == (None, verdict({})[1]) and verdict({})[1].startswith("not measured: publish was given no")
    assert verdict({"parts_rows": 2})[1].endswith(". 2 rows hand the template content as a list of parts, which a "
                                                  "template that concatenates strings (Qwen2.5's, gpt-oss's) fails on")
    exact, said = verdict({"vision_rows": 3})  # no tokenizer, and yet: TRL takes it for a vision dataset
    assert exact is False and "the rows carry an `images` column" in said
    assert verdict({"marked_tokens": 40, "supervised_tokens": 40}) == (
        True, "exact: TRL labels 40 tokens, the 40 the mask marks")
    exact, said = verdict({"marked_tokens": 40, "supervised_tokens": 52},
                          {"marked_tokens": 40, "trl_labels": 30})
    assert exact is False
    assert said.startswith("not exact: TRL labels 52 tokens where the mask marks 40 (+12 tokens): the chat template "
                           "renders a turn differently as the last message")
    assert said.endswith("train on the `tokenized` config instead: its `labels` are the mask (40 tokens; SFTConfig's "
                         "default max_length 1024 keeps 30 of them: pass max_length=None)")
    exact, said = verdict({"marked_tokens": 40, "supervised_tokens": 35, "trl_cut_tokens": 5})
    assert exact is False and "5 labelled tokens lie past SFTConfig's default max_length 1024;" in said
    exact, said = verdict({"marked_tokens": 40, "supervised_tokens": 30, "trl_failed_rows": 2,
                           "trl_failure: TypeError: can only concatenate str": 2})
    assert exact is False and said.startswith("not exact: the chat template raises on 2 of 3 rows under TRL's "
                                              "tokenization (2 rows: TypeError: can only concatenate str)")
