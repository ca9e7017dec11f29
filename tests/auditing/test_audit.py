"""The audit names each problem of a dataset with its count and first location, and ``--fail-on``
turns any of them into a failing exit status.

Every file here is written by the test (a few rows each) and tokenized with a tokenizer trained on
them (tests/support/tiny_lm.py): no download.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SYSTEM_PROMPT, TOOLS, seeded_rows, write_jsonl
from tests.support.tiny_lm import train_tokenizer, trl_template
from whileai_datasets import Audit, audit, cli, mask_report
from whileai_datasets.auditing.audit_report import FINDINGS
from whileai_datasets.tokenize import tokenize

CHATML = (
    "{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{%- endfor %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n{%- endif %}"
)
#: A template that leaves every system message out of the render.
NO_SYSTEM = (
    "{%- for m in messages %}{%- if m.role != 'system' %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n"
    "{%- endif %}{%- endfor %}{%- if add_generation_prompt %}<|im_start|>assistant\n{%- endif %}"
)


def _talk(*turns: tuple[str, str]) -> dict[str, Any]:
    return {"messages": [{"role": role, "content": text} for role, text in turns]}


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    words = ["hello there how are you", "fine thanks", "the order is late", "refund it please", "think hard",
             "You are a careful support agent", "what is two plus two", "four"]
    return train_tokenizer(words * 20, chat_template=CHATML, vocab_size=400)


def _audit(path: Path, **options: Any) -> Audit:
    return audit(str(path), **options)


def test_eval_rows_under_keys_we_do_not_read_train_nothing_and_say_where(tmp_path: Path) -> None:
    """The builder refuses such rows with the keys they have; the audit counts them instead of stopping."""
    rows = [{"question": f"q{i}", "reply": f"r{i}"} for i in range(3)] + [_talk(("user", "hi"), ("assistant", "fine"))]
    source = write_jsonl(tmp_path / "eval.jsonl", rows)
    found = _audit(source, system_prompt="Be brief.")
    data = found.to_dict()
    unread = data["findings"]["unreadable"]
    assert unread["rows"] == 3 and data["rows"] == 4
    assert unread["first"][0] | {"at": None} == {"row": 0, "file": source.name, "line": 1, "at": None}
    assert "'question', 'reply'" in unread["first_error"]
    assert data["findings"]["zero_loss"]["rows"] == 3 and found.rows_without_loss == 3
    assert "unreadable" in data["problems"] and "zero_loss" in data["problems"]
    assert "tokens" in data and data["tokens"] is None  # no tokenizer: message-level figures only

def test_system_prompt_on_rows_with_their_own_system_message_is_a_duplicate(tmp_path: Path) -> None:
    rows = [_talk(("user", "hello there"), ("assistant", "fine thanks")),
            _talk(("system", "Own prompt"), ("user", "hello there"), ("assistant", "fine thanks"))]
    source = write_jsonl(tmp_path / "rows.jsonl", rows)
    found = _audit(source, system_prompt="You are a careful support agent")
    duplicate = found.to_dict()["findings"]["duplicate_system"]
    assert (duplicate["rows"], duplicate["first"][0]["line"], duplicate["first"][0]["row"]) == (1, 2, 1)
    assert found.count("duplicate-system") == 1
    assert found.findings["missing_system"].rows == 0


def test_a_template_that_drops_the_system_message_is_found_by_rendering(tmp_path: Path, tokenizer: Any) -> None:
    source = write_jsonl(tmp_path / "rows.jsonl", [_talk(("user", "hello there"), ("assistant", "fine thanks"))] * 2)
    found = _audit(source, tokenizer=tokenizer, template=NO_SYSTEM, system_prompt="You are a careful support agent")
    assert found.template is not None and found.template["renders_system"] is False
    assert found.count("template-drops") == found.findings["template_drops_system"].rows == 2
    kept = _audit(source, tokenizer=tokenizer, system_prompt="You are a careful support agent")
    assert kept.count("template-drops") == 0 and kept.template["renders_system"] is True  # type: ignore[index]


def test_think_blocks_are_kept_as_load_and_tokenize_keep_them_and_a_turn_stripping_empties_is_a_problem(
        tmp_path: Path) -> None:
    rows = [_talk(("user", "what is two plus two"), ("assistant", "<think>think hard</think>four")),
            _talk(("user", "what is two plus two"), ("assistant", "<think>think hard</think>"))]
    source = write_jsonl(tmp_path / "rows.jsonl", rows)
    kept = _audit(source).findings  # the default: what load_dataset + tokenize train
    assert (kept["think_kept"].rows, kept["think_stripped"].rows, kept["emptied_by_think"].rows) == (2, 0, 0)
    stripped = _audit(source, strip_think=True).findings  # what an export with whileai's default trains
    assert (stripped["think_stripped"].rows, stripped["think_stripped"].amount) == (2, 2)
    assert (stripped["emptied_by_think"].rows, stripped["emptied_by_think"].first) == (1, [1])


def test_three_marked_turns_exported_as_completion_lose_two(tmp_path: Path, tokenizer: Any) -> None:
    three = _talk(("user", "hello there"), ("assistant", "fine thanks"), ("user", "the order is late"),
                  ("assistant", "refund it please"), ("user", "how are you"), ("assistant", "fine thanks"))
    source = write_jsonl(tmp_path / "rows.jsonl", [_talk(("user", "hello"), ("assistant", "four")), three])
    found = _audit(source, tokenizer=tokenizer, format="trl", mask_mode="final")
    lost = found.findings["completion_turns_lost"]
    assert (lost.rows, lost.amount, lost.first) == (1, 2, [1])
    assert _audit(source, format="trl").findings["completion_turns_lost"].rows == 0  # messages rows: all turns


def test_rows_longer_than_max_length_are_cut_and_counted(tmp_path: Path, tokenizer: Any) -> None:
    long = _talk(("user", " ".join(["hello there how are you"] * 30)), ("assistant", "fine thanks"))
    short = _talk(("user", "hello"), ("assistant", "fine thanks"))
    source = write_jsonl(tmp_path / "rows.jsonl", [short, long, short])
    whole = _audit(source, tokenizer=tokenizer)
    found = _audit(source, tokenizer=tokenizer, max_length=40)
    cut, none_left = found.findings["truncated"], found.findings["truncated_to_nothing"]
    assert (cut.rows, cut.first, none_left.rows, none_left.first) == (1, [1], 1, [1])
    lost = whole.supervised_tokens - found.supervised_tokens
    assert lost > 0 and none_left.amount == lost
    assert found.tokens_before_cut == whole.tokens and found.tokens < whole.tokens
    assert found.rows_without_loss == 1 and whole.rows_without_loss == 0
    assert found.to_dict()["worst"]["most_cut"][0]["row"] == 1


def test_rows_with_no_assistant_turn_and_final_mask_on_a_trailing_tool_turn(tmp_path: Path) -> None:
    rows = [_talk(("user", "hello")),
            {"messages": [{"role": "user", "content": "the order is late"},
                          {"role": "assistant", "content": "", "tool_calls": [
                              {"id": "c1", "type": "function",
                               "function": {"name": "lookup_order", "arguments": "{\"order_id\": \"1\"}"}}]},
                          {"role": "tool", "tool_call_id": "c1", "content": "late"}]}]
    source = write_jsonl(tmp_path / "rows.jsonl", rows)
    found = _audit(source, mask_mode="final").findings
    assert (found["no_assistant"].rows, found["no_assistant"].first) == (1, [0])
    assert (found["final_not_last"].rows, found["final_not_last"].first) == (1, [1])


def test_to_dict_lists_every_finding_and_histograms_count_every_row(tmp_path: Path, tokenizer: Any) -> None:
    rows = [_talk(("user", "hello"), ("assistant", "fine thanks"))] * 4
    data = _audit(write_jsonl(tmp_path / "rows.jsonl", rows), tokenizer=tokenizer).to_dict()
    assert set(data["findings"]) == set(FINDINGS)
    assert data["problems"] == ["missing_system"]
    for name in ("tokens_per_row", "supervised_tokens_per_row", "supervised_share_per_row"):
        assert sum(data["histograms"][name]["counts"]) == data["histograms"][name]["n"] == 4
    assert data["tokens"]["naive_ratio"] == data["tokens"]["total"] / data["tokens"]["supervised"]
    assert json.loads(json.dumps(data)) == data


def test_cli_fail_on_exits_non_zero_and_names_the_problem(tmp_path: Path, tokenizer: Any,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    tokenizer.save_pretrained(tmp_path / "tok")
    long = _talk(("user", " ".join(["hello there how are you"] * 30)), ("assistant", "fine thanks"))
    source = write_jsonl(tmp_path / "rows.jsonl", [_talk(("user", "hello"), ("assistant", "four")), long])
    base = ["audit", str(source), "--tokenizer", str(tmp_path / "tok"), "--max-length", "40"]
    assert cli.main([*base, "--fail-on", "duplicate-system"]) == 0
    out = capsys.readouterr().out
    assert "truncated-to-nothing" in out and f"first: {source.name} line 2 (row 1)" in out
    assert f"{source} line" not in out  # a location names its file, not the whole path again
    assert cli.main([*base, "--fail-on", "zero-loss,truncated,template-drops"]) == 3
    err = capsys.readouterr().err
    assert "--fail-on: zero-loss (1 rows), truncated (1 rows)" in err and "template-drops" not in err
    assert cli.main([*base, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["findings"]["truncated"]["rows"] == 1


def test_cli_refuses_an_unknown_fail_on_name_and_lists_the_known_ones(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit, match="2"):
        cli.main(["audit", "x.jsonl", "--fail-on", "zero-loss,nonsense"])
    err = capsys.readouterr().err
    assert "unknown finding 'nonsense'; known:" in err and "duplicate-system" in err and "template-drops" in err


def test_audit_refuses_an_unknown_engine_and_a_max_length_it_cannot_count(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "rows.jsonl", [_talk(("user", "hello"), ("assistant", "four"))])
    with pytest.raises(ValueError, match="engine must be one of 'local', 'ray', got 'dask'"):
        audit(str(source), engine="dask")
    with pytest.raises(TypeError, match="max_length counts tokens, and no tokenizer was given"):
        audit(str(source), max_length=10)


def test_on_whileai_demo_rows_as_trl_the_naive_ratio_is_what_mask_report_measures(tmp_path: Path, load: Any) -> None:
    rows = seeded_rows(seed=7, mode="rl", repeats=1, budget=8)
    source = write_jsonl(tmp_path / "rows.jsonl", rows)
    tok = train_tokenizer([json.dumps(r) for r in rows], chat_template=trl_template("qwen2_5"))
    found = audit(str(source), tokenizer=tok, system_prompt=SYSTEM_PROMPT, tools=TOOLS, format="trl")
    canonical = load(source, system_prompt=SYSTEM_PROMPT, tools=TOOLS)
    report = mask_report(canonical.map(tokenize(tok), batched=True, remove_columns=canonical.column_names))
    assert (found.tokens, found.supervised_tokens) == (report["tokens"], report["supervised_tokens"])
    assert found.naive_ratio == pytest.approx(report["naive_over_masked"]) and found.naive_ratio > 3
    assert found.trainers["trl"]["trains_tokens"] == found.tokens  # messages rows: every token
    naive = found.findings["trains_every_token"]
    assert (naive.rows, naive.amount) == (len(rows), found.tokens - found.supervised_tokens)
    assert f"naive ratio          {found.naive_ratio:.1f}x" in found.format()


def test_rows_after_unreadable_ones_keep_their_file_and_line(tmp_path: Path) -> None:
    """The reader leaves unreadable rows out, so the rows read are numbered without them; their lines
    are still the file's own."""
    good = _talk(("system", "Own prompt"), ("user", "hello there"), ("assistant", "fine thanks"))
    rows = [{"question": "q0", "reply": "r0"}, _talk(("user", "hi"), ("assistant", "fine")),
            {"question": "q1", "reply": "r1"}, good]
    source = write_jsonl(tmp_path / "mixed.jsonl", rows)
    found = _audit(source, system_prompt="Be brief.")
    first = found.to_dict()["findings"]["duplicate_system"]["first"]
    assert found.findings["unreadable"].rows == 2
    assert [(Path(f["file"]).name, f["line"]) for f in first] == [("mixed.jsonl", 4)]
    lines = (tmp_path / "mixed.jsonl").read_text().splitlines()
    assert json.loads(lines[first[0]["line"] - 1]) == good


