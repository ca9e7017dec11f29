"""Move or rename Python modules with ``git mv`` and fix every import and dotted name that points at them.

Deterministic and re-runnable: a move whose source is already gone only fixes references, so after
merging a branch that still imports the old paths, running the same moves again brings it up to date.

    python tools/move_modules.py MOVES_FILE [--dry-run]

MOVES_FILE holds one move a line, ``old.dotted.module new.dotted.module`` (``#`` starts a comment).
A move of a package (a folder) moves the folder. References are fixed in every tracked ``.py``,
``.md``, ``.yml`` and ``.toml`` file (CHANGELOG.md aside: it tells history):

- ``from pkg import old`` becomes ``from new_pkg import new`` (``new as old`` when only the name changed
  and the code calls it ``old``), names moving to different packages split into one line each;
- the same statement of one name inside a string (code a test or benchmark runs in a subprocess) or a doc;
- every other dotted spelling ``old.module`` (absolute imports, strings, docs) becomes ``new.module``.
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The top-level folders that hold a package under another name (pyproject's package-dir).
MAPPED = {"whileai_datasets.builders": "builders", "whileai_datasets.templates": "templates"}


def read_moves(path: Path) -> list[tuple[str, str]]:
    moves = []
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            old, new = line.split()
            moves.append((old, new))
    return moves


def module_path(module: str) -> Path:
    """The file or folder of a dotted module (mapped folders followed; ``tests`` is the tests folder)."""
    for dotted, folder in MAPPED.items():
        if module == dotted or module.startswith(dotted + "."):
            module = folder + module[len(dotted):]
    base = ROOT.joinpath(*module.split("."))
    return base if base.is_dir() else base.with_suffix(".py")


def git_mv(old: str, new: str, dry_run: bool) -> None:
    source = module_path(old)
    target = module_path(new) if source.is_dir() else ROOT.joinpath(*new.split(".")).with_suffix(".py")
    if not source.exists():
        return  # moved already: only the references are fixed
    print(f"git mv {source.relative_to(ROOT)} {target.relative_to(ROOT)}")
    if dry_run:
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    init = target.parent / "__init__.py"
    if target.parent != ROOT / "tests" and not init.exists() and (source.parent / "__init__.py").exists():
        init.write_text("")
        subprocess.run(["git", "add", str(init)], cwd=ROOT, check=True)
    subprocess.run(["git", "mv", str(source), str(target)], cwd=ROOT, check=True)


def _split(module: str) -> tuple[str, str]:
    package, _, name = module.rpartition(".")
    return package, name


def fix_from_imports(text: str, moves: list[tuple[str, str]]) -> str:
    """``from package import name`` statements whose name moved, rewritten (line by line, bottom up)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return text
    renamed = {_split(old): _split(new) for old, new in moves}
    lines = text.splitlines(keepends=True)
    statements = [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module and n.level == 0]
    for node in sorted(statements, key=lambda n: n.lineno, reverse=True):
        if not any((node.module, alias.name) in renamed for alias in node.names):
            continue
        groups: dict[str, list[str]] = {}
        for alias in node.names:
            package, name = renamed.get((node.module, alias.name), (node.module, alias.name))
            local = alias.asname or alias.name
            groups.setdefault(package, []).append(name if local == name else f"{name} as {local}")
        first, last = node.lineno - 1, node.end_lineno or node.lineno
        indent = re.match(r"\s*", lines[first]).group(0)
        tail = lines[last - 1].rstrip("\n")
        comment = tail[tail.index("#"):] if "#" in tail and ")" not in tail[tail.index("#"):] else ""
        new_lines = [f"{indent}from {package} import {', '.join(names)}" for package, names in groups.items()]
        if comment:
            new_lines[-1] += f"  {comment}"
        lines[first:last] = [line + "\n" for line in new_lines]
    return "".join(lines)


def fix_from_text(text: str, moves: list[tuple[str, str]]) -> str:
    """``from package import old`` of one name inside strings and docs (code in a string is not parsed)."""
    for old, new in moves:
        (package, name), (new_package, new_name) = _split(old), _split(new)
        alias = "" if name == new_name else f" as {name}"
        text = re.sub(rf"\bfrom {re.escape(package)} import {re.escape(name)}\b(?!\s*(?:,|as\b))",
                      f"from {new_package} import {new_name}{alias}", text)
    return text


def fix_dotted(text: str, moves: list[tuple[str, str]]) -> str:
    text = fix_from_text(text, moves)
    for old, new in sorted(moves, key=lambda move: -len(move[0])):
        text = re.sub(rf"(?<![\w.]){re.escape(old)}(?![\w])", new, text)
    return text


def tracked_files() -> list[Path]:
    names = subprocess.run(["git", "ls-files", "*.py", "*.md", "*.yml", "*.toml"], cwd=ROOT, check=True,
                           capture_output=True, text=True).stdout.split()
    return [ROOT / name for name in names if name != "CHANGELOG.md" and (ROOT / name).is_file()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("moves", type=Path)
    parser.add_argument("--dry-run", action="store_true", help="print the moves and the files changed, change none")
    args = parser.parse_args()
    moves = read_moves(args.moves)
    for old, new in moves:
        git_mv(old, new, args.dry_run)
    for path in tracked_files():
        text = path.read_text()
        fixed = fix_dotted(fix_from_imports(text, moves) if path.suffix == ".py" else text, moves)
        if fixed != text:
            print(f"fixed {path.relative_to(ROOT)}")
            if not args.dry_run:
                path.write_text(fixed)


if __name__ == "__main__":
    main()
