"""The audit against ``ds.map(tokenize)``, with and without the TRL route (issue 46), side by side in one process.

``audit(ds, tokenizer=tok, trl_default=True)`` also measures what TRL 1.16's default ``SFTTrainer`` labels on the
default config a publish makes of the rows (``hub.facts.shaped_for_trl``: per trained turn, the template's render of
the prompt with the generation prompt and of prompt + completion, encoded, labels after the common prefix, further
forms tried where the first is not exact); the default audit does not. Per template, in alternating rounds (medians
of ``--rounds``):

* map: ``ds.with_format("arrow").map(tokenize(tok), batched=True)`` (writes its cache file);
* audit: ``whileai_datasets.audit(ds, tokenizer=tok)``, the default (TRL's route not measured);
* audit, trl_default: the same with ``trl_default=True``;
* route alone: the seconds the route took inside that audit (``Run.hub_route`` timed).

Rows: whileai's seeded demo agent (``tests/conftest.py``'s ``seeded_rows``, ``--seeds`` seeds, offline), or
``--unique N`` rows with unique texts (``benchmarks/_unique_rows.py``). Tokenizers are trained here
(``tests/support/tiny_lm.py``). ``--root`` runs another tree's package (e.g. ``git archive int2`` unpacked) with
this same script, for a before/after; on a tree whose audit has no ``trl_default`` (it always measured the route),
"audit" is that audit with ``Run.hub_route`` replaced by a no-op in this process, and "audit, trl_default" its
own audit:

    python benchmarks/bench_trl_route.py --seeds 16 --templates qwen2_5,qwen3,llama3_1
    python benchmarks/bench_trl_route.py --unique 2000 --templates qwen2_5,qwen3
    python benchmarks/bench_trl_route.py --seeds 16 --templates qwen2_5,qwen3 --first-call --rounds 4

``--first-call``: each of the map and the default audit timed as the first call of a fresh process (the template
inspected and compiled there), ``--rounds`` processes each, alternating.
"""

from __future__ import annotations

import argparse
import inspect
import json
import statistics
import subprocess
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
    asks = "trl_default" in inspect.signature(whileai_datasets.audit).parameters  # else it always measured it
    route_seconds: list[float] = []
    real_route = counting.Run.hub_route

    def timed_route(self: Any, *a: Any, **k: Any) -> Any:
        start = time.perf_counter()
        try:
            return real_route(self, *a, **k)
        finally:
            route_seconds.append(time.perf_counter() - start)

    def run_audit(ds: Any, tok: Any, route: bool) -> Any:
        route_seconds.clear()
        counting.Run.hub_route = timed_route if route else real_route if asks else (lambda *a, **k: None)
        try:
            return whileai_datasets.audit(ds, tokenizer=tok, **({"trl_default": route} if asks else {}))
        finally:
            counting.Run.hub_route = real_route

    out: dict[str, Any] = {"root": str(root), "asks": asks, "templates": {}}
    with tempfile.TemporaryDirectory(dir=_HERE / ".data" if (_HERE / ".data").exists() else None) as tmp:
        folder = Path(tmp)
        ds, texts = _rows(args.seeds, args.unique, folder)
        out["rows"] = ds.num_rows
        for name in args.templates.split(","):
            special = LLAMA3_TOKENS if name.startswith("llama") else {}
            tok = train_tokenizer(texts, chat_template=_template(name, root), **special)
            run_audit(ds, tok, not args.skip_route)  # warm: templates compiled, caches filled
            labels = ("audit",) if args.skip_route else ("audit", "audit, trl_default")
            seconds: dict[str, list[float]] = {"map": [], **{label: [] for label in labels}}
            if not args.skip_route:
                seconds["route alone"] = []
            found = {}
            for round_ in range(args.rounds):
                start = time.perf_counter()
                ds.with_format("arrow").map(tokenize(tok), batched=True,
                                            cache_file_name=str(folder / f"{name}-{round_}.arrow"))
                seconds["map"].append(time.perf_counter() - start)
                for label in labels if round_ % 2 == 0 else labels[::-1]:
                    start = time.perf_counter()
                    found[label] = run_audit(ds, tok, label != "audit")
                    seconds[label].append(time.perf_counter() - start)
                    if label != "audit":
                        seconds["route alone"].append(sum(route_seconds))
            median = {k: statistics.median(v) for k, v in seconds.items()}
            ratios = {f"{k} / map": v / median["map"] for k, v in median.items() if k != "map"}
            out["templates"][name] = {
                "seconds": median, **ratios, "supervised_tokens": found["audit"].supervised_tokens,
                "trl_default": {label: (f.trainers or {}).get("trl-default") for label, f in found.items()}}
            print(f"  {name}: " + ", ".join(f"{k} {v:.2f} s" for k, v in median.items()) + "; "
                  + ", ".join(f"{k} {v:.2f}x" for k, v in ratios.items()), file=sys.stderr)
    return out


