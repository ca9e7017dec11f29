"""Fuzzing the builder with real whileai lines of every row shape, mutated.

Seeds are real rows: whileai's seeded agent (engine rows: prompt + steps +
final_text), the rows whileai's own ``export_dataset`` writes from them
(openai, trl, fireworks, and unrolled trl completion rows), and the hand-made
fixtures in tests/data (training messages rows, platform pulls with
``tool_trace``, OTel rows with ``conversation_id``, the HF flat set with
``messages_json`` / ``steps_json``), and the near-miss shapes (``conversations`` of
OpenAI messages and of ShareGPT ``from``/``value`` turns, tools as JSON text). Each
example mutates a seed: a key deleted or inserted, a value's type changed, a value
replaced by its JSON text, a value nested past the recursion limit, odd unicode (lone
surrogates, NUL, bidi marks), or the line itself cut or spliced with bytes; then
``load_dataset("whileai/export")`` reads it, as JSONL and as a ``.json`` array. The only exception allowed is ``ExportFormatError`` whose location
names the file; hypothesis' deadline catches a hang, and resident memory
must stay within a bound over the whole run.

Profiles (``tests/conftest.py``): ``fuzz-ci`` (the default: derandomized, a
few hundred examples, well under a minute) and ``fuzz-long``
(``WAI_FUZZ_PROFILE=fuzz-long``: thousands, random).
"""

from __future__ import annotations

import copy
import functools
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.conftest import DATA, TOOLS, read_jsonl, seeded_rows
from tests.support.near_miss_rows import LLAMA_FACTORY_ROWS, OPENAI_CONVERSATION_ROW
from whileai_datasets import ExportFormatError

PROFILE = settings.get_profile(os.environ.get("WAI_FUZZ_PROFILE", "fuzz-ci"))
FILE_NAME = "fuzz.jsonl"
#: Inputs a hypothesis release once found failing: each file is replayed as an ``@example`` on every run,
#: so a new hypothesis release (whose derandomized examples differ) can only add findings, never lose one.
REGRESSIONS = DATA / "fuzz"
#: Resident memory the whole fuzz run may add (the inputs are a few KB each).
MEMORY_BOUND = 400 << 20


@functools.lru_cache(maxsize=1)
def seeds() -> tuple[str, ...]:
    """One JSON text per seed row, every row shape whileai writes or accepts."""
    import tempfile

    from whileai import simulations

    engine = seeded_rows(0)[:6]
    rows: list[Any] = list(engine)
    with tempfile.TemporaryDirectory() as folder:
        for fmt, unroll in (("openai", False), ("trl", False), ("fireworks", False), ("trl", True)):
            out = Path(folder) / f"{fmt}-{unroll}.jsonl"
            simulations.export_dataset(engine, str(out), system_prompt="S", tools=TOOLS, format=fmt, unroll=unroll,
                                       validate=False)
            rows += read_jsonl(out)[:3]
    for fixture in sorted(DATA.glob("*.jsonl")):
        rows += read_jsonl(fixture)
    rows += [*LLAMA_FACTORY_ROWS, OPENAI_CONVERSATION_ROW]
    return tuple(json.dumps(row, ensure_ascii=False) for row in rows)


ODD_TEXT = st.sampled_from(["", "\x00", "\ud800", "\udfff", "\u202e\u2066rtl", "e\u0301", "\ufeff", "🤖" * 3,
                            "\r\n", "\u2028", "null", "{", "<think>", "</think>x"])
SCALARS = (st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70) | st.floats()
           | st.text(max_size=12) | ODD_TEXT)
VALUES = st.recursive(SCALARS, lambda kids: st.lists(kids, max_size=3) | st.dictionaries(
    st.sampled_from(["role", "content", "tool_calls", "function", "arguments", "name", "id", "type", "steps",
                     "messages", "tool", "result", "text", "user", "x", "conversations", "from", "value",
                     "system", "tools"]) | st.text(max_size=6), kids, max_size=3),
    max_leaves=8)
