"""Time ``inspect()`` plus ``with_generation()`` per chat template (target: under one second each).

Runs on every chat template the installed ``trl`` ships (originals, cold caches:
each template is parsed, compiled, probed and patched from scratch) and prints
the measured figures. Nothing here asserts: run it with

    python benchmarks/bench_chat_template.py
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

from whileai_datasets.chat_template import ChatTemplate
from whileai_datasets.chat_template.rendering.render import compile_plain, compile_tracking
from whileai_datasets.errors import TemplateError

TARGET_SECONDS = 1.0


def _trl_templates() -> list[Path]:
    try:
        import trl
    except ImportError:
        sys.exit("trl is not installed: `pip install -e .[test]` to run this benchmark")
    folder = Path(trl.__file__).parent / "chat_templates"
    return sorted(p for p in folder.glob("*.jinja") if not p.stem.endswith("_training"))


def _time_one(path: Path) -> tuple[float, str]:
    compile_plain.cache_clear()
    compile_tracking.cache_clear()
    start = time.perf_counter()
    template = ChatTemplate.from_file(path)
    template.inspect()
    try:
        template.with_generation()
        outcome = "patched"
    except TemplateError:
        outcome = "refused"
    return time.perf_counter() - start, outcome


def main() -> None:
    rows = [(path.stem, *_time_one(path)) for path in _trl_templates()]
    width = max(len(name) for name, _, _ in rows)
    for name, seconds, outcome in rows:
        flag = "" if seconds < TARGET_SECONDS else "  <-- over target"
        print(f"{name:<{width}}  {seconds * 1000:8.1f} ms  {outcome}{flag}")
    times = [seconds for _, seconds, _ in rows]
    print(f"\n{len(rows)} templates: median {statistics.median(times) * 1000:.1f} ms, "
          f"max {max(times) * 1000:.1f} ms, over {TARGET_SECONDS:.0f} s: "
          f"{sum(t >= TARGET_SECONDS for t in times)}")


if __name__ == "__main__":
    main()