def test_past_the_last_unreadable_row_listed_no_line_is_guessed(tmp_path: Path) -> None:
    from whileai_datasets.reading.reader import BadRows

    own = _talk(("system", "Own prompt"), ("user", "hello there"), ("assistant", "fine thanks"))
    unlisted = BadRows().KEEP + 1  # the reader lists this many skipped rows, and counts them all
    rows = [own, *({"question": f"q{i}"} for i in range(unlisted)), own]
    found = _audit(write_jsonl(tmp_path / "many-bad.jsonl", rows), system_prompt="Be brief.")
    first = found.to_dict()["findings"]["duplicate_system"]["first"]
    assert found.findings["unreadable"].rows == unlisted
    assert [(f["row"], f["line"]) for f in first] == [(0, 1), (1, None)]


#: Prints ``content`` as it is: a list of parts comes out as its Python repr, keys and all.
AS_IS = CHATML
#: Writes the text of each text part.
PARTS_AWARE = (
    "{%- for m in messages %}<|im_start|>{{ m.role }}\n{%- if m.content is string %}{{ m.content }}{%- else %}"
    "{%- for p in m.content %}{%- if p.type == 'text' %}{{ p.text }}{%- endif %}{%- endfor %}{%- endif %}"
    "<|im_end|>\n{%- endfor %}{%- if add_generation_prompt %}<|im_start|>assistant\n{%- endif %}"
)
#: Leaves any content that is not a string out.
STRINGS_ONLY = PARTS_AWARE.replace("{%- for p in m.content %}{%- if p.type == 'text' %}{{ p.text }}{%- endif %}"
                                   "{%- endfor %}", "")