PLACEHOLDER = "\u0000deep\u0000"
#: Read once: hypothesis raises the limit while a test runs, and generation must not depend on it.
RECURSION_LIMIT = sys.getrecursionlimit()


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into ``value`` (keys of dicts, indices of lists), the root included."""
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*prefix, index))
    return found


def _parent(root: Any, path: tuple[Any, ...]) -> Any:
    for step in path[:-1]:
        root = root[step]
    return root


@st.composite
def mutated_lines(draw: st.DrawFn) -> str:
    """One seed line with one to three mutations."""
    row = json.loads(draw(st.sampled_from(seeds())))
    deep_depth = 0
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        paths = [p for p in _paths(row) if p]
        kind = draw(st.sampled_from(["delete", "insert", "retype", "deep", "unicode", "empty", "as_text"]))
        if kind == "insert" or not paths:
            containers = [p for p in _paths(row) if isinstance(_walk(row, p), (dict, list))]
            target = _walk(row, draw(st.sampled_from(containers)))
            if isinstance(target, dict):
                target[draw(st.text(max_size=8) | st.sampled_from(["messages", "steps", "tool_calls", "role",
                                                                   "conversations", "from", "tools"]))] = \
                    copy.deepcopy(draw(VALUES))
            elif isinstance(target, list):
                target.insert(draw(st.integers(0, len(target))), copy.deepcopy(draw(VALUES)))
            continue
        path = draw(st.sampled_from(paths))
        parent = _parent(row, path)
        if kind == "delete":
            del parent[path[-1]]
        elif kind == "retype":
            parent[path[-1]] = copy.deepcopy(draw(VALUES))
        elif kind == "as_text":  # tools, arguments, a function_call's calls: JSON text where a value was
            parent[path[-1]] = json.dumps(parent[path[-1]])
        elif kind == "unicode":
            parent[path[-1]] = draw(ODD_TEXT) + str(parent[path[-1]])[:20] + draw(ODD_TEXT)
        elif kind == "empty":
            # a copy: sampled_from hands out the same objects, and a later mutation would change them
            parent[path[-1]] = copy.deepcopy(draw(st.sampled_from([[], {}, "", None, [None], [{}]])))
        elif not deep_depth:  # deep: replaced by text below, json.dumps itself would recurse too far
            deep_depth = draw(st.sampled_from([40, 400, RECURSION_LIMIT + 50, 5 * RECURSION_LIMIT]))
            parent[path[-1]] = PLACEHOLDER
    text = json.dumps(row, ensure_ascii=draw(st.booleans()))
    if deep_depth:
        opener, closer = draw(st.sampled_from([("[", "]"), ('{"a":', "}")]))
        inner = "1" if opener == "[" else "null"
        text = text.replace(json.dumps(PLACEHOLDER), opener * deep_depth + inner + closer * deep_depth)
    return text


def _walk(root: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        root = root[step]
    return root


def _damaged(draw: st.DrawFn, data: bytes) -> tuple[bytes, bool]:
    """``data`` as it is (half the time), cut short, or spliced with bytes; and whether it was changed."""
    damage = draw(st.sampled_from(["none", "none", "cut", "splice"]))
    if damage == "cut":
        data = data[: draw(st.integers(0, max(len(data) - 1, 0)))]
    elif damage == "splice":
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.binary(min_size=1, max_size=6)) + data[at:]
    return data, damage != "none"


def _read_or_refused(folder: Path, content: bytes, name: str, outcomes: dict[str, int]) -> Any:
    """The dataset read from ``content`` (counted as read), or None when the builder refused it with
    an ``ExportFormatError`` naming the file (counted as refused); anything else fails the test."""
    try:
        ds = _load(folder, content, name)
    except ExportFormatError as err:
        assert err.location and err.location.startswith(name), err
        assert err.problem and err.hint, err
        outcomes["refused"] = outcomes.get("refused", 0) + 1
        return None
    assert len(ds.to_list()) == ds.num_rows >= 1
    outcomes["read"] = outcomes.get("read", 0) + 1
    return ds


@st.composite
def damaged_files(draw: st.DrawFn) -> bytes:
    """A file of one to three lines: mutated seeds, clean seeds, and lines cut or spliced with bytes."""
    lines = []
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        line, _ = _damaged(draw, draw(mutated_lines() | st.sampled_from(seeds())).encode("utf-8", "surrogatepass"))
        lines.append(line)
    return b"\n".join(lines) + draw(st.sampled_from([b"\n", b""]))


def _rss() -> int:
    import psutil

    return int(psutil.Process().memory_info().rss)


@pytest.fixture(scope="module")
def fuzz_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


def _load(folder: Path, content: bytes, name: str = FILE_NAME) -> Any:
    import datasets

    import whileai_datasets  # noqa: F401

    path = folder / name
    path.write_bytes(content)
    return datasets.load_dataset("whileai/export", data_files=str(path), split="train", keep_in_memory=True,
                                 cache_dir=str(folder / "cache"), download_mode="force_redownload")


@pytest.mark.filterwarnings("ignore::whileai_datasets.errors.UnreadKeysWarning")  # mutated keys: said, as they should be
def test_the_builder_only_ever_raises_export_format_error_with_a_location(fuzz_dir: Path) -> None:
    import datasets

    datasets.disable_progress_bars()
    _load(fuzz_dir, seeds()[0].encode() + b"\n")  # warm: imports and caches before the baseline
    baseline = _rss()
    outcomes: dict[str, int] = {}

    def check(content: bytes) -> None:
        _read_or_refused(fuzz_dir, content, FILE_NAME, outcomes)

    for found in sorted(REGRESSIONS.iterdir()):
        check = example(content=found.read_bytes())(check)
    given(content=damaged_files())(
        settings(PROFILE, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])(check))()
    assert outcomes.get("refused", 0) and outcomes.get("read", 0), outcomes  # both kinds of input were tried
    assert _rss() - baseline < MEMORY_BOUND


@st.composite
def damaged_arrays(draw: st.DrawFn) -> tuple[bytes, int, bool]:
    """A ``.json`` file of one array of one to three rows (mutated or clean seeds), on one line or
    one a line, maybe cut or spliced with bytes; with its element count and whether it was damaged."""
    # the rows' texts as they are (a nested one would not survive json.loads), joined as an array
    rows = [draw(mutated_lines() | st.sampled_from(seeds())) for _ in range(draw(st.integers(1, 3)))]
    separator = draw(st.sampled_from([", ", ",\n ", "\n,"]))
    content, damaged = _damaged(draw, ("[" + separator.join(rows) + "]\n").encode("utf-8", "surrogatepass"))
    return content, len(rows), damaged


@pytest.mark.filterwarnings("ignore::whileai_datasets.errors.UnreadKeysWarning")  # mutated keys: said, as they should be
def test_a_json_array_only_ever_raises_export_format_error_with_a_location(fuzz_dir: Path) -> None:
    import datasets

    datasets.disable_progress_bars()
    name = "fuzz.json"
    outcomes: dict[str, int] = {}

    @settings(PROFILE, max_examples=max(20, PROFILE.max_examples // 3),
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(case=damaged_arrays())
    def check(case: tuple[bytes, int, bool]) -> None:
        content, n_rows, damaged = case
        ds = _read_or_refused(fuzz_dir, content, name, outcomes)
        if ds is not None and not damaged:
            assert ds.num_rows == n_rows  # every element is a row: none lost, none made up

    check()
    assert outcomes.get("refused", 0) and outcomes.get("read", 0), outcomes


# ---------------------------------------------------------------- export, then read back


@st.composite
def valid_rows(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Real rows with their text replaced by generated text (any unicode a JSON file can hold)."""
    rows = []
    for _ in range(draw(st.integers(min_value=1, max_value=5))):
        row = json.loads(draw(st.sampled_from(seeds())))
        for path in _paths(row):
            if path and path[-1] in ("content", "text", "final_text", "prompt") and isinstance(_walk(row, path), str):
                _parent(row, path)[path[-1]] = draw(st.text(min_size=1, max_size=30))
        rows.append(row)
    return rows


