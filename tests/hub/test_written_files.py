"""Files this package writes for others (export Parquet, the demo's Parquet) load with plain datasets.

Read back in a client process where `import whileai_datasets` fails (see conftest:
`Identity.on_a_training_machine`): every feature type is built into `datasets`, and every message
has exactly the keys whileai writes (no `tool_calls: None` on a user turn).

Functions without a `test_` prefix run in a client process (see conftest: `Identity.run`).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.hub.conftest import BLOCKED_IMPORT, blocked_import, not_built_in

MESSAGE_COLUMNS = ("messages", "prompt", "completion", "chosen", "rejected")


# --- client side: a machine without the package ---------------------------------------------------
def read_parquet(path: str, cache: str) -> dict[str, Any]:
    from datasets import Dataset

    blocked = blocked_import()
    ds = Dataset.from_parquet(path, cache_dir=cache)
    columns = [c for c in MESSAGE_COLUMNS if c in ds.column_names]
    rows = list(ds.select_columns(columns))  # rows decode Json on every release; to_dict() on 4.x gives its text
    return {"blocked": blocked, "not_built_in": not_built_in(ds.features), "features": repr(ds.features),
            "messages": {c: [row[c] for row in rows] for c in columns}}


# --- tests ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", ["openai", "trl"])
def test_export_parquet_loads_without_the_package_with_whileais_messages(anonymous, tmp_path, fmt):
    from whileai.simulations import export_dataset as whileai_export

    import whileai_datasets
    from tests.conftest import SYSTEM_PROMPT, TOOLS, read_jsonl, seeded_rows

    rows = seeded_rows(seed=3, mode="rl", budget=12)
    out = tmp_path / f"{fmt}.parquet"
    whileai_datasets.export_dataset(rows, str(out), system_prompt=SYSTEM_PROMPT, tools=TOOLS, format=fmt,
                                    mask_mode="final", validate=False)
    whileai_export(rows, str(tmp_path / "theirs.jsonl"), system_prompt=SYSTEM_PROMPT, tools=TOOLS, format=fmt,
                   mask_mode="final", validate=False)
    theirs = read_jsonl(tmp_path / "theirs.jsonl")

    back = anonymous.on_a_training_machine().run(read_parquet, path=str(out), cache=str(tmp_path / "cache"))

    assert back["blocked"] == BLOCKED_IMPORT
    assert back["not_built_in"] == [], back["features"]
    assert back["messages"]
    for column, values in back["messages"].items():
        assert values == [row[column] for row in theirs], column


def test_demo_parquet_loads_without_the_package_with_exact_message_keys(anonymous, tmp_path):
    from whileai_datasets.cli import demo

    out = tmp_path / "whileai-sample.parquet"
    demo.run_demo(str(out), cache_dir=str(tmp_path / "demo-cache"))
    from tests.conftest import template_rows

    expected = [row["messages"] for row in template_rows(demo.load_sample(cache_dir=str(tmp_path / "demo-cache")))]

    back = anonymous.on_a_training_machine().run(read_parquet, path=str(out), cache=str(tmp_path / "cache"))

    assert back["blocked"] == BLOCKED_IMPORT
    assert back["not_built_in"] == [], back["features"]
    assert back["messages"]["messages"] == expected
    users = [m for row in back["messages"]["messages"] for m in row if m["role"] == "user"]
    assert users and all(set(m) == {"role", "content"} for m in users)


def test_publish_refuses_rows_without_a_loss_mask_before_any_request(alice, hub, tmp_path):
    from datasets import Dataset

    Dataset.from_dict({"messages": [[{"role": "user", "content": "hi"}]]}).save_to_disk(str(tmp_path / "plain"))
    mark = hub.mark()

    error = alice.run_error(publish_saved, path=str(tmp_path / "plain"), repo_id="alice/no-mask", token=alice.token)

    assert error.type == "whileai_datasets.errors.PublishError"
    assert "expected canonical training rows with 'messages' and 'loss_mask' columns" in error.message
    assert hub.requests(mark) == []  # the rows are checked before the token is even tried


def publish_saved(path: str, repo_id: str, token: str) -> dict[str, Any]:
    from datasets import load_from_disk

    from whileai_datasets.hub import publish

    return dict(publish(load_from_disk(path), repo_id, token=token))