@pytest.mark.parametrize(("template", "joins", "images"),
                         [(AS_IS, True, "dropped"), (STRINGS_ONLY, True, "dropped"), (PARTS_AWARE, False, "text_only")])
def test_content_parts_a_template_does_not_write_as_text_are_joined_or_named_by_rendering(
        tmp_path: Path, template: str, joins: bool, images: str) -> None:
    """Text-only parts reach every template as their text (joined for one that prints a list as it is or
    leaves it out, and named); text beside an image that such a template cannot take is named as dropped,
    and an image a parts-aware template writes nothing for is named too."""
    parts = {"messages": [{"role": "user", "content": [{"type": "text", "text": "hello there"}]},
                          {"role": "assistant", "content": "fine thanks"}]}
    image = {"messages": [{"role": "user", "content": [{"type": "text", "text": "what is this?"},
                                                       {"type": "image", "image": "cat.png"}]},
                          {"role": "assistant", "content": "a cat"}]}
    source = write_jsonl(tmp_path / "parts.jsonl", [_talk(("user", "hi"), ("assistant", "fine")), parts, image])
    found = _audit(source, template=template)
    assert found.template is not None and found.template["renders_content_parts"] is True
    assert found.template["joins_text_parts"] is joins and found.template["image_parts"] == images
    findings = found.to_dict()["findings"]
    joined = findings["text_parts_joined"]
    assert (joined["rows"], [f["line"] for f in joined["first"]]) == ((1, [2]) if joins else (0, []))
    dropped = "template_drops_content_parts" if images == "dropped" else "template_drops_images"
    assert (findings[dropped]["rows"], [f["line"] for f in findings[dropped]["first"]]) == (1, [3])
    assert found.count("template-drops") == 1
    assert ("text parts DROPPED" in found.format()) is (images == "dropped")
    assert ("images DROPPED" in found.format()) is (images == "text_only")


