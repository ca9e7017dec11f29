"""The audit's TRL route (issue 46) against ``ds.map(tokenize)``, side by side in one process.

``audit(ds, tokenizer=tok)`` also measures what TRL 1.16's default ``SFTTrainer`` labels on the default config a
publish makes of the rows (``hub.facts.shaped_for_trl``: per trained turn, the template's render of the prompt with
the generation prompt and of prompt + completion, encoded, labels after the common prefix, further forms tried
where the first is not exact). Per template, in alternating rounds (medians of ``--rounds``):

* map: ``ds.with_format("arrow").map(tokenize(tok), batched=True)`` (writes its cache file);
* audit: ``whileai_datasets.audit(ds, tokenizer=tok)``, the TRL route included;
* audit, no route: the same audit with ``Run.hub_route`` replaced by a no-op in this process (the audit has no
  switch for it: this shows what the route costs, not a way to run it);
* route alone: the seconds the route took inside the audit (``Run.hub_route`` timed).

Rows: whileai's seeded demo agent (``tests/conftest.py``'s ``seeded_rows``, ``--seeds`` seeds, offline), or
``--unique N`` rows with unique texts (``benchmarks/_unique_rows.py``). Tokenizers are trained here
(``tests/support/tiny_lm.py``). ``--root`` runs another tree's package (e.g. ``git archive int2`` unpacked) with
this same script, for a before/after:

    python benchmarks/bench_trl_route.py --seeds 13 --templates qwen2_5,qwen3
    python benchmarks/bench_trl_route.py --unique 2000 --templates qwen2_5,qwen3
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent


def _setup(root: Path) -> None:
    sys.path.insert(0, str(root))
    sys.path.insert(1, str(_HERE.parent))  # this tree's benchmarks/ helpers when --root is another tree


def _rows(seeds: int, unique: int, folder: Path) -> tuple[Any, list[str]]:
    import datasets

    import whileai_datasets  # noqa: F401  (registers whileai/export)

    if unique:
        from benchmarks._unique_rows import corpus, unique_dataset

        return unique_dataset(unique), corpus()
    from tests.conftest import seeded_rows

    rows = [row for seed in range(seeds) for row in seeded_rows(seed)]
    source = folder / "seeded.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    ds = datasets.load_dataset("whileai/export", data_files=str(source), split="train", cache_dir=str(folder / "c"))
    return ds, [json.dumps(r) for r in rows[:50]]


def _template(name: str, root: Path) -> str:
    from tests.support.tiny_lm import trl_template

    own = root / "templates" / f"{name}.jinja"
    return own.read_text(encoding="utf-8") if name != "qwen3" and own.exists() else trl_template(name)


def measure(args: argparse.Namespace) -> dict[str, Any]:
    root = Path(args.root).resolve()
    _setup(root)
    import whileai_datasets
    from tests.support.tiny_lm import LLAMA3_TOKENS, train_tokenizer
    from whileai_datasets.auditing import counting
    from whileai_datasets.tokenize import tokenize

    assert whileai_datasets.__file__.startswith(str(root)), whileai_datasets.__file__
    route_seconds: list[float] = []
    real_route = counting.Run.hub_route

    def timed_route(self: Any, *a: Any, **k: Any) -> Any:
        start = time.perf_counter()
        try:
            return real_route(self, *a, **k)
        finally:
            route_seconds.append(time.perf_counter() - start)

    out: dict[str, Any] = {"root": str(root), "templates": {}}
    with tempfile.TemporaryDirectory(dir=_HERE / ".data" if (_HERE / ".data").exists() else None) as tmp:
        folder = Path(tmp)
        ds, texts = _rows(args.seeds, args.unique, folder)
        out["rows"] = ds.num_rows
        for name in args.templates.split(","):
            special = LLAMA3_TOKENS if name.startswith("llama") else {}
            tok = train_tokenizer(texts, chat_template=_template(name, root), **special)
            whileai_datasets.audit(ds, tokenizer=tok)  # warm: templates compiled, caches filled
            seconds: dict[str, list[float]] = {"map": [], "audit": [], "audit, no route": [], "route alone": []}
            found = None
            for round_ in range(args.rounds):
                start = time.perf_counter()
                ds.with_format("arrow").map(tokenize(tok), batched=True,
                                            cache_file_name=str(folder / f"{name}-{round_}.arrow"))
                seconds["map"].append(time.perf_counter() - start)
                for label in (("audit", "audit, no route") if round_ % 2 == 0 else ("audit, no route", "audit")):
                    route_seconds.clear()
                    counting.Run.hub_route = timed_route if label == "audit" else (lambda *a, **k: None)
                    start = time.perf_counter()
                    result = whileai_datasets.audit(ds, tokenizer=tok)
                    seconds[label].append(time.perf_counter() - start)
                    counting.Run.hub_route = real_route
                    if label == "audit":
                        seconds["route alone"].append(sum(route_seconds))
                        found = result
            median = {k: statistics.median(v) for k, v in seconds.items()}
            out["templates"][name] = {
                "seconds": median, "audit / map": median["audit"] / median["map"],
                "audit, no route / map": median["audit, no route"] / median["map"],
                "route / map": median["route alone"] / median["map"],
                "supervised_tokens": found.supervised_tokens if found is not None else None,
                "trl_default": (found.trainers or {}).get("trl-default") if found is not None else None}
            print(f"  {name}: " + ", ".join(f"{k} {v:.2f} s" for k, v in median.items())
                  + f"; audit/map {median['audit'] / median['map']:.2f}x, no route/map "
                  f"{median['audit, no route'] / median['map']:.2f}x, route/map "
                  f"{median['route alone'] / median['map']:.2f}x", file=sys.stderr)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=13, help="seeded_rows seeds (about 29 rows each)")
    parser.add_argument("--unique", type=int, default=0, help="rows with unique texts instead of seeded rows")
    parser.add_argument("--templates", default="qwen2_5,qwen3")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--root", default=str(_HERE.parent), help="the tree whose whileai_datasets is measured")
    print(json.dumps(measure(parser.parse_args())))


if __name__ == "__main__":
    main()
