"""Fixtures for the Hub tests: a local Hub server, and client identities that run in subprocesses.

Why subprocesses: `huggingface_hub.constants` and `datasets.config` read HF_ENDPOINT,
HF_HUB_DISABLE_XET, HF_HOME and the offline flags once, when they are first imported
(hub-protocol.md §1). In a full run another test module imports `datasets` before this file is
loaded, and the server's port is only known once it listens, so variables set here would come too
late. So every client call runs in a fresh interpreter whose environment is complete before Python
starts: `Identity.run(fn, **kwargs)` imports the test module that defines `fn` in a child process
and calls `fn(**kwargs)` there (arguments and result as JSON; datasets travel as `save_to_disk`
folders). Each identity (alice, bob, anonymous) gets its own HF_HOME and datasets cache per test,
so a warm cache can never answer for a caller the server would refuse (hub-protocol.md pitfall 1).

This file is also that child's entry point: `python conftest.py MODULE_FILE FUNCTION ARGS RESULT`.
"""

from __future__ import annotations

import faulthandler
import json
import os
import re
import subprocess
import sys
import time
import traceback
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.processes import stop

REPO_ROOT = Path(__file__).resolve().parents[2]
SERVER = REPO_ROOT / "tests" / "hub_server"
TOKENS = {"alice": "alice-token-0001", "bob": "bob-token-0002"}
SERVER_START_TIMEOUT = 20.0
CLIENT_TIMEOUT = 120.0  # one child process: imports, a push or a load
TEST_TIMEOUT = 600.0  # last resort: dump the stacks and stop the run rather than hang
HTTP_TIMEOUT = 10.0
#: The child's name for "the calls listed in the arguments, in turn" (`Identity.run_each`).
EACH = "<each>"
#: What `import whileai_datasets` raises for an identity `on_a_training_machine`.
BLOCKED_IMPORT = "whileai_datasets is not installed on this machine"

#: Third-party warnings the children tolerate while every other warning is an error:
#: huggingface_hub passes raw bytes as `data=` (LFS PUT, commit), which its HTTP client deprecates:
#: httpx2 under huggingface_hub 2.x, httpx 0.28 under 1.x.
CLIENT_IGNORED_WARNINGS: tuple[tuple[str, type[Warning], str], ...] = tuple(
    (re.escape("Use 'content=<...>' to upload raw bytes/text content."), DeprecationWarning, client)
    for client in ("httpx2", "httpx")
)


# --- the server ------------------------------------------------------------------------------------
class LocalHub:
    """Handle on the running server: its URL, its request log, its fault switches."""

    def __init__(self, url: str, log_path: Path, stderr_path: Path) -> None:
        self.url = url
        self.log_path = log_path
        self.stderr_path = stderr_path
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never via a proxy

    def mark(self) -> int:
        """A position in the request log; `requests(since=mark)` returns what came after it."""
        return len(self.log_path.read_text("utf-8").splitlines())

    def requests(self, since: int = 0, *, repo: str | None = None) -> list[dict[str, Any]]:
        lines = self.log_path.read_text("utf-8").splitlines()[since:]
        entries = [json.loads(line) for line in lines]
        return [e for e in entries if repo is None or f"/{repo}" in e["path"] or e["route"] == "lfs-upload"]

    def fail(self, route: str, mode: str, *, times: int = 1, skip: int = 0, retry_after: int | None = None) -> None:
        self.call("POST", "/_local/faults", body={"route": route, "mode": mode, "times": times, "skip": skip,
                                                  "retry_after": retry_after})

    def clear_faults(self) -> None:
        self.call("DELETE", "/_local/faults")

    def call(self, method: str, path: str, *, token: str | None = None, body: Any = None,
             raw: bytes | None = None) -> tuple[int, dict[str, str], Any]:
        """One request with the stdlib: (status, headers, JSON body or None)."""
        data = raw if raw is not None else None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        if token:
            request.add_header("Authorization", f"Bearer {token}")
        if body is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with self._opener.open(request, timeout=HTTP_TIMEOUT) as response:
                status, headers, payload = response.status, dict(response.headers), response.read()
        except urllib.error.HTTPError as err:
            status, headers, payload = err.code, dict(err.headers), err.read()
        try:
            return status, headers, json.loads(payload) if payload else None
        except ValueError:
            return status, headers, payload

    def head(self, repo_id: str, token: str) -> str:
        """The commit `main` points at."""
        status, _, info = self.call("GET", f"/api/datasets/{repo_id}", token=token)
        assert status == 200, f"{repo_id}: {status} {info}"
        return str(info["sha"])