def test_findings_on_a_json_array_file_name_the_line_each_row_starts_on(tmp_path: Path) -> None:
    rows = [_talk(("user", f"question {i}"), ("assistant", f"answer {i}")) for i in range(4)]
    rows[2]["messages"].insert(0, {"role": "system", "content": "Be brief."})
    source = tmp_path / "rows.json"
    text = json.dumps(rows, indent=2)  # pretty-printed: each element opens on a line of its own
    source.write_text(text, encoding="utf-8")
    starts = [number for number, line in enumerate(text.splitlines(), 1) if line == "  {"]
    first = _audit(source).to_dict()["findings"]["missing_system"]["first"]
    assert [(entry["row"], entry["line"]) for entry in first] == [(0, starts[0]), (1, starts[1]), (3, starts[3])]
    assert all(entry["file"] == str(source) for entry in first)


def test_role_shares_count_the_text_of_content_parts_as_of_string_content() -> None:
    """A conversation given as text parts has the role shares of the same conversation given as strings
    (before, its content counted 0 characters for every role)."""
    as_strings = [{"messages": [{"role": "user", "content": "Where is order 5?"},
                                {"role": "assistant", "content": "It ships today."}]}]
    as_parts = [{"messages": [{"role": "user", "content": [{"type": "text", "text": "Where is "},
                                                           {"type": "text", "text": "order 5?"}]},
                              {"role": "assistant", "content": [{"type": "text", "text": "It ships today."}]}]}]
    roles = audit(as_parts).to_dict()["roles"]
    assert roles == audit(as_strings).to_dict()["roles"]
    assert (roles["user"]["chars"], roles["assistant"]["chars"]) == (len("Where is order 5?"), len("It ships today."))


