"""Content parts against plain text: the same conversations, side by side.

Two JSONL files hold the same N conversations (the canonical messages of the
N-row benchmark file): one with text content, one where each user turn is a
text part plus an image reference and each assistant turn a text part. Each
step runs on both, alternating round by round, and the report is the median of
each and their ratio (parts / text): the builder (a fresh cache each time),
``strip_think``, ``truncate_tool_output``, ``to_openai``, ``to_trl`` and the
JSON text of the rows.

    python benchmarks/bench_parts.py --rows 20000 --repeat 3 [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")

from benchmarks._data import DATA_DIR, SYSTEM_PROMPT, make_export_file  # noqa: E402


def _as_parts(message: dict[str, Any], i: int) -> dict[str, Any]:
    if message["role"] == "user":
        image = {"type": "image", "image": f"https://images.example.com/{i}.png"}
        return {**message, "content": [{"type": "text", "text": message["content"]}, image]}
    if message["role"] == "assistant":
        return {**message, "content": [{"type": "text", "text": message["content"]}]}
    return message


def make_pair(n_rows: int) -> tuple[Path, Path]:
    """The text and the parts file of the same conversations (cached under benchmarks/.data)."""
    import datasets

    import whileai_datasets  # noqa: F401

    text_path, parts_path = DATA_DIR / f"text-{n_rows}.jsonl", DATA_DIR / f"parts-{n_rows}.jsonl"
    if text_path.exists() and parts_path.exists():
        return text_path, parts_path
    with tempfile.TemporaryDirectory() as cache:
        ds = datasets.load_dataset(
            "whileai/export", data_files=str(make_export_file(None, n_rows)), split="train",
            system_prompt=SYSTEM_PROMPT, cache_dir=cache,
        )
        with open(text_path, "w", encoding="utf-8") as text, open(parts_path, "w", encoding="utf-8") as parts:
            for i, row in enumerate(ds):
                text.write(json.dumps({"messages": row["messages"]}) + "\n")
                parts.write(json.dumps({"messages": [_as_parts(m, i) for m in row["messages"]]}) + "\n")
    return text_path, parts_path


def _steps() -> dict[str, Callable[[Any], Any]]:
    from whileai_datasets import transforms as wai_transforms
    from whileai_datasets.columnar import _json

    def run(transform: Any) -> Callable[[Any], Any]:
        return lambda ds: ds.map(transform, batched=True, load_from_cache_file=False)

    return {
        "strip_think": run(wai_transforms.strip_think),
        "truncate_tool_output(200)": run(wai_transforms.truncate_tool_output(200)),
        "to_openai": run(wai_transforms.to_openai),
        "to_trl": run(wai_transforms.to_trl("training")),
        "JSON text of the rows": lambda ds: _json.encode_rows(ds[:].select(["messages"])),
    }


def _load(path: Path, cache: str) -> Any:
    import datasets

    import whileai_datasets  # noqa: F401

    return datasets.load_dataset("whileai/export", data_files=str(path), split="train", cache_dir=cache)


def _timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    paths = dict(zip(("text", "parts"), make_pair(args.rows)))
    times: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory() as work:
        loaded = {kind: _load(path, f"{work}/keep-{kind}").with_format("arrow") for kind, path in paths.items()}
        for round_no in range(args.repeat):
            for kind, path in paths.items():
                cache = f"{work}/{kind}-{round_no}"
                times.setdefault("builder (load_dataset)", {}).setdefault(kind, []).append(_timed(lambda: _load(path, cache)))
                for name, step in _steps().items():
                    times.setdefault(name, {}).setdefault(kind, []).append(_timed(lambda: step(loaded[kind])))
    report = {
        name: {
            "text_s": statistics.median(by_kind["text"]),
            "parts_s": statistics.median(by_kind["parts"]),
            "ratio": statistics.median(by_kind["parts"]) / statistics.median(by_kind["text"]),
        }
        for name, by_kind in times.items()
    }
    if args.json:
        print(json.dumps({"rows": args.rows, "repeat": args.repeat, "steps": report}, indent=2))
        return
    print(f"{args.rows} conversations, median of {args.repeat} rounds (parts / text)")
    for name, figures in report.items():
        print(f"  {name:<28} text {figures['text_s']:7.3f} s   parts {figures['parts_s']:7.3f} s   x{figures['ratio']:.2f}")


if __name__ == "__main__":
    main()
