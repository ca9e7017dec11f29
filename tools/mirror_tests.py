"""Make tests/ mirror the package: one folder per room, the shared helpers in tests/support/.

Deterministic and re-runnable (after merging a branch that adds tests at the old places, run it again):

    python tools/mirror_tests.py [--dry-run]

A test of one room moves into that room's folder (``tests/tokenizing`` for ``tokenize``: a folder named
``tokenize`` on pytest's path would hide the standard module); a test of the whole package (layout, public
API, packaging, CI, docs) or of a top-level module (``errors``, ``_options``, ``_files``, ``_compat``) stays
in tests/. A file moved one folder down has its ``Path(__file__)`` climbs made one longer, and every
reference to a moved file is fixed: ``tests.name`` imports and ``tests/name.py`` paths in tracked text.
A test file added later at the top of tests/ and not in ``ROOMS`` is listed at the end, to place by hand.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from move_modules import ROOT, fix_dotted, fix_from_imports

#: tests/ folder -> the top-level test modules (and one folder's) that belong in it
ROOMS = {
    "support": ("tiny_lm", "hf_chat", "processes", "near_miss_rows", "content_parts", "export_runs",
                "export_driver", "browser", "prefix_diff", "docs_examples", "ray_cluster", "ray_session"),
    "auditing": ("test_audit", "test_audit_export_parity", "test_audit_html", "test_audit_page_browser",
                 "test_audit_row_failures", "test_ray_audit", "test_one_truth"),
    "cli": ("test_cli", "test_cli_errors", "test_demo", "test_show_mask"),
    "export": ("test_export", "test_faults_io", "test_faults_kill",
               "test_uri_paths", "test_nothing_to_train", "test_own_tools"),
    "shaping": ("test_direct_file", "test_overwrite"),
    "ray_engine": ("test_ray_engine", "test_ray_cluster", "test_ray_tokenize"),
    "tokenizing": ("test_near_miss_tokenize", "test_trl_end_to_end", "test_content_parts_training"),
    "rows": ("test_features",),
    "builders": ("test_registry",),
    "reading": ("builders.test_read_errors", "builders.test_parallel"),
}
#: the tests of the package as a whole or of its top-level modules: they stay at the top of tests/
STAY = {"conftest", "test_layout", "test_public_api", "test_packaging", "test_ci", "test_docs_examples",
        "test_docs_site", "test_errors", "test_option_errors", "test_options", "test_files", "test_compat"}
TESTS = ROOT / "tests"


def moves() -> list[tuple[str, str]]:
    """(old dotted name under tests, new one) for every file listed in ROOMS."""
    found = []
    for folder, names in ROOMS.items():
        for name in names:
            found.append((f"tests.{name}", f"tests.{folder}.{name.rsplit('.', 1)[-1]}"))
    return found


def file_of(dotted: str) -> Path:
    return ROOT.joinpath(*dotted.split(".")).with_suffix(".py")


def deeper(text: str, levels: int) -> str:
    """``Path(__file__)`` climbs of a file moved `levels` folders down, made that much longer."""
    if levels <= 0:
        return text
    text = re.sub(r"(Path\(__file__\)(?:\.resolve\(\))?)\.parents\[(\d+)\]",
                  lambda m: f"{m.group(1)}.parents[{int(m.group(2)) + levels}]", text)
    text = re.sub(r"(Path\(__file__\)(?:\.resolve\(\))?)((?:\.parent)+)(?![\w\[])",
                  lambda m: f"{m.group(1)}{m.group(2)}" + ".parent" * levels, text)
    return text


def fix_paths(text: str, pairs: list[tuple[str, str]]) -> str:
    """``tests/name.py`` and ``"tests" / "name.py"`` spellings of a moved file, pointed at its new place."""
    for old, new in pairs:
        old_rel, new_rel = old.replace(".", "/") + ".py", new.replace(".", "/") + ".py"
        text = re.sub(rf"(?<![\w/]){re.escape(old_rel)}", new_rel, text)
        old_parts = " / ".join(f'"{p}"' for p in old_rel.split("/"))
        text = text.replace(old_parts, " / ".join(f'"{p}"' for p in new_rel.split("/")))
    return text


def fix_siblings(text: str, pairs: list[tuple[str, str]]) -> str:
    """``Path(__file__).with_name("name.py")`` in a file that stayed, pointed at the moved file's new folder."""
    for old, new in pairs:
        name, folder = old.rsplit(".", 1)[-1] + ".py", new.split(".")[1]
        text = text.replace(f'Path(__file__).with_name("{name}")', f'Path(__file__).parent / "{folder}" / "{name}"')
    return text


def tracked_text_files() -> list[Path]:
    names = subprocess.run(["git", "ls-files"], cwd=ROOT, check=True, capture_output=True, text=True).stdout.split()
    found = []
    for name in names:
        path = ROOT / name
        if name == "CHANGELOG.md" or not path.is_file() or path.suffix not in (".py", ".md", ".toml", ".yml", ""):
            continue
        found.append(path)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="print what would move and change; change nothing")
    args = parser.parse_args()
    pairs = moves()
    moved: dict[Path, int] = {}
    for old, new in pairs:
        source, target = file_of(old), file_of(new)
        if not source.exists():
            continue
        print(f"git mv {source.relative_to(ROOT)} {target.relative_to(ROOT)}")
        moved[target] = len(new.split(".")) - len(old.split("."))
        if args.dry_run:
            continue
        target.parent.mkdir(exist_ok=True)
        if not (target.parent / "__init__.py").exists():
            (target.parent / "__init__.py").write_text("")
            subprocess.run(["git", "add", str(target.parent / "__init__.py")], cwd=ROOT, check=True)
        subprocess.run(["git", "mv", str(source), str(target)], cwd=ROOT, check=True)
    for path in tracked_text_files():
        try:
            text = path.read_text()
        except (UnicodeDecodeError, FileNotFoundError):
            continue
        fixed = fix_from_imports(text, pairs) if path.suffix == ".py" else text
        fixed = fix_paths(fix_dotted(fixed, pairs), pairs)
        fixed = deeper(fixed, moved[path]) if path in moved else fix_siblings(fixed, pairs)
        if fixed != text:
            print(f"fixed {path.relative_to(ROOT)}")
            if not args.dry_run:
                path.write_text(fixed)
    known = {name.rsplit(".", 1)[-1] for names in ROOMS.values() for name in names} | STAY
    loose = sorted(p.stem for p in TESTS.glob("*.py") if p.stem not in known)
    if loose:
        print("not placed (add them to ROOMS or STAY):", ", ".join(loose))


if __name__ == "__main__":
    main()