def first_call(args: argparse.Namespace) -> dict[str, Any]:
    """Per template, ``--rounds`` pairs of fresh processes, the order alternating: one times its first map, the
    other its first audit (each pays what a first call in a process pays: the template's inspection, compiling)."""
    out: dict[str, Any] = {"first_call": {}}
    for name in args.templates.split(","):
        seconds: dict[str, list[float]] = {"map": [], "audit": []}
        for round_ in range(args.rounds):
            for only in ("map", "audit") if round_ % 2 == 0 else ("audit", "map"):
                command = [sys.executable, __file__, "--only", only, "--templates", name, "--seeds", str(args.seeds),
                           "--unique", str(args.unique), "--root", args.root]
                done = subprocess.run(command, check=True, capture_output=True, text=True)
                seconds[only].append(json.loads(done.stdout.strip().splitlines()[-1])["seconds"])
        median = {k: statistics.median(v) for k, v in seconds.items()}
        out["first_call"][name] = {"seconds": median, "audit / map": median["audit"] / median["map"]}
        print(f"  {name} (first call in a fresh process): map {median['map']:.2f} s, audit {median['audit']:.2f} s; "
              f"audit / map {median['audit'] / median['map']:.2f}x", file=sys.stderr)
    return out


def only(args: argparse.Namespace) -> dict[str, Any]:
    """This process's first map or first audit (``--only``), after the rows and the tokenizer are made."""
    root = Path(args.root).resolve()
    _setup(root)
    import whileai_datasets
    from tests.support.tiny_lm import LLAMA3_TOKENS, train_tokenizer
    from whileai_datasets.tokenize import tokenize

    with tempfile.TemporaryDirectory(dir=_HERE / ".data" if (_HERE / ".data").exists() else None) as tmp:
        ds, texts = _rows(args.seeds, args.unique, Path(tmp))
        name = args.templates
        tok = train_tokenizer(texts, chat_template=_template(name, root),
                              **(LLAMA3_TOKENS if name.startswith("llama") else {}))
        start = time.perf_counter()
        if args.only == "map":
            ds.with_format("arrow").map(tokenize(tok), batched=True, cache_file_name=str(Path(tmp) / "map.arrow"))
        else:
            whileai_datasets.audit(ds, tokenizer=tok)
        return {"seconds": time.perf_counter() - start}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=13, help="seeded_rows seeds (about 29 rows each)")
    parser.add_argument("--unique", type=int, default=0, help="rows with unique texts instead of seeded rows")
    parser.add_argument("--templates", default="qwen2_5,qwen3")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--skip-route", action="store_true",
                        help="time the map and the default audit only (not the audit with trl_default=True)")
    parser.add_argument("--first-call", action="store_true",
                        help="time each one's first call in a fresh process instead (the map and the default audit)")
    parser.add_argument("--only", choices=("map", "audit"), help=argparse.SUPPRESS)  # one --first-call process
    parser.add_argument("--root", default=str(_HERE.parent), help="the tree whose whileai_datasets is measured")
    args = parser.parse_args()
    print(json.dumps(only(args) if args.only else first_call(args) if args.first_call else measure(args)))


if __name__ == "__main__":
    main()
