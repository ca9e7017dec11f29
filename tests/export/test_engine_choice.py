"""``engine=`` on the Python front doors (``export_dataset``, ``publish_rollouts``): what the Ray engine does not
take is refused by name before Ray starts or anything is read, and a missing Ray says which extra to install.
The runs on Ray themselves are in tests/ray_engine and tests/hub (``-m ray``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.conftest import seeded_rows, write_jsonl
from whileai_datasets import OptionError, PublishError, UnsupportedVersionError, export_dataset, publish_rollouts
from whileai_datasets.export.rollouts import rollout_files


@pytest.fixture(scope="module")
def rows_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_jsonl(tmp_path_factory.mktemp("engine") / "run.jsonl", seeded_rows(seed=3))


@pytest.mark.parametrize(("given", "named", "instead"), [
    ({"push_to": "me/rows"}, "push_to='me/rows'",
     "publish the rollouts with publish_rollouts(source, repo_id, engine='ray')"),
    ({"weights": "assistant"}, "weights='assistant'", "drop weights="),
    ({"on_bad_row": "skip"}, "on_bad_row='skip'", "fix or drop the unreadable rows first"),
])
def test_export_on_ray_refuses_what_only_the_local_engine_does(rows_file: Path, tmp_path: Path, given: dict[str, str],
                                                                named: str, instead: str) -> None:
    with pytest.raises(OptionError) as raised:
        export_dataset(str(rows_file), str(tmp_path / "out"), engine="ray", **given)
    assert str(raised.value).startswith(f"{next(iter(given))}: {named} is not available with engine='ray'")
    assert f"Run it with engine='local', or {instead}" in str(raised.value)
    assert list(tmp_path.iterdir()) == []


def test_export_on_ray_needs_an_output_directory(rows_file: Path) -> None:
    with pytest.raises(OptionError, match=r"^output: engine='ray' writes a directory of part files, and no output"):
        export_dataset(str(rows_file), engine="ray")
    assert sorted(p.name for p in rows_file.parent.iterdir()) == ["run.jsonl"]  # no <name>.train.jsonl beside it


def test_publish_rollouts_on_ray_refuses_skipping_bad_rows(rows_file: Path) -> None:
    with pytest.raises(OptionError, match=r"^on_bad_row: on_bad_row='skip' is not available with engine='ray'"):
        publish_rollouts(str(rows_file), "me/rows", engine="ray", on_bad_row="skip")


@pytest.mark.parametrize("front", ["export_dataset", "publish_rollouts"])
def test_engine_ray_without_ray_names_the_extra_to_install(rows_file: Path, tmp_path: Path, front: str,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # what an install without the ray extra imports
    monkeypatch.setitem(sys.modules, "ray.data", None)
    with pytest.raises(UnsupportedVersionError) as raised:
        if front == "export_dataset":
            export_dataset(str(rows_file), str(tmp_path / "out"), engine="ray")
        else:
            publish_rollouts(str(rows_file), "me/rows", engine="ray")
    assert str(raised.value) == ("engine='ray': engine='ray' needs Ray Data, which is not installed. "
                                 "pip install 'whileai-datasets[ray]'")
    assert list(tmp_path.iterdir()) == []


def test_rollout_files_expands_globs_in_name_order_and_names_what_is_missing(tmp_path: Path) -> None:
    for name in ("b.jsonl", "a.jsonl", "c.txt"):
        (tmp_path / name).write_text("{}\n", encoding="utf-8")
    assert rollout_files(str(tmp_path / "*.jsonl")) == [str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")]
    assert rollout_files([tmp_path / "c.txt", str(tmp_path / "a.jsonl")]) == [str(tmp_path / "c.txt"),
                                                                               str(tmp_path / "a.jsonl")]
    with pytest.raises(PublishError, match=r"^.*gone\.jsonl: a rollout file does not exist"):
        rollout_files([str(tmp_path / "a.jsonl"), str(tmp_path / "gone.jsonl")])
    with pytest.raises(PublishError, match=r"\*\.parquet: no rollout file found"):
        rollout_files(str(tmp_path / "*.parquet"))
