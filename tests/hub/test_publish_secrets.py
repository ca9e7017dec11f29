"""A publish of rows holding secrets stops before its first request; redacting or allowing is said on the card.

Through the real clients against the local Hub server: the refused publish sends nothing at all (the
request log), and the repo does not exist afterwards. Functions without a `test_` prefix run in a client
process.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest

from tests.support import planted_secrets

PUBLISH_ERROR = "whileai_datasets.errors.PublishError"


# --- client side ---------------------------------------------------------------------------------
def publish_planted(path: str, repo_id: str, token: str, secrets: str = "refuse") -> dict[str, Any]:
    from datasets import load_dataset

    from whileai_datasets.hub import publish

    rows = load_dataset("whileai/export", data_files=path, split="train")
    return dict(publish(rows, repo_id, token=token, secrets=secrets))


def push_command(path: str, repo_id: str) -> dict[str, Any]:
    from whileai_datasets.cli import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(["push", path, repo_id])
    return {"code": code, "stderr": err.getvalue()}


def repo_exists(repo_id: str, token: str) -> bool:
    from huggingface_hub import HfApi

    return bool(HfApi(token=token).repo_exists(repo_id, repo_type="dataset"))


def card_of(repo_id: str, token: str) -> str:
    from huggingface_hub import hf_hub_download

    return Path(hf_hub_download(repo_id, "README.md", repo_type="dataset", token=token)).read_text("utf-8")


def published(repo_id: str, token: str) -> dict[str, Any]:
    from datasets import load_dataset
    from huggingface_hub import hf_hub_download

    rows = load_dataset(repo_id, "canonical", split="train", token=token)
    card = Path(hf_hub_download(repo_id, "README.md", repo_type="dataset", token=token)).read_text("utf-8")
    return {"rows": json.dumps(rows.to_list()), "card": card}


# --- tests ---------------------------------------------------------------------------------------
@pytest.fixture
def planted(tmp_path: Path) -> tuple[str, list[planted_secrets.Planted]]:
    path = tmp_path / "planted.jsonl"
    return str(path), planted_secrets.write_jsonl(path)


def test_publish_refuses_secrets_before_any_request_and_leaves_no_repo(alice, hub, repo_id, planted) -> None:
    path, plans = planted
    mark = hub.mark()

    error = alice.run_error(publish_planted, path=path, repo_id=repo_id, token=alice.token)

    assert error.type == PUBLISH_ERROR
    assert error.message.startswith("publish (before any upload): found secrets in 57 of 87 rows: aws_access_key in "
                                    "3 rows (split 'train' row 0 messages[1].content;")
    assert "Nothing was uploaded and no repo was created" in error.message
    assert not any(value in error.message for p in plans for value in p.values)
    assert hub.requests(mark) == []  # not even the token check
    assert alice.run(repo_exists, repo_id=repo_id, token=alice.token) is False


def test_push_refuses_too(alice, hub, repo_id, planted) -> None:
    path, _ = planted
    alice.env_token = True
    mark = hub.mark()

    result = alice.run(push_command, path=path, repo_id=repo_id)

    assert result["code"] == 1
    assert "found secrets in 57 of 87 rows" in result["stderr"] and "--secrets redact" in result["stderr"]
    assert [e for e in hub.requests(mark) if e["method"] != "GET"] == []
    assert alice.run(repo_exists, repo_id=repo_id, token=alice.token) is False


def test_redact_publishes_placeholders_and_the_card_says_so(alice, repo_id, planted) -> None:
    path, plans = planted
    alice.run(publish_planted, path=path, repo_id=repo_id, token=alice.token, secrets="redact")

    found = alice.run(published, repo_id=repo_id, token=alice.token)

    assert not any(value in found["rows"] for p in plans if p.group == "secret" for value in p.values)
    assert "<secret:aws_access_key>" in found["rows"]
    card = found["card"]
    assert "## Secrets and personal data" in card
    assert "- **Secrets:** 57 rows: aws_access_key (3 rows)" in card
    assert "each was replaced by a typed placeholder such as `<secret:aws_access_key>` before upload" in card
    assert ("- **Personal data** (kept as it is): 9 rows: email (3 rows), home_user (3 rows), file_owner (3 rows)"
            in card)
    assert "policy: redact" in card and "redacted: true" in card


def test_allow_publishes_them_as_they_are_and_the_card_names_it(alice, repo_id, planted) -> None:
    path, plans = planted
    alice.run(publish_planted, path=path, repo_id=repo_id, token=alice.token, secrets="allow")

    card = alice.run(card_of, repo_id=repo_id, token=alice.token)

    assert "- **Secrets:** 57 rows: aws_access_key (3 rows)" in card
    assert "**they were published as they are** (`secrets='allow'`)" in card
    assert "policy: allow" in card


def publish_planted_on_ray(path: str, repo_id: str) -> dict[str, Any]:
    import warnings

    import ray

    warnings.filterwarnings("ignore", category=DeprecationWarning, module="ray.data.context")
    from whileai_datasets import publish_rollouts

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        return dict(publish_rollouts(path, repo_id, engine="ray"))
    finally:
        ray.shutdown()


@pytest.mark.ray
def test_the_ray_publish_refuses_before_it_opens_the_repo(alice, hub, repo_id, planted) -> None:
    pytest.importorskip("ray.data")
    path, plans = planted
    alice.env_token = True
    mark = hub.mark()

    error = alice.run_error(publish_planted_on_ray, path=path, repo_id=repo_id)

    assert error.type == PUBLISH_ERROR
    assert "found secrets in 57 of 87 rows: aws_access_key in 3 rows (split 'train' row 0 messages[1].content;" \
        in error.message
    assert not any(value in error.message for p in plans for value in p.values)
    assert hub.requests(mark) == []
    assert alice.run(repo_exists, repo_id=repo_id, token=alice.token) is False