@pytest.fixture(scope="session")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalHub]:
    root = tmp_path_factory.mktemp("local-hub")
    port_file, log, err = root / "port", root / "requests.jsonl", root / "server.stderr"
    command = [sys.executable, str(SERVER), "--port", "0", "--port-file", str(port_file),
               "--data-dir", str(root / "data"), "--log", str(log),
               *(f"--token={secret}:{user}" for user, secret in TOKENS.items())]
    with err.open("w") as stderr:
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=stderr)
    try:
        port = _wait_for_port(port_file, process, err)
        yield LocalHub(f"http://127.0.0.1:{port}", log, err)
    finally:
        stop(process)


def _wait_for_port(port_file: Path, process: subprocess.Popen[bytes], stderr: Path) -> int:
    deadline = time.monotonic() + SERVER_START_TIMEOUT
    while time.monotonic() < deadline:
        if port_file.exists():
            return int(port_file.read_text())
        if process.poll() is not None:
            pytest.fail(f"the local hub exited with {process.returncode}:\n{stderr.read_text()}")
        time.sleep(0.05)
    process.kill()
    pytest.fail(f"the local hub did not start within {SERVER_START_TIMEOUT}s:\n{stderr.read_text()}")


# --- client identities -----------------------------------------------------------------------------
@dataclass(frozen=True)
class ClientError:
    """An exception raised in the child: its qualified type name, the names of its bases, its text."""

    type: str
    bases: tuple[str, ...]
    message: str


@dataclass
class Identity:
    """A user of the Hub on their own machine: own HF_HOME, own datasets cache, own token (or none)."""

    name: str
    token: str | None
    home: Path
    hub: LocalHub
    env_token: bool = False  # export the token as HF_TOKEN
    without_package: bool = False  # `import whileai_datasets` fails in the child (a machine without it)
    timeout: float = CLIENT_TIMEOUT  # seconds a child may take (a Ray runtime takes a while to start)

    def on_another_machine(self) -> Identity:
        """The same user and token with empty caches."""
        return Identity(self.name, self.token, self.home.with_name(f"{self.home.name}-elsewhere"), self.hub)

    def on_a_training_machine(self) -> Identity:
        """The same user with empty caches, on a machine where `import whileai_datasets` fails."""
        return Identity(self.name, self.token, self.home.with_name(f"{self.home.name}-trainer"), self.hub,
                        without_package=True)

    def login(self) -> None:
        """Cache the token the way `hf auth login` does (the `token` file under HF_HOME)."""
        assert self.token is not None
        self.home.mkdir(parents=True, exist_ok=True)
        (self.home / "token").write_text(self.token)

    def run(self, fn: Callable[..., Any], /, **kwargs: Any) -> Any:
        """`fn(**kwargs)` in a child process as this identity; its exception fails the test."""
        outcome = self._call(fn, kwargs)
        if "error" in outcome:
            error = outcome["error"]
            pytest.fail(f"{self.name}: {fn.__name__} raised {error['type']}: {error['message']}\n"
                        f"{error['traceback']}", pytrace=False)
        return outcome["value"]

    def run_each(self, *calls: tuple[Callable[..., Any], dict[str, Any]]) -> list[Any]:
        """Each ``(fn, kwargs)`` in turn, in one child process as this identity (its imports are paid once):
        their values; the first exception fails the test. The functions come from one test module."""
        modules = {fn.__module__ for fn, _ in calls}
        assert len(modules) == 1, f"run_each takes functions of one module, not of {sorted(modules)}"
        names = [[fn.__qualname__, kwargs] for fn, kwargs in calls]
        outcome = self._call(calls[0][0], {"calls": names}, function=EACH)
        if "error" in outcome:
            error = outcome["error"]
            pytest.fail(f"{self.name}: {error['call']} raised {error['type']}: {error['message']}\n"
                        f"{error['traceback']}", pytrace=False)
        return list(outcome["value"])

    def run_error(self, fn: Callable[..., Any], /, **kwargs: Any) -> ClientError:
        """`fn(**kwargs)` in a child process, expected to raise; returns what it raised."""
        outcome = self._call(fn, kwargs)
        if "error" not in outcome:
            pytest.fail(f"{self.name}: {fn.__name__} returned {outcome['value']!r} instead of raising")
        error = outcome["error"]
        return ClientError(error["type"], tuple(error["bases"]), error["message"])

    def _call(self, fn: Callable[..., Any], kwargs: dict[str, Any], function: str | None = None) -> dict[str, Any]:
        workdir = self.home / "work"
        workdir.mkdir(parents=True, exist_ok=True)  # cwd: `alice/ds` must not name a local folder
        call_id = uuid.uuid4().hex[:8]
        args_file, result_file = workdir / f"args-{call_id}.json", workdir / f"result-{call_id}.json"
        args_file.write_text(json.dumps(kwargs))
        command = [sys.executable, __file__, sys.modules[fn.__module__].__file__ or "", function or fn.__qualname__,
                   str(args_file), str(result_file)]
        try:
            done = subprocess.run(command, env=self._env(), cwd=workdir, capture_output=True, text=True,
                                  timeout=self.timeout)
        except subprocess.TimeoutExpired as err:
            stderr = err.stderr.decode() if isinstance(err.stderr, bytes) else err.stderr
            pytest.fail(f"{self.name}: {fn.__name__} did not finish within {self.timeout}s:\n{stderr}")
        if done.returncode != 0 or not result_file.exists():
            pytest.fail(f"{self.name}: the client process failed ({done.returncode}):\n{done.stderr[-5000:]}")
        return dict(json.loads(result_file.read_text()))

    def _env(self) -> dict[str, str]:
        drop = ("HF_", "HUGGINGFACE_", "TRANSFORMERS_OFFLINE")
        env = {k: v for k, v in os.environ.items() if not k.startswith(drop) and "proxy" not in k.lower()}
        env.update(
            HF_ENDPOINT=self.hub.url, HF_HUB_DISABLE_XET="1", HF_HOME=str(self.home),
            HF_DATASETS_CACHE=str(self.home / "datasets"), HF_UPDATE_DOWNLOAD_COUNTS="0",
            HF_HUB_DISABLE_TELEMETRY="1", HF_HUB_DISABLE_PROGRESS_BARS="1", HF_DATASETS_DISABLE_PROGRESS_BARS="1",
            NO_PROXY="127.0.0.1,localhost", PYTHONPATH=os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")]),
        )
        if self.env_token and self.token:
            env["HF_TOKEN"] = self.token
        if self.without_package:  # first on sys.path: shadows the checkout and the editable install
            env["PYTHONPATH"] = os.pathsep.join([str(self._blocker()), env["PYTHONPATH"]])
        return env

    def _blocker(self) -> Path:
        package = self.home / "no-whileai-datasets" / "whileai_datasets"
        package.mkdir(parents=True, exist_ok=True)
        (package / "__init__.py").write_text(f"raise ImportError({BLOCKED_IMPORT!r})\n")
        return package.parent


