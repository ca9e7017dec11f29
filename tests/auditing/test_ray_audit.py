"""``audit(..., engine="ray")`` gives the local audit's ``to_dict()``: the same counts, row numbers,
files and lines, worst rows and trainer gaps, from Ray actors that each count a few blocks.

One Ray runtime (``num_cpus=2``) serves the module; the inputs are a few hundred hand-written rows
read in blocks of a few KB, so every audit here is added up from several blocks, and the tokenizer
is trained on them (tests/support/tiny_lm.py): no download.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support import ray_session
from tests.conftest import write_jsonl
from tests.support.tiny_lm import train_tokenizer

pytest.importorskip("ray.data")

from whileai_datasets import OptionError, TrainingOptions, audit, cli
from whileai_datasets.auditing.audit_report import Audit
from whileai_datasets.auditing.on_ray import audit_on_ray
from whileai_datasets.ray_engine import source as ray_source

pytestmark = [pytest.mark.ray, pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.data.context")]
CHATML = (
    "{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{%- endfor %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n{%- endif %}"
)
SYSTEM = "You are a careful support agent"
#: Small blocks: a few dozen rows each, so the driver adds up several.
BLOCKS = {"range_bytes": 16 << 10, "block_bytes": 4 << 10, "concurrency": 1}


ray_runtime = pytest.fixture(scope="module", autouse=True)(ray_session.local_runtime)


def _talk(*turns: tuple[str, str]) -> dict[str, Any]:
    return {"messages": [{"role": role, "content": text} for role, text in turns]}


def _shapes(i: int) -> dict[str, Any]:
    """Row ``i`` of a file mixing the shapes the audit names."""
    long = " ".join(["hello there how are you"] * (5 + i % 25))
    return [
        _talk(("user", f"hello {i}"), ("assistant", "fine thanks")),
        _talk(("user", "what is two plus two")),  # no assistant turn: trains nothing
        _talk(("system", "You are terse"), ("user", "the order is late"), ("assistant", "refund it please")),
        _talk(("user", "think hard"), ("assistant", "<think>two and two</think>four")),
        _talk(("user", "think hard"), ("assistant", "<think>only thinking</think>"), ("user", "and"),
              ("assistant", "four")),
        _talk(("user", long), ("assistant", "fine thanks"), ("user", "hello"), ("assistant", "four")),
        _talk(("system", "You are terse")),  # only a system message
        _talk(("user", "hello"), ("assistant", "four"), ("assistant", "fine thanks")),  # two in a row
        _talk(("user", "hello"), ("assistant", "")),  # an empty marked turn (axolotl trains nothing of it)
    ][i % 9]


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    words = ["hello there how are you", "fine thanks", "the order is late", "refund it please", "think hard",
             SYSTEM, "You are terse", "what is two plus two", "four", "two and two", "only thinking"]
    return train_tokenizer(words * 20, chat_template=CHATML, vocab_size=400)


@pytest.fixture(scope="module")
def rows_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("ray-audit")
    lines = [json.dumps(_shapes(i)) for i in range(240)]
    lines[17:17] = ["", "   "]  # blank lines: skipped, not rows, yet counted as lines
    return write_jsonl(folder / "rows.jsonl", lines)


def _same(ours: Audit, local: Audit) -> None:
    """Equal ``to_dict()``s, but for float sums added in another order (per block, not per chunk)."""
    mine, theirs = ours.to_dict(), local.to_dict()
    for name, histogram in theirs["histograms"].items():
        assert mine["histograms"][name].pop("mean") == pytest.approx(histogram.pop("mean"), rel=1e-12)
    assert mine == theirs


def test_the_ray_audit_of_every_shape_equals_the_local_audit(rows_file: Path, tokenizer: Any) -> None:
    # think blocks stripped, as an export with whileai's default does: the file then has every shape
    options = {"tokenizer": tokenizer, "max_length": 40, "system_prompt": SYSTEM, "strip_think": True}
    local = audit(str(rows_file), **options, trl_default=True)
    ours = audit_on_ray(str(rows_file), template=None, options=_options(**options), **BLOCKS,
                        tokenizer=tokenizer, trl_default=True)
    sizes = {k: v for k, v in BLOCKS.items() if k != "concurrency"}
    assert ray_source.WhileaiFiles([str(rows_file)], **sizes).n_tasks() == 3  # added up from three blocks
    data = local.to_dict()
    for name in ("zero_loss", "only_system", "no_assistant", "duplicate_system", "think_stripped",
                 "emptied_by_think", "truncated", "truncated_to_nothing"):
        assert data["findings"][name]["rows"] > 0, name  # the file has every shape
    only_system = data["findings"]["only_system"]["first"]  # rows 6, 15, 24, ...: past row 16, the blank lines
    assert [(where["row"], where["line"]) for where in only_system[:3]] == [(6, 7), (15, 16), (24, 27)]
    assert data["trainers"]["ms-swift"]["inexact"]["consecutive_assistant_turns"]["first"] is not None
    assert data["trainers"]["axolotl"]["inexact"]["empty_marked_turn"]["rows"] > 0
    assert data["trainers"]["trl-default"]["trains_tokens"] is not None  # measured in each block, added up
    _same(ours, local)


def _options(**given: Any) -> TrainingOptions:
    """``audit``'s options as ``audit_on_ray`` takes them (checked), the audit's defaults filled in."""
    from whileai_datasets.auditing.counting import checked_options

    defaults = {"system_prompt": None, "tools": None, "strip_think": False, "mask_mode": "assistant",
                "unroll": False, "max_tool_output_chars": None, "format": "openai", "max_length": None,
                "on_bad_row": "raise"}
    given.pop("tokenizer", None)
    return checked_options(tokenized=True, **{**defaults, **given})


def test_unrolled_trl_rows_with_think_kept_count_as_locally(rows_file: Path, tokenizer: Any) -> None:
    options = {"unroll": True, "format": "trl", "strip_think": False, "max_tool_output_chars": 10,
               "max_length": 60}
    local = audit(str(rows_file), tokenizer=tokenizer, **options)
    assert local.to_dict()["row_unit"] == "sample" and local.findings["think_kept"].rows
    _same(audit_on_ray(str(rows_file), tokenizer=tokenizer, template=None, options=_options(**options), **BLOCKS),
          local)


def test_a_glob_of_two_files_and_a_tokenizer_directory(tmp_path: Path, tokenizer: Any) -> None:
    from transformers import AutoTokenizer

    write_jsonl(tmp_path / "part-0.jsonl", [_shapes(9 * i) for i in range(40)])  # plain rows only
    write_jsonl(tmp_path / "part-1.jsonl", [_shapes(i) for i in range(90)])
    tokenizer.save_pretrained(tmp_path / "tok")
    loaded = AutoTokenizer.from_pretrained(str(tmp_path / "tok"))  # its name, as the actors see it
    pattern = str(tmp_path / "part-*.jsonl")
    local = audit(pattern, tokenizer=loaded, mask_mode="final", format="trl")
    first = local.to_dict()["findings"]["no_assistant"]["first"][0]
    # rows are numbered in their own file, as the reader numbers them: one number, one line
    assert first == {"row": 1, "file": str(tmp_path / "part-1.jsonl"), "line": 2}  # row 1 of the second file
    ours = audit_on_ray(pattern, tokenizer=str(tmp_path / "tok"), template=None,
                        options=_options(mask_mode="final", format="trl"), **BLOCKS)
    _same(ours, local)


@pytest.mark.parametrize("suffix", [".jsonl", ".json"])
def test_rows_it_cannot_read_are_unreadable_and_the_lines_after_them_are_right(tmp_path: Path, suffix: str) -> None:
    """Without a tokenizer: the message-level figures only. Rows under keys we do not read are counted
    with the reader's own locations; the rows after them keep their lines (in a ``.json`` array, the line
    its element opens on)."""
    rows = [_shapes(i) if i % 7 else {"question": f"q{i}", "reply": "r"} for i in range(150)]
    source = tmp_path / f"rows{suffix}"
    if suffix == ".json":
        source.write_text(json.dumps(rows, indent=1))
    else:
        write_jsonl(source, rows)
    local = audit(str(source))
    data = local.to_dict()
    unread = data["findings"]["unreadable"]
    assert unread["rows"] == 22 and unread["first"][0]["at"] == (
        "rows.jsonl line 1 (row 0)" if suffix == ".jsonl" else "rows.json line 2 (array index 0)")
    after = data["findings"]["no_assistant"]["first"][1]  # source row 10, the 9th row read: named as row 10
    # indent=1 opens each array element on a line of its own: " {"
    opens = [n for n, line in enumerate(source.read_text().splitlines(), 1) if line == " {"]
    assert (after["row"], after["line"]) == (10, 11 if suffix == ".jsonl" else opens[10])
    ours = audit_on_ray(str(source), tokenizer=None, template=None, options=_options(), **BLOCKS)
    assert ours.to_dict() == data


def test_parquet_row_groups_in_several_blocks_count_as_locally(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    source = tmp_path / "rows.parquet"
    pq.write_table(pa.Table.from_pylist([_shapes(i) for i in range(200)]), source, row_group_size=40)
    assert ray_source.WhileaiFiles([str(source)], range_bytes=2000).n_tasks() == 5
    local = audit(str(source), system_prompt=SYSTEM)
    assert local.findings["no_assistant"].first == [1, 10, 19, 28, 37]
    ours = audit_on_ray(str(source), tokenizer=None, template=None, options=_options(system_prompt=SYSTEM),
                        range_bytes=2000, concurrency=1)
    assert ours.to_dict() == local.to_dict()


def test_a_row_the_template_cannot_render_is_counted_by_cause_with_its_file_and_line(tmp_path: Path,
                                                                                     tokenizer: Any) -> None:
    rows = [_shapes(i) for i in range(150)]
    rows[130] = _talk(("user", "hello"), ("assistant", "a\ue000b"))  # in the second block: not its row 130
    source = write_jsonl(tmp_path / "rows.jsonl", rows)
    local = audit(str(source), tokenizer=tokenizer)  # on_bad_row="raise": the audit still never stops on a row
    assert local.findings["bad_rows"].first == local.findings["template_error"].first == [130]
    assert local.to_dict()["findings"]["template_error"]["first"][0]["line"] == 131
    assert "the input contains the private-use" in (local.findings["template_error"].first_error or "")
    _same(audit_on_ray(str(source), tokenizer=tokenizer, template=None, options=_options(), **BLOCKS), local)


def test_the_cli_audit_takes_engine_ray_with_json_and_fail_on(rows_file: Path, tokenizer: Any, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Through ``audit(..., engine="ray")`` with its default blocks and pool."""
    tokenizer.save_pretrained(tmp_path / "tok")
    base = ["audit", str(rows_file), "--tokenizer", str(tmp_path / "tok"), "--max-length", "40", "--json"]
    assert cli.main(base) == 0
    local = json.loads(capsys.readouterr().out)
    assert cli.main([*base, "--engine", "ray", "--fail-on", "truncated,template-drops"]) == 3
    out, err = capsys.readouterr()
    mine = json.loads(out)
    for name, histogram in local["histograms"].items():
        assert mine["histograms"][name].pop("mean") == pytest.approx(histogram.pop("mean"), rel=1e-12)
    assert mine == local
    assert f"--fail-on: truncated ({local['findings']['truncated']['rows']:,} rows)" in err
    assert "template-drops" not in err


