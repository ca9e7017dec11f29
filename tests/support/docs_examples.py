"""The code examples of README.md and docs/: found, classified and run as a reader would run them.

Used by tests/test_docs_examples.py (which runs this file as a script in a subprocess, one per
environment) and importable for its `collect()`.

What runs: every ```python block, and every ```console / ```bash block whose commands are all
`whileai-datasets ...`. The blocks of one page share one namespace and one working folder, in page
order, like a reader pasting them into one session. Every page starts in a fresh copy of the example
folder that docs/offline.md builds (the bundled sample as `run.jsonl`, `tools.json`, `system.txt`;
`tiny-tokenizer/`, `tiny-model/`), so a page's examples run on their own.

A block that cannot run here says why, in the page, with a marker the collector reads:

* inside the block, a line `# docs-test: skip: REASON` (shown to the reader too), or
* an HTML comment on the line just before the fence: `<!-- docs-test: skip: REASON -->`.

Other markers (same two places): `docs-test: hub` runs the block against the local test hub
(tests/hub_server, `HF_ENDPOINT` set before anything is imported; skipped where it cannot start);
`docs-test: exit N` expects a shell block to exit with N (an example of a refusal).
Shell blocks that install packages (`pip install`) or run another program are skipped with that reason.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shlex
import shutil
import sys
import time
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path

import mktestdocs

ROOT = Path(__file__).resolve().parent.parent.parent
SETUP_PAGE = "docs/offline.md"
LANGS = ("python", "console", "bash")
_MARKER = re.compile(r"docs-test:\s*(?P<kind>skip|hub|exit)\b:?\s*(?P<arg>.*?)\s*(?:-->)?\s*$")


@dataclass(frozen=True)
class Example:
    page: str  # relative to the repository root
    line: int  # of the opening fence, 1-based
    lang: str
    code: str
    skip: str | None = None  # why it does not run here
    hub: bool = False  # runs against the local test hub
    exit: int = 0  # expected exit code of a shell block

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def pages() -> list[Path]:
    """README.md and every page of docs/ (the build hooks are code, not pages); the setup page first."""
    docs = sorted(p for p in (ROOT / "docs").rglob("*.md") if "hooks" not in p.relative_to(ROOT / "docs").parts)
    found = [ROOT / SETUP_PAGE, ROOT / "README.md", *(p for p in docs if p != ROOT / SETUP_PAGE)]
    return [p for p in found if p.exists()]


def _fences(text: str) -> list[tuple[int, str, str]]:
    """(line of the opening fence, language, the line before it) of every top-level fenced block."""
    lines, found, inside = text.split("\n"), [], None
    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        if not stripped.startswith("```"):
            continue
        if inside is None:
            inside = stripped[3:].strip()
            found.append((number, inside, lines[number - 2].strip() if number > 1 else ""))
        else:
            inside = None
    return found


def _markers(code: str, before: str) -> dict[str, str]:
    found = {}
    for line in [before, *code.splitlines()]:
        if "docs-test:" in line:
            match = _MARKER.search(line)
            if match is None:
                raise ValueError(f"cannot read the docs-test marker {line!r} (docs-test: skip: REASON | hub | exit N)")
            found[match["kind"]] = match["arg"]
    return found


def _shell_reason(code: str) -> str | None:
    commands = _commands(code)
    if any("pip install" in command for command in commands):
        return "installs packages (needs the network)"
    others = sorted({command.split()[0] for command in commands if not command.startswith("whileai-datasets ")})
    if others:
        return f"runs {', '.join(others)}, not only whileai-datasets"
    if any(char in command for command in commands for char in "|&;<>`$"):
        return "uses the shell's pipes, redirections or substitutions"
    return None


def _commands(code: str) -> list[str]:
    """The commands of a shell block: `$ `-prompted lines if it has any (the rest is output), with
    backslash continuations joined."""
    lines = code.splitlines()
    if any(line.startswith("$ ") for line in lines):
        picked, keep = [], False
        for line in lines:
            if line.startswith("$ "):
                picked.append(line[2:])
                keep = line.endswith("\\")
            elif keep:
                picked.append(line)
                keep = line.endswith("\\")
        lines = picked
    joined = "\n".join(line for line in lines if line.strip() and not line.lstrip().startswith("#"))
    return [command.strip() for command in joined.replace("\\\n", " ").split("\n") if command.strip()]


def collect() -> list[Example]:
    examples = []
    for path in pages():
        text = path.read_text(encoding="utf-8")
        page = path.relative_to(ROOT).as_posix()
        fences = [(line, lang, before) for line, lang, before in _fences(text) if lang in LANGS]
        blocks = {lang: iter(mktestdocs.grab_code_blocks(text, lang=lang)) for lang in LANGS}
        for line, lang, before in fences:
            code = next(blocks[lang])
            marks = _markers(code, before)
            skip = marks.get("skip") or None
            if "skip" in marks and not skip:
                raise ValueError(f"{page}:{line}: a docs-test skip marker must say why (docs-test: skip: REASON)")
            if skip is None and lang != "python":
                skip = _shell_reason(code)
            examples.append(Example(page, line, lang, code, skip, "hub" in marks, int(marks.get("exit") or 0)))
    return examples


# --- running (in the subprocess) ---------------------------------------------------------------------
def _run_python(example: Example, namespace: dict[str, object]) -> None:
    exec(compile(example.code, f"{example.page}:{example.line}", "exec"), namespace)  # noqa: S102


def _run_shell(example: Example) -> str:
    """Each command runs through the console script's own entry point, in this process (a new
    interpreter per command would spend seconds importing datasets and transformers again). Returns what
    the commands printed (the prose beside an example may quote it: tests/test_docs_examples.py checks)."""
    from whileai_datasets.cli import main

    printed = []
    for command in _commands(example.code):
        argv = shlex.split(command)
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv[1:])
            except SystemExit as stopped:  # argparse's usage errors
                code = stopped.code if isinstance(stopped.code, int) else 1
        if code != example.exit:
            raise RuntimeError(f"`{command}` exited with {code}, expected {example.exit}:\n"
                               f"{out.getvalue()}{err.getvalue()}")
        printed.append(out.getvalue())
    return "".join(printed)


def run_pages(examples: list[Example], base: Path, work: Path, ready: Path | None = None) -> dict[str, dict[str, str]]:
    """Run ``examples`` page by page; the setup page (if given, first) builds ``base``, every other page
    runs in a fresh copy of it, and ``ready`` (if given) is written once the setup page has run, with its
    results. Returns {example id: {"status": "passed" | "failed", "error": ...}}."""
    results: dict[str, dict[str, str]] = {}
    by_page: dict[str, list[Example]] = {}
    for example in examples:
        by_page.setdefault(example.page, []).append(example)
    for number, (page, blocks) in enumerate(by_page.items()):
        if page == SETUP_PAGE:
            folder = base
        else:
            folder = work / f"{number:02d}-{Path(page).stem}"
            shutil.copytree(base, folder)
        os.chdir(folder)
        namespace: dict[str, object] = {"__name__": "__main__"}
        failed = None
        for example in blocks:
            if failed is not None:
                results[example.id] = {"status": "failed", "error": f"not run: {failed} failed before it"}
                continue
            started = time.perf_counter()
            printed = ""
            try:
                if example.lang == "python":
                    _run_python(example, namespace)
                else:
                    printed = _run_shell(example)
            except BaseException:  # noqa: BLE001 (SystemExit from a CLI example too)
                failed = example.id
                results[example.id] = {"status": "failed", "error": traceback.format_exc(limit=-8)}
            else:
                results[example.id] = {"status": "passed", "error": "", "printed": printed}
            results[example.id]["seconds"] = round(time.perf_counter() - started, 2)
        if page == SETUP_PAGE and ready is not None:
            _write_atomically(ready, json.dumps(results))
    return results


def _write_atomically(path: Path, text: str) -> None:
    """``text`` into ``path`` all at once: a reader polling for the file never sees it half written."""
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text, encoding="utf-8")
    partial.replace(path)


def main() -> None:
    plan = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    examples = [Example(**example) for example in plan["examples"]]
    ready = Path(plan["ready"]) if plan.get("ready") else None
    results = run_pages(examples, Path(plan["base"]), Path(plan["work"]), ready)
    Path(sys.argv[2]).write_text(json.dumps(results), encoding="utf-8")


def plan(examples: list[Example], base: Path, work: Path, ready: Path | None = None) -> str:
    return json.dumps({"examples": [asdict(e) for e in examples], "base": str(base), "work": str(work),
                       "ready": str(ready) if ready else None})


if __name__ == "__main__":
    main()