def blocked_import() -> str:
    """In a child `on_a_training_machine`: what `import whileai_datasets` raised (it must raise)."""
    try:
        import whileai_datasets  # noqa: F401
    except ImportError as err:
        return str(err)
    raise AssertionError("whileai_datasets imported on a machine that does not have it")


def not_built_in(feature: Any) -> list[str]:
    """The feature types in `feature` that `datasets` itself does not define (empty when portable)."""
    if isinstance(feature, dict):
        return [name for child in feature.values() for name in not_built_in(child)]
    own = [] if type(feature).__module__.startswith("datasets.") else [f"{type(feature).__module__}.{feature!r}"]
    if hasattr(feature, "feature"):  # List, LargeList
        return own + not_built_in(feature.feature)
    return own


def _tool_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def _rollout(scenario: str, reward: float, tools: Any, lineage: Any) -> dict[str, Any]:
    return {
        "messages": [
            {"role": "system", "content": "You book rooms.", "tool_calls": None, "tool_call_id": None, "name": None},
            {"role": "user", "content": f"Book {scenario}.", "tool_calls": None, "tool_call_id": None, "name": None},
            {"role": "assistant", "content": "", "tool_calls": [_tool_call("c1", "book", '{"room": 2}')],
             "tool_call_id": None, "name": None},
            {"role": "tool", "content": "ok | booked", "tool_calls": None, "tool_call_id": "c1", "name": "book"},
            {"role": "assistant", "content": "Done.", "tool_calls": None, "tool_call_id": None, "name": None},
        ],
        "loss_mask": [0, 0, 1, 0, 1],
        "tools": tools,  # heterogeneous between rows: a Json() column
        "lineage": lineage,
        "scenario_id": scenario,
        "reward": reward,
    }