def test_bad_options_are_refused_before_any_ray_task(rows_file: Path, tokenizer: Any) -> None:
    with pytest.raises(ValueError, match=r"engine must be one of 'local', 'ray', got 'spark'"):
        audit(str(rows_file), engine="spark")
    with pytest.raises(ValueError, match=r"the Ray audit reads files, got list.*engine='local'"):
        audit([_shapes(0)], engine="ray")
    with pytest.raises(OptionError, match=r"^max_length must be a whole number, 1 or more, or None, got int 0"):
        audit(str(rows_file), tokenizer=tokenizer, max_length=0, engine="ray")
    with pytest.raises(ValueError, match=r"no such file"):
        audit(str(rows_file.parent / "missing-*.jsonl"), engine="ray")
    with pytest.raises(ValueError, match=r"'me/support-sft' names a Hub repo.*engine='local'"):
        audit("me/support-sft", engine="ray")


def test_unread_keys_are_said_as_the_local_audit_says_them(tmp_path: Path) -> None:
    """A misspelt message key in rows of several blocks: ``audit(engine="ray")`` warns once, with the local audit's
    counts, first location and guess, pointed at the caller's line."""
    import whileai_datasets

    rows = [_shapes(i) for i in range(240)]
    marked = list(range(5, 240, 37))
    for i in marked:
        rows[i] = {"messages": [{"role": "user", "contnet": f"hello {i}"}, {"role": "assistant", "content": "four"}]}
    source = write_jsonl(tmp_path / "rows.jsonl", [json.dumps(row) for row in rows])
    with pytest.warns(whileai_datasets.UnreadKeysWarning) as local:
        audit(str(source))
    with pytest.warns(whileai_datasets.UnreadKeysWarning) as ours:
        audit(str(source), engine="ray")
    local_unread, ray_unread = ([w for w in caught if w.category is whileai_datasets.UnreadKeysWarning]
                                for caught in (local, ours))
    assert len(ray_unread) == 1 and ray_unread[0].filename == __file__
    said, expected = str(ray_unread[0].message), str(local_unread[0].message)
    assert said.startswith(f"{source}: ")
    assert f"message key 'contnet' in {len(marked)} message(s) (first: rows.jsonl line {marked[0] + 1} " \
           f"(row {marked[0]})" in said
    assert said.split(": ", 1)[1] == expected.split(": ", 1)[1]  # all but where: the local names its split
