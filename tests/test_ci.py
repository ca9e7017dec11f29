"""CI runs what a newcomer runs: .ci/run makes a fresh venv and runs the README's two commands in it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _commands(readme: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / ".ci" / "readme_commands.py"), "/dev/stdin"], input=readme,
                          capture_output=True, text=True)


def test_ci_reads_the_readme_s_two_commands() -> None:
    done = _commands((ROOT / "README.md").read_text(encoding="utf-8"))
    assert done.returncode == 0, done.stderr
    install_and_demo, install_and_test = done.stdout.splitlines()
    assert install_and_demo.startswith("pip install . && ") and install_and_demo.endswith(" demo")
    assert install_and_test == 'pip install -e ".[test]" && python -m pytest'


@pytest.mark.parametrize("section", ["## Other\n```bash\nls\n```\n", "## Two commands\n```bash\nls\n```\n## Next\n",
                                     "## Two commands\n```bash\na\nb\n```\n```bash\nc\n```\n## Next\n"])
def test_a_readme_without_two_one_line_commands_stops_ci(section: str) -> None:
    done = _commands(section)
    assert done.returncode != 0 and "Two commands" in done.stderr


def test_ci_makes_a_fresh_venv_and_runs_every_readme_command_in_it() -> None:
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    made, activated = script.index('-m venv "$work/venv"'), script.index('. "$work/venv/bin/activate"')
    runs = script.index('for command in "${commands[@]}"')
    assert made < activated < runs
    assert ".ci/readme_commands.py README.md" in script


def _function(script: str, name: str) -> str:
    start = script.index(f"{name}() {{")
    return script[start:script.index("\n}\n", start) + 3]


def _stage_function(script: str) -> str:
    return _function(script, "stage")


def test_ci_runs_the_suite_on_the_oldest_stack_beside_the_newest() -> None:
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    started = script.index('start_beside "$oldest_log" env PYTHON="$python" bash "$root/.ci/datasets-matrix"')
    newest, trainers = script.index('for command in "${commands[@]}"'), script.index("python -m pytest -m trainers -n 0\n")
    ray = script.index("python -m pytest -m ray -n 0\n")  # deselected by the default run, so a stage of its own
    finished = script.index('finish_beside "$oldest" "$oldest_log"')
    assert script.index("set -euo pipefail") < started < newest < trainers < ray < finished
    matrix = (ROOT / ".ci" / "datasets-matrix").read_text(encoding="utf-8")
    # the Ray tests too, but for the cluster ones (the Ray stage runs them)
    assert '-m pytest "$@"\n' in matrix and '-m pytest -m "ray and not cluster" -n 0 "$@"' in matrix
    assert not script[finished:].split("\n", 1)[0].rstrip().endswith(("|| true", "|| :"))
    assert (ROOT / ".ci" / "datasets-matrix").read_text(encoding="utf-8").startswith("#!/usr/bin/env bash\n")


@pytest.mark.parametrize(("command", "passes"), [("true", True), ("false", False)])
def test_a_stage_run_beside_the_rest_shows_its_log_and_fails_ci_as_it_failed(command: str, passes: bool,
                                                                           tmp_path: Path) -> None:
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    functions = "\n".join(_function(script, name) for name in ("stage", "start_beside", "finish_beside"))
    body = (f"set -euo pipefail\nbackground=()\n{functions}\n"
            f"start_beside {tmp_path / 'log'} bash -c 'printf \"from %s\\\\n\" side; {command}'\n"
            "echo meanwhile\nstage 'the side' finish_beside \"${background[-1]}\" " f"{tmp_path / 'log'}\n"
            "echo next stage")
    done = subprocess.run(["bash", "-c", body], capture_output=True, text=True, timeout=60)
    assert (done.returncode == 0) is passes
    assert done.stdout.index("meanwhile") < done.stdout.index("== the side\n") < done.stdout.index("from side\n")
    assert bool(re.search(r"^== the side: passed in \d+s$", done.stdout, re.M)) is passes
    assert ("next stage" in done.stdout) is passes


@pytest.mark.parametrize(("command", "passes"), [("true", True), ("false", False)])
def test_a_ci_stage_logs_its_time_and_a_failing_one_stops_ci(command: str, passes: bool) -> None:
    stage = _stage_function((ROOT / ".ci" / "run").read_text(encoding="utf-8"))
    done = subprocess.run(["bash", "-c", f"set -euo pipefail\n{stage}\nstage 'the stage' {command}\necho next stage"],
                          capture_output=True, text=True)
    assert (done.returncode == 0) is passes
    assert done.stdout.startswith("== the stage\n")
    assert bool(re.search(r"^== the stage: passed in \d+s$", done.stdout, re.M)) is passes
    assert ("next stage" in done.stdout) is passes


def test_ci_builds_the_docs_strictly_and_opens_them_in_chromium() -> None:
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    newest, finished = script.index('for command in "${commands[@]}"'), script.index('finish_beside "$oldest"')
    steps = [script.index(step) for step in ('pip install -q -e ".[docs]"', 'stage "apt-get install chromium"',
                                             "mkdocs build --strict",
                                             "WAI_REQUIRE_DOCS_SITE=1 python -m pytest tests/test_docs_site.py")]
    assert newest < steps[0] < steps[1] < steps[2] < steps[3] < finished
    assert "apt-get install -y -qq chromium" in _function(script, "install_chromium")
