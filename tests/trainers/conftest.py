"""Fixtures of the trainer tests: the local hub and its users (from tests/hub), one cached venv per trainer.

These tests are marked `trainers` and left out of the default run (pyproject's addopts); run them
with `python -m pytest -m trainers -n 0`. Each trainer's venv is built on first use (see venvs.py) and
reused while its pins stay the same; the terminal summary says which were built and how long it took.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.hub.conftest import Identity, _bounded_and_clean, alice, hub, repo_id  # noqa: F401  (fixtures)
from tests.trainers import venvs

HERE = Path(__file__).resolve().parent
TRAINER_TIMEOUT = 600.0  # one trainer process: imports, a load from the hub, the trainer's preprocessing

_BUILDS: dict[str, venvs.BuiltEnv] = {}


def _env(name: str) -> venvs.BuiltEnv:
    override = os.environ.get(f"WAI_TRAINER_PYTHON_{name.upper().replace('-', '_')}")
    if override:  # a venv built by hand, while its spec is worked out
        return venvs.BuiltEnv(Path(override), False, 0.0, ())
    if name not in _BUILDS:
        _BUILDS[name] = venvs.ensure(venvs.TRAINERS[name])
    return _BUILDS[name]


@pytest.fixture(scope="session")
def axolotl_env() -> venvs.BuiltEnv:
    return _env("axolotl")


@pytest.fixture(scope="session")
def llamafactory_env() -> venvs.BuiltEnv:
    return _env("llamafactory")


@pytest.fixture(scope="session")
def ms_swift_env() -> venvs.BuiltEnv:
    return _env("ms-swift")


def run_trainer(env: venvs.BuiltEnv, identity: Identity, side: str, function: str, **kwargs: Any) -> Any:
    """`function(**kwargs)` from tests/trainers/SIDE.py, in the trainer's venv, as `identity` on a training machine.

    The process runs `python -I` (no PYTHONPATH: neither this checkout nor this package is importable)
    with the identity's HF_ENDPOINT, HF_HOME (logged in) and datasets cache (tests/hub/conftest.py).
    """
    machine = identity.on_a_training_machine()
    if identity.token:  # as after `hf auth login` there: ms-swift's HF loader passes no token of its own
        machine.login()
    workdir = machine.home / "work"
    workdir.mkdir(parents=True, exist_ok=True)
    call = uuid.uuid4().hex[:8]
    args, result = workdir / f"args-{call}.json", workdir / f"result-{call}.json"
    args.write_text(json.dumps(kwargs))
    command = [str(env.python), "-I", str(HERE / "child.py"), str(HERE / f"{side}.py"), function, str(args),
               str(result)]
    try:
        done = subprocess.run(command, env=machine._env(), cwd=workdir, capture_output=True, text=True,
                              timeout=TRAINER_TIMEOUT)
    except subprocess.TimeoutExpired as err:
        pytest.fail(f"{side}.{function} did not finish within {TRAINER_TIMEOUT}s:\n{err.stderr}")
    if done.returncode != 0 or not result.exists():
        pytest.fail(f"{side}.{function}: the trainer process failed ({done.returncode}):\n{done.stderr[-5000:]}")
    outcome = json.loads(result.read_text())
    if "error" in outcome:
        error = outcome["error"]
        pytest.fail(f"{side}.{function} raised {error['type']}: {error['message']}\n{error['traceback']}\n"
                    f"stderr:\n{done.stderr[-3000:]}", pytrace=False)
    return outcome["value"]


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for name, built in _BUILDS.items():
        how = "built now" if built.built else "reused from the cache (its cold build took)"
        terminalreporter.write_line(f"trainer venv {name}: {how} {built.seconds:.0f}s: {built.python.parent.parent}")

