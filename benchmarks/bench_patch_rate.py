"""How many chat templates ``with_generation()`` patches, and why it refuses the rest, per class.

Every set of templates this checkout can reach:

* ``trl``: every ``*.jinja`` in the installed trl package (the ``_training`` twins already have blocks);
* ``shipped``: this package's own ``templates/*.jinja``;
* ``written_here``: the templates written for the tests (``tests/chat_template/templates``: single files,
  the failure-class and guard folders);
* ``corpus:<tier>``: with ``--corpus DIR``, a public collection fetched from the package registries by
  ``benchmarks/fetch_template_corpus.py`` (llama.cpp, vLLM, axolotl, unsloth, ...), split by its
  SOURCES.tsv tier (``model``: templates packages ship for models; ``pooling``, ``snippet``).

Every refusal is counted under its ``refusal_class``. ``rate`` is patched over patchable (neither
with blocks already nor refused as a guard/classifier); ``rate_rendering`` also leaves out
``no-assistant-turn`` (the template fails on every probe conversation, or renders no assistant turn).

    python benchmarks/bench_patch_rate.py [--corpus benchmarks/.data/template-corpus/templates] [--jobs 2]
        [--masks] [--verbose] [--json]

``--masks`` also checks every patched template's mask under transformers (``_mask_agreement.py``);
one that differs is counted as ``patched, mask differs`` (not in ``patched``).
"""

from __future__ import annotations

import argparse
import csv
import json
import multiprocessing
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HERE = REPO / "tests" / "chat_template" / "templates"
SHIPPED = REPO / "templates"
NOT_COUNTED = ("has blocks", "refused: classifier")


def _trl_templates() -> list[Path]:
    import trl

    folder = Path(trl.__file__).parent / "chat_templates"
    return sorted(folder.glob("*.jinja"))


def outcome(path: str, masks: bool = False) -> str:
    """'patched', 'has blocks', 'refused: <class>' or 'crash: <error type>' for one template file; with
    ``masks``, a patched template whose transformers mask differs from ours is 'patched, mask differs'."""
    from whileai_datasets import ChatTemplate
    from whileai_datasets.errors import TemplateError

    try:
        chat = ChatTemplate(Path(path).read_text(encoding="utf-8"), name=Path(path).name)
        if chat.generation_blocks():
            return "has blocks"
        patched = chat.with_generation()
    except TemplateError as err:
        return f"refused: {getattr(err, 'refusal_class', 'unclassified')}"
    except Exception as err:  # noqa: BLE001 - a crash is a finding, counted apart
        return f"crash: {type(err).__name__}"
    if masks:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from _mask_agreement import mask_disagreement

        if mask_disagreement(patched) is not None:
            return "patched, mask differs"
    return "patched"


def _outcome_with_masks(path: str) -> str:
    return outcome(path, masks=True)


def _outcomes(paths: list[Path], jobs: int, masks: bool = False) -> list[str]:
    work = _outcome_with_masks if masks else outcome
    if jobs <= 1:
        return [work(str(p)) for p in paths]
    with multiprocessing.get_context("spawn").Pool(jobs, maxtasksperchild=25) as pool:
        return pool.map(work, [str(p) for p in paths], chunksize=4)


def figures(outcomes: dict[str, str], seconds: float) -> dict[str, object]:
    counts = Counter(outcomes.values())
    patchable = sum(n for k, n in counts.items() if k not in NOT_COUNTED)
    rendering = patchable - counts["refused: no-assistant-turn"]
    return {
        "templates": len(outcomes),
        "patched": counts["patched"],
        "patchable": patchable,
        "rate": round(counts["patched"] / patchable, 3) if patchable else None,
        "rate_rendering": round(counts["patched"] / rendering, 3) if rendering else None,
        "by_outcome": dict(sorted(counts.items())),
        "refused": {k: v for k, v in sorted(outcomes.items()) if v != "patched" and v not in NOT_COUNTED},
        "seconds": round(seconds, 1),
    }


def measure(paths: list[Path], root: Path, jobs: int = 1, masks: bool = False) -> dict[str, object]:
    start = time.perf_counter()
    results = _outcomes(paths, jobs, masks)
    return figures({str(p.relative_to(root)): r for p, r in zip(paths, results)}, time.perf_counter() - start)


def corpus_tiers(root: Path) -> dict[str, str]:
    """Template file (relative to ``root``) -> tier, from SOURCES.tsv (``corpus`` for files it does not list)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _template_sources import tier

    listed: dict[str, str] = {}
    sources = root / "SOURCES.tsv"
    if sources.exists():
        with sources.open(encoding="utf-8") as handle:
            for row in csv.DictReader(handle, delimiter="\t"):
                if not row["file"].startswith("dup:"):
                    stem = Path(row["file"]).name.removesuffix(".jinja")
                    listed[row["file"]] = row.get("tier") or tier(row["path_in_package"], row["kind"], stem)
    return {str(p.relative_to(root)): listed.get(str(p.relative_to(root)), "corpus")
            for p in sorted(root.rglob("*.jinja"))}


def measure_corpus(root: Path, jobs: int, masks: bool = False) -> dict[str, dict[str, object]]:
    tiers = corpus_tiers(root)
    start = time.perf_counter()
    results = dict(zip(tiers, _outcomes([root / name for name in tiers], jobs, masks)))
    seconds = time.perf_counter() - start
    by_tier: dict[str, dict[str, str]] = defaultdict(dict)
    for name, result in results.items():
        by_tier[tiers[name]][name] = result
    return {f"corpus:{t}": figures(by_tier[t], seconds * len(by_tier[t]) / len(results)) for t in sorted(by_tier)}


def _print(report: dict[str, dict[str, object]], verbose: bool) -> None:
    for name, found in report.items():
        rate = found["rate"]
        print(f"{name}: {found['patched']} of {found['patchable']} patchable templates patched "
              f"({rate if rate is None else f'{rate:.1%}'}; {found['templates']} in all, {found['seconds']} s; "
              f"without no-assistant-turn: {found['rate_rendering']})")
        for result, n in found["by_outcome"].items():  # type: ignore[attr-defined]
            print(f"  {result:40s} {n}")
        if verbose or not name.startswith("corpus"):
            for stem, result in found["refused"].items():  # type: ignore[attr-defined]
                print(f"    {stem}: {result}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, help="a folder of .jinja templates (fetch_template_corpus.py's)")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (spawned)")
    parser.add_argument("--masks", action="store_true",
                        help="also check each patched template's transformers assistant mask against ours")
    parser.add_argument("--verbose", action="store_true", help="list every corpus refusal too")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    trl_paths = _trl_templates()
    report = {"trl": measure(trl_paths, trl_paths[0].parent, args.jobs, args.masks),
              "shipped": measure(sorted(SHIPPED.glob("*.jinja")), SHIPPED, args.jobs, args.masks),
              "written_here": measure(sorted(HERE.rglob("*.jinja")), HERE, args.jobs, args.masks)}
    if args.corpus is not None:
        if not args.corpus.is_dir():
            raise SystemExit(f"--corpus {args.corpus}: no such folder. Run benchmarks/fetch_template_corpus.py "
                             "first (it writes benchmarks/.data/template-corpus/templates).")
        report.update(measure_corpus(args.corpus, args.jobs, args.masks))
    if args.json:
        print(json.dumps(report, indent=2))
        return
    _print(report, args.verbose)


if __name__ == "__main__":
    main()
