"""Registration in datasets' packaged-module table."""

from __future__ import annotations

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
    declared = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"]["dependencies"]
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
