"""On the Ray engine the audit finds the same secrets and personal data, in the same rows and places."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import planted_secrets, ray_session
from whileai_datasets import audit
from whileai_datasets.auditing.counting import checked_options

pytest.importorskip("ray.data")
pytestmark = [pytest.mark.ray, pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.data.context")]
ray_runtime = pytest.fixture(scope="module", autouse=True)(ray_session.local_runtime)


def test_the_ray_audit_finds_what_the_local_audit_finds(tmp_path: Path) -> None:
    from whileai_datasets.auditing.on_ray import audit_on_ray

    path = tmp_path / "planted.jsonl"
    plans = planted_secrets.write_jsonl(path)
    local = audit(str(path)).to_dict()
    options = checked_options(tokenized=False, on_bad_row="raise", system_prompt=None, tools=None, strip_think=False,
                              mask_mode="assistant", unroll=False, max_tool_output_chars=None, format="openai",
                              max_length=None)
    # small blocks: the driver adds up several, each block's rows moved to their place in the file
    ours = audit_on_ray(str(path), tokenizer=None, template=None, options=options, range_bytes=16 << 10,
                        block_bytes=4 << 10, concurrency=1).to_dict()

    assert ours["privacy"] == local["privacy"]
    assert ours["findings"]["secrets"] == local["findings"]["secrets"]
    assert local["findings"]["secrets"]["rows"] == sum(p.group == "secret" for p in plans)
    last = max(i for i, p in enumerate(plans) if p.kind == "assigned_secret")
    assert local["privacy"]["secrets"]["assigned_secret"]["first"][-1]["row"] == last
