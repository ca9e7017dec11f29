"""An output that is an input is refused before anything is read or written.

The input in these tests is not JSON at all: had the export read it first, the
error would be the builder's "not valid JSON"; had it written, the bytes would
have changed. Every case checks both, and that no file appeared.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from whileai_datasets import ExportFormatError, cli, export_dataset, export_preference

CONTENT = b"these are the only rollouts I have, and they are not even JSON\n"
REFUSED = r"would write over the input .*nothing was read or written\. Write to a new path"


@pytest.fixture
def source(tmp_path: Path) -> Path:
    path = tmp_path / "rollouts.jsonl"
    path.write_bytes(CONTENT)
    return path


def _unchanged(folder: Path, before: set[str]) -> None:
    assert {p.name for p in folder.iterdir()} == before
    assert (folder / "rollouts.jsonl").read_bytes() == CONTENT


def _spellings(source: Path) -> dict[str, Callable[[], str]]:
    folder = source.parent

    def symlink() -> str:
        os.symlink(source, folder / "link.jsonl")
        return str(folder / "link.jsonl")

    def hard_link() -> str:
        os.link(source, folder / "hard.jsonl")
        return str(folder / "hard.jsonl")

    return {
        "same path": lambda: str(source),
        "dot slash": lambda: "./rollouts.jsonl",
        "through a folder that does not exist": lambda: str(folder / "missing" / ".." / "rollouts.jsonl"),
        "symlink": symlink,
        "hard link": hard_link,
    }


SPELLINGS = ["same path", "dot slash", "through a folder that does not exist", "symlink", "hard link"]
REASONS = {
    "same path": "the same path",
    "dot slash": "the same path",
    "through a folder that does not exist": "the same path",
    "symlink": "through a symlink",
    "hard link": "a hard link",
}


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_export_dataset_refuses_an_output_that_is_the_source(
    source: Path, monkeypatch: pytest.MonkeyPatch, spelling: str
) -> None:
    monkeypatch.chdir(source.parent)
    output = _spellings(source)[spelling]()
    before = {p.name for p in source.parent.iterdir()}
    with pytest.raises(ExportFormatError, match=REFUSED) as caught:
        export_dataset(str(source), output)
    assert REASONS[spelling] in str(caught.value)
    _unchanged(source.parent, before)


def test_a_file_named_like_the_old_staging_path_is_left_alone(tmp_path: Path) -> None:
    # the writers' temp files are new names made exclusively, never OUT.tmp
    from tests.conftest import write_jsonl
    from whileai_datasets.cli.demo import sample_rows

    source = write_jsonl(tmp_path / "run.jsonl", sample_rows()[:20])
    (tmp_path / "rollouts.jsonl.tmp").write_bytes(CONTENT)
    report = export_dataset(str(source), str(tmp_path / "rollouts.jsonl"), validate=False)
    assert (tmp_path / "rollouts.jsonl.tmp").read_bytes() == CONTENT
    assert (tmp_path / "rollouts.jsonl").read_text().count("\n") == report["n"] > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rollouts.jsonl", "rollouts.jsonl.tmp", "run.jsonl"]


def test_export_dataset_refuses_an_output_that_is_a_cache_file_of_the_source(load: Any, tmp_path: Path) -> None:
    from tests.conftest import DATA

    ds = load(DATA / "otel.jsonl")
    cache_file = ds.cache_files[0]["filename"]
    before = Path(cache_file).read_bytes()
    with pytest.raises(ExportFormatError, match=REFUSED):
        export_dataset(ds, cache_file)
    assert Path(cache_file).read_bytes() == before


def test_export_preference_refuses_an_output_that_is_a_cache_file_of_the_pairs(load: Any) -> None:
    from tests.conftest import DATA

    ds = load(DATA / "otel.jsonl")
    cache_file = ds.cache_files[0]["filename"]
    with pytest.raises(ExportFormatError, match=REFUSED):
        export_preference(ds, cache_file)


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_the_export_command_refuses_and_exits_1(
    source: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], spelling: str
) -> None:
    monkeypatch.chdir(source.parent)
    output = _spellings(source)[spelling]()
    before = {p.name for p in source.parent.iterdir()}
    assert cli.main(["export", "rollouts.jsonl", output]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"whileai-datasets export: {Path(output)}: the output would write over the input")
    assert "Write to a new path (e.g. " in err
    _unchanged(source.parent, before)


@pytest.mark.parametrize("flag", ["--tools", "--system-prompt-file"])
def test_the_export_command_refuses_to_write_over_its_option_files(
    source: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str
) -> None:
    option_file = tmp_path / "options.json"
    option_file.write_text("[]", encoding="utf-8")
    code = cli.main(["export", str(source), str(option_file), flag, str(option_file)])
    assert code == 1
    assert "would write over the input" in capsys.readouterr().err
    assert option_file.read_text(encoding="utf-8") == "[]"


def test_the_preference_export_command_refuses_too(source: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["export", str(source), str(source), "--preference"]) == 1
    assert "would write over the input" in capsys.readouterr().err
    assert source.read_bytes() == CONTENT


def test_template_patch_refuses_to_write_over_its_source(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    template = tmp_path / "chat_template.jinja"
    text = "{% for m in messages %}{{ m.content }}{% endfor %}"
    template.write_text(text, encoding="utf-8")
    assert cli.main(["template", "patch", str(template), f"{tmp_path}/./chat_template.jinja"]) == 1
    assert "would write over the input" in capsys.readouterr().err
    assert template.read_text(encoding="utf-8") == text
    model = tmp_path / "model"
    model.mkdir()
    (model / "chat_template.jinja").write_text(text, encoding="utf-8")
    assert cli.main(["template", "patch", str(model), str(model / "chat_template.jinja")]) == 1
    assert (model / "chat_template.jinja").read_text(encoding="utf-8") == text


# ---------------------------------------------------------------- Ray: a directory output


@pytest.fixture
def ray_engine() -> Any:
    pytest.importorskip("ray.data")
    from whileai_datasets import ray_engine

    return ray_engine


def test_ray_export_refuses_an_output_directory_that_is_the_input_directory(tmp_path: Path, ray_engine: Any) -> None:
    rollouts = tmp_path / "rollouts"
    rollouts.mkdir()
    (rollouts / "part-00000.jsonl").write_bytes(CONTENT)  # an earlier export's parts, now the input
    with pytest.raises(ExportFormatError, match=r"output directory contains it, and the export replaces"):
        ray_engine.export_training(str(rollouts), str(rollouts))
    with pytest.raises(ExportFormatError, match=REFUSED):
        ray_engine.export_training(str(rollouts / "part-00000.jsonl"), f"{tmp_path}/./rollouts/")
    assert (rollouts / "part-00000.jsonl").read_bytes() == CONTENT


def test_the_export_command_with_engine_ray_refuses_before_starting_ray(
    source: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("ray.data")
    import ray

    assert cli.main(["export", str(source), str(source.parent), "--engine", "ray"]) == 1
    assert "output directory contains it" in capsys.readouterr().err
    assert not ray.is_initialized()
    assert source.read_bytes() == CONTENT
