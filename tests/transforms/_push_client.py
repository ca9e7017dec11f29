"""Client side of test_push.py: run in a child process by tests/hub/conftest.py's
``Identity.run`` (loaded by file path, so it imports nothing from the tests)."""

from __future__ import annotations

from typing import Any


def export_and_push(source: str, output: str, repo_id: str, tools: list[Any], unroll: bool = True) -> dict[str, Any]:
    import whileai_datasets

    report = whileai_datasets.export_dataset(source, output, tools=tools, unroll=unroll, validate=False,
                                             push_to=repo_id)
    return {"hub": report["hub"], "n": report["n"]}


def rows_on_the_hub(repo_id: str, token: str) -> int:
    from datasets import load_dataset

    return int(load_dataset(repo_id, token=token, split="train").num_rows)


def push_and_publish_in_memory(source: str, output: str, repo_id: str, tools: list[Any]) -> dict[str, Any]:
    """`export_dataset(push_to=repo_id)`, and `publish` of the very rows it published, held in memory, to
    `repo_id`-held; whether each publish read its rows from files."""
    import datasets

    import whileai_datasets
    import whileai_datasets.hub as hub

    real, seen = hub.publish, []

    def publish(data: Any, repo: str, **kwargs: Any) -> Any:
        seen.append((data, kwargs))
        return real(data, repo, **kwargs)

    hub.publish = publish
    try:
        report = whileai_datasets.export_dataset(source, output, tools=tools, validate=False, push_to=repo_id)
        pushed, kwargs = seen[0]
        held = datasets.Dataset(datasets.table.InMemoryTable(pushed.with_format("arrow")[:]))
        again = real(held, f"{repo_id}-held", **kwargs)
    finally:
        hub.publish = real
    return {"pushed": report["hub"], "held": {"splits": again["splits"]},
            "pushed_from_files": bool(pushed.cache_files), "held_from_files": bool(held.cache_files)}


def repo_shards(repo_id: str, token: str) -> dict[str, str]:
    """The Parquet files the head holds, with their LFS sha256."""
    from huggingface_hub import HfApi

    entries = HfApi(token=token).list_repo_tree(repo_id, repo_type="dataset", recursive=True, expand=True)
    return {e.path: e.lfs.sha256 for e in entries if e.path.endswith(".parquet") and getattr(e, "lfs", None)}


def unique_rollouts(path: str, n: int, width: int) -> None:
    """`n` exported-style rows (messages), every text different, about `width` characters each."""
    import json

    pad = "y" * width
    with open(path, "w", encoding="utf-8") as handle:
        for i in range(n):
            messages = [{"role": "user", "content": f"ask {i} {pad}"},
                        {"role": "assistant", "content": f"answer {i} {pad}"}]
            handle.write(json.dumps({"messages": messages, "scenario_id": f"s{i % 97}"}) + "\n")


def export_and_push_measured(source: str, output: str, repo_id: str) -> dict[str, Any]:
    """`export_dataset(push_to=...)`; the peak RSS of this process (MB) beside the report's hub result."""
    import resource

    import whileai_datasets

    report = whileai_datasets.export_dataset(source, output, validate=False, push_to=repo_id)
    return {"hub": report["hub"], "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