def test_trl_default_is_measured_when_asked_and_otherwise_said_not_measured(tmp_path: Path, tokenizer: Any,
                                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """TRL's default route renders every trained turn's prompt again: the audit measures it only when asked
    (``trl_default=True``, ``--trl-default``); otherwise its entry says so and how, and no other figure changes."""
    rows = [_talk(("user", "hello"), ("assistant", "four")),
            _talk(("user", "the order is late"), ("assistant", "refund it please"), ("user", "think hard"),
                  ("assistant", "fine thanks"))]
    source = write_jsonl(tmp_path / "rows.jsonl", rows)
    quick, asked = audit(str(source), tokenizer=tokenizer), audit(str(source), tokenizer=tokenizer, trl_default=True)
    unmeasured, measured = quick.trainers["trl-default"], asked.trainers["trl-default"]
    assert unmeasured["exact"] is None and unmeasured["trains_tokens"] is None and unmeasured["rows"] is None
    assert unmeasured["how"].startswith("not measured") and "trl_default=True" in unmeasured["how"]
    assert measured["rows"] == 3 and isinstance(measured["exact"], bool) and measured["trains_tokens"] > 0
    assert measured["how"].startswith(("exact", "not exact"))
    line = next(line for line in quick.format().splitlines() if line.strip().startswith("trl-default"))
    assert "not measured" in line and "--trl-default" in line and ": exact" not in line and "inexact" not in line
    from whileai_datasets.auditing.html import audit_html

    row = re.search(r'<tr data-trainer="trl-default" data-exact="none">(.*?)</tr>', audit_html(quick.to_dict()))
    assert row is not None and "<td>not measured</td>" in row.group(1)
    mine, theirs = json.loads(json.dumps(quick.to_dict())), json.loads(json.dumps(asked.to_dict()))
    assert mine["trainers"].pop("trl-default") != theirs["trainers"].pop("trl-default")
    assert mine == theirs  # the option changes that trainer's entry alone
    tokenizer.save_pretrained(tmp_path / "tok")
    base = ["audit", str(source), "--tokenizer", str(tmp_path / "tok"), "--json"]
    for flags, expected in (([], unmeasured), (["--trl-default"], measured)):
        assert cli.main([*base, *flags]) == 0
        assert json.loads(capsys.readouterr().out)["trainers"]["trl-default"] == expected
    # what publish refuses is said first, measured or not: never "exact"
    opening = write_jsonl(tmp_path / "opening.jsonl", [_talk(("assistant", "I open"), ("user", "hello"),
                                                             ("assistant", "four")), *rows])
    for trl_default in (False, True):
        entry = audit(str(opening), tokenizer=tokenizer, trl_default=trl_default).trainers["trl-default"]
        assert entry["exact"] is False and entry["how"].startswith("publish refuses these rows (1)")
        assert ("not measured" in entry["how"]) is not trl_default


def test_audits_of_one_template_in_a_process_inspect_it_once(tmp_path: Path, tokenizer: Any) -> None:
    """The template is resolved to one shared ``ChatTemplate`` (what inspecting it found is kept), per text, name
    and special tokens: another template, or the same text with other special tokens, is its own."""
    from whileai_datasets.auditing import template_drops

    first, again = template_drops.resolve(tokenizer, None), template_drops.resolve(tokenizer, None)
    assert first is again and template_drops.template_facts(first) is template_drops.template_facts(again)
    assert template_drops.resolve(tokenizer, NO_SYSTEM) is not first
    other = train_tokenizer(["hello there how are you"] * 20, chat_template=CHATML, vocab_size=300, bos_token="<s>")
    assert other.special_tokens_map != tokenizer.special_tokens_map
    assert template_drops.resolve(other, None) is not first
    source = write_jsonl(tmp_path / "rows.jsonl", [_talk(("user", "hello"), ("assistant", "four"))])
    dropped = audit(str(source), tokenizer=tokenizer, template=NO_SYSTEM, system_prompt="You are terse")
    kept = audit(str(source), tokenizer=tokenizer, system_prompt="You are terse")
    assert dropped.findings["template_drops_system"].rows == 1 and kept.findings["template_drops_system"].rows == 0
