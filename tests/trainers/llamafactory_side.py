"""LLaMA-Factory's side, run in its venv (datasets 4.0.0, its pin): load the `sharegpt` config; try its data code.

LLaMA-Factory 0.9.5's data package (`llamafactory.data`: its loader, sharegpt converter, templates
and supervised processor) imports torchaudio at module level (`data/mm_plugin.py`), and no torchaudio
that loads with torch 2.13.0 on a CPU machine can be installed here (venvs.py), so its preprocessing
cannot run in this venv. What does run: loading the config with LLaMA-Factory's datasets release, as
its loader would (`load_dataset(hf_hub_url, name=subset, split=..., token=...)`).
"""

from __future__ import annotations

from typing import Any

from side_common import blocked_import, load_config, versions


def load_sharegpt(repo_id: str, token: str) -> dict[str, Any]:
    blocked = blocked_import()
    rows = load_config(repo_id, "sharegpt", token)
    return {"blocked": blocked, "versions": versions("llamafactory", "datasets", "transformers"),
            "features": repr(rows.features), "rows": rows.to_list()}


def data_import_error() -> str | None:
    """What `import llamafactory.data` raises here (None if it imports)."""
    try:
        import llamafactory.data  # noqa: F401
    except ImportError as err:
        return f"{type(err).__name__}: {err}"
    return None