def _conversations(ds: Any) -> list[list[tuple[Any, ...]]]:
    return [[(m["role"], m.get("content"), json.dumps(m.get("tool_calls"), sort_keys=True)) for m in row["messages"]]
            for row in ds]


@pytest.mark.filterwarnings("ignore::whileai_datasets.errors.UnreadKeysWarning")  # mutated keys: said, as they should be
@pytest.mark.filterwarnings("ignore::whileai_datasets.errors.NothingToTrainWarning")  # fuzzed rows: some train nothing
@pytest.mark.filterwarnings("ignore::whileai_datasets.errors.DuplicateSystemWarning")
@pytest.mark.parametrize("fmt", ["openai", "trl", "fireworks"])
def test_export_then_read_back_loses_no_row_and_no_message(fuzz_dir: Path, fmt: str) -> None:
    from whileai_datasets import export_dataset

    folder = fuzz_dir / f"roundtrip-{fmt}"
    folder.mkdir()

    @settings(PROFILE, max_examples=max(10, PROFILE.max_examples // 20),
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(rows=valid_rows())
    def check(rows: list[dict[str, Any]]) -> None:
        source = folder / "in.jsonl"
        source.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
        try:
            original = _load_path(folder, source)
        except ExportFormatError:
            return  # a seed shape the builder refuses after the text change (not this property's concern)
        out = folder / "out.jsonl"
        report = export_dataset(str(source), str(out), strip_think=False, validate=False, format=fmt)
        back = _load_path(folder, out)
        assert report["n"] == original.num_rows == back.num_rows == len(rows)
        assert _conversations(back) == _conversations(original)

    check()


def _load_path(folder: Path, path: Path) -> Any:
    import datasets

    return datasets.load_dataset("whileai/export", data_files=str(path), split="train", keep_in_memory=True,
                                 cache_dir=str(folder / "cache"), download_mode="force_redownload")