@pytest.fixture
def rollouts() -> Any:
    """Canonical rows, train and holdout split by scenario: list-of-struct messages and Json columns."""
    from datasets import Dataset, DatasetDict, Features, Json, List, Value

    message = {"role": Value("string"), "content": Value("string"),
               "tool_calls": List({"id": Value("string"), "type": Value("string"),
                                   "function": {"name": Value("string"), "arguments": Value("string")}}),
               "tool_call_id": Value("string"), "name": Value("string")}
    features = Features({"messages": List(message), "loss_mask": List(Value("int8")), "tools": Json(),
                         "lineage": Json(), "scenario_id": Value("string"), "reward": Value("float64")})
    book = [{"type": "function", "function": {"name": "book", "parameters": {"type": "object"}}}]
    rows = [
        _rollout("s1", 1.0, book, {"parent": None, "step": 3}),
        _rollout("s1", 0.0, [], ["a", 1, {"b": [True, None]}]),
        _rollout("s2", 0.5, book, "plain text lineage"),
        _rollout("s2", 1.0, None, 7),
        _rollout("s3", 1.0, {"odd": "shape"}, {"parent": "r1"}),
        _rollout("s3", 0.25, book, None),
    ]
    table = {name: [row[name] for row in rows] for name in features}
    ds = Dataset.from_dict(table, features=features)
    return DatasetDict({"train": ds.select(range(4)), "holdout": ds.select(range(4, 6))})


def published_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages as a published repo holds them: a null `tool_calls` / `name` / `tool_call_id` is absent."""
    optional = ("tool_calls", "name", "tool_call_id")
    return [{k: v for k, v in m.items() if not (k in optional and v is None)} for m in messages]


def published_rows(ds: Any) -> list[dict[str, Any]]:
    """`ds`'s rows as the repo's `canonical` config loads them."""
    return [{**row, "messages": published_messages(row["messages"])} for row in ds]


@pytest.fixture
def saved_rollouts(rollouts: Any, tmp_path: Path) -> str:
    """`rollouts` written with `save_to_disk`: how a dataset reaches a client process."""
    path = tmp_path / "rollouts"
    rollouts.save_to_disk(str(path))
    return str(path)


@pytest.fixture
def alice(hub: LocalHub, tmp_path: Path) -> Identity:
    return Identity("alice", TOKENS["alice"], tmp_path / "alice", hub)


@pytest.fixture
def bob(hub: LocalHub, tmp_path: Path) -> Identity:
    return Identity("bob", TOKENS["bob"], tmp_path / "bob", hub)


@pytest.fixture
def anonymous(hub: LocalHub, tmp_path: Path) -> Identity:
    return Identity("anonymous", None, tmp_path / "anonymous", hub)


@pytest.fixture
def repo_id() -> str:
    """A repo name no other test uses (the server lives for the whole session)."""
    return f"alice/rollouts-{uuid.uuid4().hex[:8]}"


@pytest.fixture(autouse=True)
def _bounded_and_clean(request: pytest.FixtureRequest) -> Iterator[None]:
    """Every test ends within TEST_TIMEOUT, and leaves no fault armed on the shared server."""
    faulthandler.dump_traceback_later(TEST_TIMEOUT, exit=True)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()
        if "hub" in request.fixturenames:
            request.getfixturevalue("hub").clear_faults()


# --- the child side --------------------------------------------------------------------------------
def _child_main(module_file: str, function: str, args_file: str, result_file: str) -> int:
    import importlib.util
    import warnings

    warnings.simplefilter("error")
    for message, category, origin in CLIENT_IGNORED_WARNINGS:
        warnings.filterwarnings("ignore", message=message, category=category, module=origin)
    import datasets

    datasets.config.USE_PARQUET_EXPORT = False  # no lookup at datasets-server.<host>: stay on 127.0.0.1
    spec = importlib.util.spec_from_file_location("hub_test_client_module", module_file)
    assert spec is not None and spec.loader is not None
    test_module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(test_module)
    args = json.loads(Path(args_file).read_text())
    calls = args["calls"] if function == EACH else [[function, args]]
    values = []
    for name, kwargs in calls:
        try:
            values.append(getattr(test_module, name)(**kwargs))
        except Exception as err:  # reported to the test, which decides whether it was expected
            kind = type(err)
            outcome: dict[str, Any] = {"error": {
                "type": f"{kind.__module__}.{kind.__qualname__}", "call": name,
                "bases": [f"{b.__module__}.{b.__qualname__}" for b in kind.__mro__[1:]],
                "message": str(err), "traceback": traceback.format_exc()}}
            break
    else:
        outcome = {"value": values if function == EACH else values[0]}
    Path(result_file).write_text(json.dumps(outcome, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(_child_main(*sys.argv[1:]))
