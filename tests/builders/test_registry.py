"""Registration in datasets' packaged-module table."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import datasets
import pytest
import tomllib
from datasets.packaged_modules import _PACKAGED_DATASETS_MODULES
from packaging.version import Version

from whileai_datasets import UnsupportedVersionError, _compat
from whileai_datasets.builders import registry


def test_the_supported_range_starts_at_the_first_datasets_with_json() -> None:
    assert registry.SUPPORTED == (Version("4.7"), Version("6"))


@pytest.mark.parametrize("package", sorted(_compat.SUPPORTED))
def test_pyproject_declares_the_ranges_the_code_supports(package: str) -> None:
    declared = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())["project"]["dependencies"]
    assert _compat.supported_range(package) in declared


def test_installed_datasets_is_in_the_supported_range() -> None:
    low, high = registry.SUPPORTED
    assert low <= Version(datasets.__version__) < high


def test_register_is_idempotent_and_points_at_the_builder() -> None:
    registry.register()
    entry = _PACKAGED_DATASETS_MODULES[registry.NAME]
    registry.register()
    assert _PACKAGED_DATASETS_MODULES[registry.NAME] == entry
    assert entry[0] == "whileai_datasets.builders.whileai_export"
    assert len(entry[1]) == 64


def test_an_unknown_table_shape_is_refused_with_the_supported_range(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("datasets.packaged_modules._PACKAGED_DATASETS_MODULES", {"csv": "not a (path, hash) pair"})
    with pytest.raises(UnsupportedVersionError, match=r"in a shape this package does not know\. Install datasets>=4\.7,<6"):
        registry.register()


_BUILD = """
import json, sys
import whileai_datasets
from datasets import load_dataset
from datasets.packaged_modules import _PACKAGED_DATASETS_MODULES
ds = load_dataset("whileai/export", data_files=sys.argv[1], split="train", cache_dir=sys.argv[2])
print(json.dumps({"hash": _PACKAGED_DATASETS_MODULES["whileai/export"][1],
                  "cache": ds.cache_files[0]["filename"], "columns": ds.column_names,
                  "package": whileai_datasets.__file__}))
"""


def _build_with(package_root: Path, data: Path, cache: Path) -> dict[str, object]:
    """load_dataset in a fresh interpreter that imports the package copy under ``package_root``."""
    done = subprocess.run([sys.executable, "-c", _BUILD, str(data), str(cache)], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(package_root)}, cwd=package_root,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_changed_module_the_builder_runs_gives_a_new_key_and_a_rebuilt_split(tmp_path: Path) -> None:
    """rows/parts.py decides the ``parts`` column and was missing from the old hand-kept list: edit it in a copy
    of the package and load_dataset must build the split again (new cache path, the edit's rows), not serve the
    cached one."""
    import whileai_datasets

    root = tmp_path / "site"
    shutil.copytree(Path(whileai_datasets.__file__).parent, root / "whileai_datasets",
                    ignore=shutil.ignore_patterns("__pycache__"))  # linked rooms copied as folders
    data = tmp_path / "run.jsonl"
    data.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"},
                                             {"role": "assistant", "content": "hello"}]}) + "\n")
    cache = tmp_path / "cache"
    before = _build_with(root, data, cache)
    assert before["package"] == str(root / "whileai_datasets" / "__init__.py")
    assert _build_with(root, data, cache) == before  # same sources: the cached split is served

    parts = root / "whileai_datasets" / "rows" / "parts.py"
    parts.write_text(parts.read_text() + "\n\n# an edit a user's upgrade would bring\n")
    after = _build_with(root, data, cache)
    assert after["hash"] != before["hash"]
    assert after["cache"] != before["cache"]
    assert Path(str(after["cache"])).is_file() and Path(str(before["cache"])).is_file()
