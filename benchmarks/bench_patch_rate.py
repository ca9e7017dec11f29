"""How many chat templates ``with_generation()`` patches, and why it refuses the rest, per class.

Two sets: trl's shipped templates (every ``*.jinja`` in the installed trl
package; the ``_training`` twins already have blocks) and the failure-class templates written for the tests
(``tests/chat_template/templates``: the class folders and the single files).
Every refusal is counted under its ``refusal_class``.

    python benchmarks/bench_patch_rate.py [--json]
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from pathlib import Path

from whileai_datasets import ChatTemplate
from whileai_datasets.errors import TemplateError

HERE = Path(__file__).resolve().parent.parent / "tests" / "chat_template" / "templates"


def _trl_templates() -> list[Path]:
    import trl

    folder = Path(trl.__file__).parent / "chat_templates"
    return sorted(folder.glob("*.jinja"))


def _written_here() -> list[Path]:
    return sorted(HERE.rglob("*.jinja"))


def _outcome(path: Path) -> str:
    try:
        chat = ChatTemplate.from_file(path)
        if chat.generation_blocks():
            return "has blocks"
        chat.with_generation()
    except TemplateError as err:
        return f"refused: {getattr(err, 'refusal_class', 'unclassified')}"
    return "patched"


def measure(paths: list[Path], root: Path) -> dict[str, object]:
    start = time.perf_counter()
    outcomes = {str(p.relative_to(root)): _outcome(p) for p in paths}
    counts = Counter(outcomes.values())
    patchable = sum(n for k, n in counts.items() if k != "has blocks" and k != "refused: classifier")
    return {
        "templates": len(paths),
        "patched": counts["patched"],
        "patchable": patchable,
        "rate": round(counts["patched"] / patchable, 3) if patchable else None,
        "by_outcome": dict(sorted(counts.items())),
        "refused": {k: v for k, v in outcomes.items() if v.startswith("refused")},
        "seconds": round(time.perf_counter() - start, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    trl_paths = _trl_templates()
    report = {"trl": measure(trl_paths, trl_paths[0].parent), "written_here": measure(_written_here(), HERE)}
    if args.json:
        print(json.dumps(report, indent=2))
        return
    for name, figures in report.items():
        print(f"{name}: {figures['patched']} of {figures['patchable']} patchable templates patched "
              f"({figures['templates']} in all, {figures['seconds']} s)")
        for outcome, n in figures["by_outcome"].items():  # type: ignore[attr-defined]
            print(f"  {outcome:40s} {n}")
        for stem, outcome in figures["refused"].items():  # type: ignore[attr-defined]
            print(f"    {stem}: {outcome}")


if __name__ == "__main__":
    main()
