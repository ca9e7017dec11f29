"""Every code example of README.md and docs/ runs, as written, on the bundled sample and the offline tokenizer.

The blocks are read at run time (README.md may be rewritten: whatever python blocks it holds then are
run), classified by tests/support/docs_examples.py and run page by page in subprocesses: one for the setup page
and then every other page, one more (started once the setup page has run) with `HF_ENDPOINT` pointed at
the local test hub for the blocks marked `docs-test: hub`. Each
example is one test here; those that cannot run are skipped with the reason their page gives, and the
end of the run prints how many examples ran and lists the skipped ones.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.docs_examples import ROOT, SETUP_PAGE, Example, collect, plan
from tests.support.processes import stop

EXAMPLES = collect()
RUNNER = Path(__file__).parent / "support" / "docs_examples.py"
HUB_SERVER = Path(__file__).with_name("hub_server")
HUB_TOKEN, HUB_USER = "hf_docs_examples_token", "me"
TIMEOUT = 900


class _Runner:
    """The runner on ``examples``, started; with ``ready``, it writes that file once the setup page has run."""

    def __init__(self, examples: list[Example], base: Path, work: Path, env: dict[str, str],
                 ready: Path | None = None) -> None:
        work.mkdir(parents=True, exist_ok=True)
        plan_file, self.results_file, self.log = work / "plan.json", work / "results.json", work / "runner.log"
        plan_file.write_text(plan(examples, base, work, ready), encoding="utf-8")
        self.started = time.monotonic()
        with self.log.open("w") as output:
            self.process = subprocess.Popen([sys.executable, str(RUNNER), str(plan_file), str(self.results_file)],
                                            env=env, cwd=work, stdout=output, stderr=subprocess.STDOUT)

    def wait_for(self, ready: Path) -> None:
        """Until ``ready`` is written, or the runner has ended (its results then say why)."""
        while not ready.exists() and self.process.poll() is None:
            if time.monotonic() - self.started > TIMEOUT:
                stop(self.process)
                pytest.fail(f"the docs examples runner did not finish {SETUP_PAGE} within {TIMEOUT}s:\n"
                            f"{self.log.read_text()}")
            time.sleep(0.1)

    def finish(self) -> dict[str, Any]:
        """Wait for the runner; its results."""
        try:
            code = self.process.wait(timeout=max(1.0, TIMEOUT - (time.monotonic() - self.started)))
        except subprocess.TimeoutExpired:
            stop(self.process)
            raise
        if code != 0 or not self.results_file.exists():
            pytest.fail(f"the docs examples runner exited with {code}:\n{self.log.read_text()}")
        results: dict[str, Any] = json.loads(self.results_file.read_text(encoding="utf-8"))
        return results


def _environment(home: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("HF_", "WHILEAI_"))}
    env.update(PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])), HF_HOME=str(home),
               HF_DATASETS_CACHE=str(home / "datasets"), HF_HUB_OFFLINE="1", HF_DATASETS_DISABLE_PROGRESS_BARS="1",
               TOKENIZERS_PARALLELISM="false", TRANSFORMERS_VERBOSITY="error", PYTHONWARNINGS="ignore")
    return env


class _LocalHub:
    def __init__(self, root: Path) -> None:
        port_file = root / "port"
        self.stderr = root / "server.stderr"
        command = [sys.executable, str(HUB_SERVER), "--port", "0", "--port-file", str(port_file),
                   "--data-dir", str(root / "data"), "--log", str(root / "requests.jsonl"),
                   f"--token={HUB_TOKEN}:{HUB_USER}"]
        with self.stderr.open("w") as stderr:
            self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=stderr, cwd=ROOT,
                                            env={**os.environ, "PYTHONPATH": str(ROOT)})
        deadline = time.monotonic() + 30
        while not port_file.exists():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the local hub did not start:\n{self.stderr.read_text()}")
            time.sleep(0.05)
        self.url = f"http://127.0.0.1:{int(port_file.read_text())}"

    def stop(self) -> None:
        stop(self.process)


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("docs-examples")
    base = root / "example-folder"
    base.mkdir()
    runnable = [e for e in EXAMPLES if e.skip is None]
    setup = [e for e in runnable if e.page == SETUP_PAGE]
    if not setup:
        pytest.fail(f"{SETUP_PAGE} has no runnable example: it builds the folder every other page runs in")
    hub_examples = [e for e in runnable if e.hub]
    hub = _LocalHub(root) if hub_examples else None  # it starts while the setup page runs
    local: _Runner | None = None
    try:
        # one process runs the setup page, then the other pages; once the setup page has built the
        # folder, the Hub pages start beside them (two processes, two cores)
        ready = root / "setup-done.json"
        local = _Runner(setup + [e for e in runnable if not e.hub and e.page != SETUP_PAGE], base, root / "local",
                        _environment(root / "home"), ready)
        local.wait_for(ready)
        found: dict[str, Any] = {}
        if hub is not None:
            env = _environment(root / "hub-home")
            env.update(HF_ENDPOINT=hub.url, HF_TOKEN=HUB_TOKEN, HF_HUB_DISABLE_XET="1")
            del env["HF_HUB_OFFLINE"]
            found.update(_Runner(hub_examples, base, root / "hub", env).finish())
        found.update(local.finish())
    except BaseException:
        if local is not None:
            stop(local.process)
        raise
    finally:
        if hub is not None:
            hub.stop()
    yield found
    _summary(request, found)


def _summary(request: pytest.FixtureRequest, found: dict[str, Any]) -> None:
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    with capture.global_and_fixture_disabled() if capture is not None else contextlib.nullcontext():
        _write_summary(reporter, found)


def _write_summary(reporter: Any, found: dict[str, Any]) -> None:
    ran = [e for e in EXAMPLES if e.id in found]
    passed = sum(found[e.id]["status"] == "passed" for e in ran)
    langs = {lang: sum(e.lang == lang for e in ran) for lang in ("python", "console", "bash")}
    skipped = [e for e in EXAMPLES if e.skip is not None]
    pages = len({e.page for e in EXAMPLES})
    reporter.write_line("")
    reporter.write_line(f"docs examples: {len(ran)} run ({passed} passed; {langs['python']} python, "
                        f"{langs['console'] + langs['bash']} shell, {sum(e.hub for e in ran)} against the local hub) "
                        f"of {len(EXAMPLES)} found on {pages} pages; {len(skipped)} skipped:")
    for example in skipped:
        reporter.write_line(f"  {example.id} ({example.lang}): {example.skip}")
    slowest = sorted(ran, key=lambda e: -float(found[e.id].get("seconds", 0)))[:3]
    reporter.write_line("slowest: " + ", ".join(f"{e.id} {found[e.id].get('seconds', 0):.1f}s" for e in slowest))


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.id for e in EXAMPLES])
def test_docs_example_runs_as_written(example: Example, results: dict[str, Any]) -> None:
    if example.skip is not None:
        pytest.skip(f"{example.id}: {example.skip}")
    result = results[example.id]
    assert result["status"] == "passed", f"{example.id} ({example.lang}) failed:\n{example.code}\n{result['error']}"


def test_every_page_has_an_example_or_is_prose_only() -> None:
    """The collector finds blocks on the pages that show code (a fence it misreads would vanish silently)."""
    pages = {e.page for e in EXAMPLES}
    for page in ("README.md", SETUP_PAGE, "docs/getting-started.md", "docs/token-masks.md"):
        assert page in pages, f"no code example found on {page}"


def test_the_readme_says_the_figures_its_audit_example_prints(results: dict[str, Any]) -> None:
    """README's prose after its audit example quotes the audit's own figures on the bundled sample (rows cut,
    rows left with nothing to train, the naive ratio): they come from the one run, never from memory."""
    import re

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    example = next(e for e in EXAMPLES if e.page == "README.md" and "whileai-datasets audit run.jsonl" in e.code)
    printed = results[example.id]["printed"]
    said = re.search(r"cuts (\d+) of the (\d+) rows and leaves (\d+) with nothing to train, and training every "
                     r"token would\s+train ([\d.]+)x the tokens", readme)
    assert said, "README's sentence after the audit example changed: update this test with it"
    cut, rows, nothing, ratio = said.groups()
    assert re.search(rf"\btruncated\s+{cut} rows \(", printed), printed
    assert re.search(rf"\bzero-loss\s+{nothing} rows \(", printed), printed
    assert re.search(rf"^rows\s+{rows} ", printed, re.M), printed
    assert re.search(rf"naive ratio\s+{re.escape(ratio)}x", printed), printed
