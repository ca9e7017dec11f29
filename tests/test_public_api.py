"""The public surface is exactly ``__all__``, sorted."""

from __future__ import annotations

import whileai_datasets


def test_all_is_sorted_and_lists_every_public_name() -> None:
    exported = whileai_datasets.__all__
    assert exported == sorted(exported)
    public = {
        name
        for name, value in vars(whileai_datasets).items()
        if not name.startswith("_") and not getattr(value, "__name__", "").startswith("whileai_datasets.")
    }
    public -= {"annotations"}
    assert set(exported) == public


def test_every_exported_name_resolves() -> None:
    for name in whileai_datasets.__all__:
        assert getattr(whileai_datasets, name) is not None
