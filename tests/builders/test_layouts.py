"""Other tools' layouts (issue 47), each from a small file written in that tool's real layout
(tests/data/layouts/): read with nothing lost (the loaded rows are compared with the raw file,
mapped by the tool's own documented rules, written out here) or refused naming the file, the
line and what to do. None loads empty."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import read_jsonl, template_rows, write_jsonl
from whileai_datasets import ExportFormatError

LAYOUTS = Path(__file__).parent.parent / "data" / "layouts"
SHAREGPT = {"human": "user", "gpt": "assistant", "system": "system"}


def _raw(name: str) -> list[dict[str, Any]]:
    path = LAYOUTS / name
    if path.suffix == ".jsonl":
        return read_jsonl(path)
    loaded = json.loads(path.read_text(encoding="utf-8"))
    return loaded if isinstance(loaded, list) else [loaded]


def _pairs(load: Any, name: str, **options: Any) -> list[tuple[Any, Any, Any]]:
    rows = template_rows(load(LAYOUTS / name, "preference", **options))
    for row in rows:  # never an empty side
        assert any(m["role"] == "assistant" for m in row["chosen"]), row
        assert any(m["role"] == "assistant" for m in row["rejected"]), row
    return [(row["prompt"], row["chosen"], row["rejected"]) for row in rows]


def _turn(turn: dict[str, str]) -> dict[str, str]:
    return {"role": SHAREGPT[turn["from"]], "content": turn["value"]}


# ---------------------------------------------------------------- preference layouts


def test_llama_factory_pairs_with_one_turn_per_side_read_whole(load: Any) -> None:
    raw = _raw("llama_factory_dpo.json")
    expected = []
    for row in raw:
        prefix = [_turn(t) for t in row["conversations"]]
        if "system" in row:
            prefix = [{"role": "system", "content": row["system"]}, *prefix]
        expected.append((None, [*prefix, _turn(row["chosen"])], [*prefix, _turn(row["rejected"])]))
    assert _pairs(load, "llama_factory_dpo.json") == expected


def test_llama_factory_pairs_with_lists_per_side_read_whole(load: Any) -> None:
    raw = _raw("llama_factory_dpo_lists.jsonl")
    expected = [(None, [*map(_turn, row["conversations"]), *map(_turn, row["chosen"])],
                 [*map(_turn, row["conversations"]), *map(_turn, row["rejected"])]) for row in raw]
    assert _pairs(load, "llama_factory_dpo_lists.jsonl") == expected


def test_llama_factory_alpaca_pairs_join_instruction_and_input(load: Any) -> None:
    expected = []
    for row in _raw("llama_factory_dpo_alpaca.json"):
        ask = row["instruction"] + ("\n" + row["input"] if row["input"] else "")
        prefix = [m for q, a in row.get("history", []) for m in
                  ({"role": "user", "content": q}, {"role": "assistant", "content": a})]
        prefix = [*prefix, {"role": "user", "content": ask}]
        if "system" in row:
            prefix = [{"role": "system", "content": row["system"]}, *prefix]
        reply = lambda text: {"role": "assistant", "content": text}  # noqa: E731
        expected.append((None, [*prefix, reply(row["chosen"])], [*prefix, reply(row["rejected"])]))
    assert _pairs(load, "llama_factory_dpo_alpaca.json") == expected


def test_trl_standard_pairs_are_one_user_and_one_assistant_turn(load: Any) -> None:
    expected = [(row["prompt"], [{"role": "user", "content": row["prompt"]}, {"role": "assistant", "content": c}],
                 [{"role": "user", "content": row["prompt"]}, {"role": "assistant", "content": r}])
                for row in _raw("trl_preference_standard.jsonl") for c, r in [(row["chosen"], row["rejected"])]]
    assert _pairs(load, "trl_preference_standard.jsonl") == expected


def test_trl_conversational_pairs_with_explicit_and_implicit_prompt(load: Any) -> None:
    explicit, implicit = _raw("trl_preference_conversational.jsonl")
    assert _pairs(load, "trl_preference_conversational.jsonl") == [
        (None, explicit["prompt"] + explicit["chosen"], explicit["prompt"] + explicit["rejected"]),
        (None, implicit["chosen"], implicit["rejected"]),
    ]


@pytest.mark.parametrize("name", ["openai_dpo.jsonl", "fireworks_dpo.jsonl"])
def test_openai_and_fireworks_dpo_files_read_with_their_tools(load: Any, name: str) -> None:
    raw = _raw(name)
    rows = template_rows(load(LAYOUTS / name, "preference"))
    system = {"developer": "system"}
    for row, given in zip(rows, raw, strict=True):
        prefix = [{**m, "role": system.get(m["role"], m["role"])} for m in given["input"]["messages"]]
        assert row["chosen"] == prefix + given["preferred_output"]
        assert row["rejected"] == prefix + given["non_preferred_output"]
        assert row["tools"] == (given["input"].get("tools") or None)


def test_ultrafeedback_rows_keep_their_whole_sides_and_prompt(load: Any) -> None:
    expected = [(row["prompt"], row["chosen"], row["rejected"]) for row in _raw("ultrafeedback.jsonl")]
    assert _pairs(load, "ultrafeedback.jsonl") == expected


def test_swift_pairs_with_rejected_response_or_rejected_messages(load: Any) -> None:
    response, whole = _raw("swift_dpo.jsonl")
    assert _pairs(load, "swift_dpo.jsonl") == [
        (None, response["messages"],
         [*response["messages"][:-1], {"role": "assistant", "content": response["rejected_response"]}]),
        (None, whole["messages"], whole["rejected_messages"]),
    ]


def test_whileai_export_preference_output_reads_back_as_its_pairs(tmp_path: Path, load: Any) -> None:
    from whileai.simulations import export_preference

    rows = [row for row in _raw("llama_factory_dpo.json") if len(row["conversations"]) == 1]
    pairs = [{"prompt": row["conversations"][0]["value"],
              "chosen": {"prompt": row["conversations"][0]["value"], "final_text": row["chosen"]["value"]},
              "rejected": {"prompt": row["conversations"][0]["value"], "final_text": row["rejected"]["value"]}}
             for row in rows]
    for fmt in ("openai", "trl", "fireworks"):
        out = tmp_path / f"{fmt}.jsonl"
        export_preference(pairs, str(out), format=fmt, validate=False, drop_ties=False, strip_think=False)
        for row, written in zip(rows, template_rows(load(out, "preference")), strict=True):
            ask = _turn(row["conversations"][0])
            assert written["chosen"] == [ask, _turn(row["chosen"])], fmt
            assert written["rejected"] == [ask, _turn(row["rejected"])], fmt


@pytest.mark.parametrize(("row", "message"), [
    ({"conversations": [{"from": "human", "value": "Hi"}], "chosen": {"from": "gpt", "value": "Hello"}},
     r"line 1 \(row 0\), rejected: expected a rejected side, got none"),
    ({"conversations": [{"from": "human", "value": "Hi"}], "chosen": {"from": "gpt"},
      "rejected": {"from": "gpt", "value": "Yo"}}, r"chosen\[0\]\.value: expected the turn's text, got null"),
    ({"conversations": [{"from": "human", "value": "Hi"}], "chosen": [], "rejected": [{"from": "gpt", "value": "Yo"}]},
     "chosen: expected the chosen side to hold an assistant turn"),
    ({"input": {"messages": [{"role": "user", "content": "Hi"}]}, "preferred_output": [],
      "non_preferred_output": [{"role": "assistant", "content": "Yo"}]},
     "preferred_output: expected the preferred_output side to hold an assistant turn, got 1 turn"),
    ({"input": {"messages": [{"role": "user", "content": "Hi"}]},
      "preferred_output": [{"role": "assistant", "content": "Yo"}]},
     "non_preferred_output: expected the non_preferred_output side as a message list, got none"),
    ({"messages": [{"role": "user", "content": "Hi"}], "rejected_response": "Yo"},
     "messages: expected the messages side to hold an assistant turn"),
    ({"prompt": "Hi", "chosen": 3, "rejected": "Yo"}, "chosen: expected the chosen side as a message list"),
])
def test_a_near_miss_pair_is_refused_by_name(tmp_path: Path, load: Any, row: dict[str, Any], message: str) -> None:
    with pytest.raises(ExportFormatError, match=message):
        load(write_jsonl(tmp_path / "pairs.jsonl", [row]), "preference")


def _in_place(messages: list[dict[str, Any]], given: list[dict[str, Any]], row: dict[str, Any]) -> None:
    """Each loaded message is its raw message with LLaMA-Factory's placeholders as parts in place: the text read
    back with a part's tag where each media part sits is the raw text, and each kind's references come in the
    order of the row's list of that kind, every one of them used."""
    tags = {"image": "<image>", "video": "<video>", "audio": "<audio>"}
    lists = {kind: iter(row.get(f"{kind}s") or ()) for kind in tags}
    for message, source in zip(messages, given, strict=True):
        if not any(tag in source["content"] for tag in tags.values()):
            assert message == source
            continue
        assert {k: v for k, v in message.items() if k != "content"} == {k: v for k, v in source.items()
                                                                         if k != "content"}
        rebuilt = "".join(p["text"] if p["type"] == "text" else tags[p["type"]] for p in message["content"])
        assert rebuilt == source["content"]
        for part in message["content"]:
            if part["type"] != "text":
                assert part == {"type": part["type"], part["type"]: next(lists[part["type"]])}
    assert all(next(refs, None) is None for refs in lists.values())


def test_llama_factory_pairs_with_image_placeholders_take_the_images_on_each_side(load: Any) -> None:
    rows = template_rows(load(LAYOUTS / "llama_factory_dpo_mllm.json", "preference"))
    for row, given in zip(rows, _raw("llama_factory_dpo_mllm.json"), strict=True):
        prefix = [_turn(t) for t in given["conversations"]]
        for side in ("chosen", "rejected"):
            assert row[side][-1] == _turn(given[side])
            _in_place(row[side][:-1], prefix, given)


def test_trl_vision_pairs_fill_their_image_placeholders_in_order(load: Any) -> None:
    rows = template_rows(load(LAYOUTS / "trl_preference_vision.jsonl", "preference"))
    for row, given in zip(rows, _raw("trl_preference_vision.jsonl"), strict=True):
        images = iter(given["images"])
        prompt = [{**m, "content": [{**p, "image": next(images)} if p["type"] == "image" else p
                                    for p in m["content"]]} for m in given["prompt"]]
        assert next(images, None) is None
        assert (row["chosen"], row["rejected"]) == (prompt + given["chosen"], prompt + given["rejected"])


@pytest.mark.parametrize(("row", "message"), [
    ({"conversations": [{"from": "human", "value": "<image><image>Which?"}], "chosen": {"from": "gpt", "value": "A"},
      "rejected": {"from": "gpt", "value": "B"}, "images": ["one.jpg"]},
     r"line 1 \(row 0\), images: expected one image per '<image>' placeholder in the text \(2\), got 1 images"),
    ({"prompt": [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Which?"}]}],
      "chosen": [{"role": "assistant", "content": "A"}], "rejected": [{"role": "assistant", "content": "B"}],
      "images": ["one.jpg", "two.jpg"]},
     r"images: expected one image per \{'type': 'image'\} placeholder \(1\), got 2 images"),
])
def test_a_vision_pair_whose_media_do_not_match_is_refused_by_name(tmp_path: Path, load: Any, row: dict[str, Any],
                                                                   message: str) -> None:
    with pytest.raises(ExportFormatError, match=message):
        load(write_jsonl(tmp_path / "pairs.jsonl", [row]), "preference")


@pytest.mark.parametrize("name", ["llama_factory_dpo.json", "llama_factory_dpo_lists.jsonl"])
def test_export_preference_writes_a_file_of_pairs_in_another_tools_layout(tmp_path: Path, load: Any,
                                                                        name: str) -> None:
    """A path (Python) or the input of ``export --preference``, JSONL or a JSON array: the pairs the
    preference config reads, never read as no pairs ("all-pass or all-fail runs") or as characters."""
    import whileai_datasets
    from whileai_datasets import cli

    loaded = template_rows(load(LAYOUTS / name, "preference"))
    out = tmp_path / "python.jsonl"
    report = whileai_datasets.export_preference(str(LAYOUTS / name), str(out), format="trl", strip_think=False)
    assert report["pairs"] == len(loaded) == len(_raw(name))
    assert cli.main(["export", str(LAYOUTS / name), str(tmp_path / "cli.jsonl"), "--preference", "--format", "trl",
                     "--keep-think", "--json"]) == 0
    assert read_jsonl(tmp_path / "cli.jsonl") == read_jsonl(out)
    for row, pair in zip(read_jsonl(out), loaded, strict=True):  # TRL's one-turn pairs: the last turn of each side
        assert row["chosen"][-1]["content"] == pair["chosen"][-1]["content"]
        assert row["rejected"][-1]["content"] == pair["rejected"][-1]["content"]


# ---------------------------------------------------------------- the default config


def test_llama_factory_image_placeholders_become_parts_in_place(load: Any) -> None:
    rows = template_rows(load(LAYOUTS / "llama_factory_mllm.json"))
    for row, given in zip(rows, _raw("llama_factory_mllm.json"), strict=True):
        images = iter(given["images"])
        for message, source in zip(row["messages"], given["messages"], strict=True):
            if "<image>" not in source["content"]:
                assert message == source
                continue
            rebuilt = "".join(p["text"] if p["type"] == "text" else "<image>" for p in message["content"])
            assert rebuilt == source["content"]
            assert [p["image"] for p in message["content"] if p["type"] == "image"] == \
                [next(images) for _ in range(source["content"].count("<image>"))]
        assert next(images, None) is None


def test_image_placeholders_that_do_not_match_the_images_are_refused(tmp_path: Path, load: Any) -> None:
    row = {"messages": [{"role": "user", "content": "<image><image>Who?"}, {"role": "assistant", "content": "Two."}],
           "images": ["a.jpg"]}
    with pytest.raises(ExportFormatError, match=r"line 1 \(row 0\), images: expected one image per '<image>' "
                       r"placeholder in the text \(2\), got 1 images"):
        load(write_jsonl(tmp_path / "mllm.jsonl", [row]))


def test_llama_factory_video_and_audio_placeholders_become_parts_in_place(load: Any) -> None:
    raw = _raw("llama_factory_mllm_video_audio.json")
    rows = template_rows(load(LAYOUTS / "llama_factory_mllm_video_audio.json"))
    assert len(rows) == len(raw)
    for row, given in zip(rows, raw, strict=True):
        _in_place(row["messages"], given["messages"], given)


@pytest.mark.parametrize(("media", "message"), [
    ({"videos": ["a.mp4", "b.mp4"]}, r"videos: expected one video per '<video>' placeholder in the text \(1\), "
                                     r"got 2 videos\. Give the row as many videos as its <video> placeholders"),
    ({"videos": ["a.mp4"]}, r"audios: expected a list of audio references"),
])
def test_video_and_audio_placeholders_that_do_not_match_are_refused(tmp_path: Path, load: Any,
                                                                    media: dict[str, Any], message: str) -> None:
    row = {"messages": [{"role": "user", "content": "<video>What?"}, {"role": "assistant", "content": "Rain."}],
           **media}
    if "audios" not in media and len(media["videos"]) == 1:
        row["audios"] = "a.wav"  # one reference as text, not a list
    with pytest.raises(ExportFormatError, match=r"mllm.jsonl line 1 \(row 0\), " + message):
        load(write_jsonl(tmp_path / "mllm.jsonl", [row]))


def test_a_json_file_of_one_object_is_one_row(load: Any) -> None:
    raw = _raw("one_object.json")[0]
    row = template_rows(load(LAYOUTS / "one_object.json"))[0]
    assert row["messages"] == raw["messages"]
    assert (row["reward"], row["scenario_id"]) == (raw["reward"], raw["scenario_id"])


def test_two_objects_in_one_json_file_are_refused_naming_the_line(tmp_path: Path, load: Any) -> None:
    one = json.dumps({"messages": [{"role": "user", "content": "a"}]}, indent=2)
    (tmp_path / "two.json").write_text(one + "\n" + one + "\n", encoding="utf-8")
    with pytest.raises(ExportFormatError, match=r"two.json line 9: text after the object's closing '}'"):
        load(tmp_path / "two.json")


def test_a_bare_array_of_messages_is_one_conversation(load: Any) -> None:
    rows = template_rows(load(LAYOUTS / "bare_messages.json"))
    assert [row["messages"] for row in rows] == [_raw("bare_messages.json")]


def test_a_bare_array_with_a_row_among_its_messages_names_the_message(tmp_path: Path, load: Any) -> None:
    path = tmp_path / "bare.json"
    path.write_text(json.dumps([{"role": "user", "content": "a"}, {"messages": []}], indent=2), encoding="utf-8")
    with pytest.raises(ExportFormatError, match=r"bare.json line 2 \(row 0\), messages\[1\]\.role: expected one of"):
        load(path)


def test_developer_role_tool_calls_as_text_and_a_rows_system_prompt_read(load: Any) -> None:
    developer, hermes = _raw("agent_rows.jsonl")
    rows = template_rows(load(LAYOUTS / "agent_rows.jsonl"))

    def calls(given: Any) -> list[Any]:
        return json.loads(given) if isinstance(given, str) else [json.loads(c) for c in given]

    expected_first = [{**m, "role": "system"} if m["role"] == "developer" else m for m in developer["messages"]]
    expected_first[2] = {**expected_first[2], "tool_calls": calls(expected_first[2]["tool_calls"])}
    assert rows[0]["messages"] == expected_first
    expected_second = [{"role": "system", "content": hermes["system_prompt"]}, *hermes["messages"]]
    expected_second[2] = {**expected_second[2], "tool_calls": calls(expected_second[2]["tool_calls"])}
    assert rows[1]["messages"] == expected_second


def test_a_rows_system_prompt_beside_the_option_warns_of_two_system_messages(tmp_path: Path) -> None:
    import whileai_datasets
    from whileai_datasets import DuplicateSystemWarning

    with pytest.warns(DuplicateSystemWarning):
        whileai_datasets.export_dataset(str(LAYOUTS / "agent_rows.jsonl"), str(tmp_path / "out.jsonl"),
                                        system_prompt="Option prompt.", validate=False)
    first = read_jsonl(tmp_path / "out.jsonl")[1]["messages"][:2]
    assert [m["content"] for m in first] == ["Option prompt.", "You are Hermes, an agent with a terminal tool."]


@pytest.mark.parametrize(("message", "found"), [
    ({"role": "Developer", "content": "x"}, r"messages\[0\]\.role: expected one of .* got 'Developer'"),
    ({"role": "assistant", "content": "", "tool_calls": ["{not json"]},
     r"messages\[0\]\.tool_calls\[0\]: expected a tool call \(an object, or JSON text of one\), got text that is "
     r"not JSON"),
    ({"role": "assistant", "content": "", "tool_calls": ["[1, 2]"]},
     r"messages\[0\]\.tool_calls\[0\]: expected a tool-call object, got list"),
])
def test_near_miss_messages_stay_refused_by_name(tmp_path: Path, load: Any, message: Any, found: str) -> None:
    with pytest.raises(ExportFormatError, match=found):
        load(write_jsonl(tmp_path / "rows.jsonl", [{"messages": [message]}]))


def test_a_system_prompt_that_is_not_text_is_refused(tmp_path: Path, load: Any) -> None:
    row = {"system_prompt": ["a"], "messages": [{"role": "user", "content": "a"}]}
    with pytest.raises(ExportFormatError, match=r"line 1 \(row 0\), system_prompt: expected the system prompt as text"):
        load(write_jsonl(tmp_path / "rows.jsonl", [row]))


def test_swift_conversation_pairs_read_as_turns(load: Any) -> None:
    rows = template_rows(load(LAYOUTS / "swift_conversation.jsonl"))
    for row, given in zip(rows, _raw("swift_conversation.jsonl"), strict=True):
        turns = [m for pair in given["conversation"] for m in
                 ({"role": "user", "content": pair["human"]}, {"role": "assistant", "content": pair["assistant"]})]
        system = [{"role": "system", "content": given["system"]}] if "system" in given else []
        assert row["messages"] == system + turns


def test_a_swift_pair_without_its_reply_is_refused(tmp_path: Path, load: Any) -> None:
    with pytest.raises(ExportFormatError, match=r"line 1 \(row 0\), conversation\[0\]: expected a "
                       r'\{"human": \.\.\., "assistant": \.\.\.\} pair of texts, got \{"human": "hi"\}'):
        load(write_jsonl(tmp_path / "swift.jsonl", [{"conversation": [{"human": "hi"}]}]))


# ---------------------------------------------------------------- hints


def test_a_pair_file_in_the_default_config_points_to_the_preference_config(load: Any) -> None:
    from whileai_datasets import UnreadKeysWarning

    with pytest.warns(UnreadKeysWarning, match=r"row key 'chosen' in 3 row\(s\) .*: a side of a preference pair; "
                      r"load the file with the 'preference' config"):
        load(LAYOUTS / "llama_factory_dpo.json")


def test_a_misspelt_conversation_key_gets_a_did_you_mean(tmp_path: Path, load: Any) -> None:
    with pytest.raises(ExportFormatError, match=r"the row has 'mesages'\. Did you mean 'messages' for 'mesages'\?"):
        load(write_jsonl(tmp_path / "rows.jsonl", [{"mesages": [{"role": "user", "content": "x"}]}]))


def test_a_pair_row_with_no_conversation_names_the_commands_flag(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    from whileai_datasets import cli

    source = write_jsonl(tmp_path / "pairs.jsonl", [{"chosen": "a", "rejected": "b"}])
    assert cli.main(["export", str(source), str(tmp_path / "out.jsonl")]) == 1
    assert "The row is a preference pair ('chosen', 'rejected'): pass the file as pairs with --preference" in \
        capsys.readouterr().err


# ---------------------------------------------------------------- tool-call arguments


def _arguments_row(**keys: Any) -> dict[str, Any]:
    call = {"id": "c1", "type": "function", "function": {"name": "pick", "arguments": '{"a": "x", "b": "y"}'}}
    return {"messages": [{"role": "user", "content": "pick"}, {"role": "assistant", "content": "", "tool_calls": [call]},
                         {"role": "tool", "tool_call_id": "c1", "content": "ok"}], **keys}


def test_another_tools_argument_text_keeps_its_bytes(tmp_path: Path, load: Any) -> None:
    row = _arguments_row()
    loaded = template_rows(load(write_jsonl(tmp_path / "rows.jsonl", [row])))[0]
    given = row["messages"][1]["tool_calls"][0]["function"]["arguments"]
    assert loaded["messages"][1]["tool_calls"][0]["function"]["arguments"] == given


def test_whileai_rows_keep_whileais_argument_encoding(tmp_path: Path) -> None:
    import whileai_datasets
    from whileai.simulations import export_dataset as theirs

    rows = [_arguments_row(scenario_id="s1", reward=1.0)]
    theirs(rows, str(tmp_path / "theirs.jsonl"), validate=False)
    whileai_datasets.export_dataset(rows, str(tmp_path / "ours.jsonl"), validate=False)
    ours, their = read_jsonl(tmp_path / "ours.jsonl"), read_jsonl(tmp_path / "theirs.jsonl")
    assert ours == their
    assert their[0]["messages"][1]["tool_calls"][0]["function"]["arguments"] == '{"a": "x","b": "y"}'


# ---------------------------------------------------------------- whileai's own columns


def test_another_tools_file_gets_none_of_whileais_own_columns(load: Any) -> None:
    from whileai_datasets import EXPORT_FEATURES, PREFERENCE_FEATURES

    rows = load(LAYOUTS / "llama_factory_mllm.json")
    assert rows.column_names == ["messages", "loss_mask", "tools", "prompt"]
    assert len(EXPORT_FEATURES) > 30  # what a whileai export keeps
    again = load(LAYOUTS / "llama_factory_mllm.json")  # from the cache: the same columns
    assert again.column_names == rows.column_names
    pairs = load(LAYOUTS / "llama_factory_dpo.json", "preference")
    assert pairs.column_names == ["prompt", "chosen", "rejected", "tools"]
    assert len(PREFERENCE_FEATURES) > len(pairs.column_names)


def test_a_split_with_any_whileai_row_keeps_every_column(tmp_path: Path, load: Any) -> None:
    from whileai_datasets import EXPORT_FEATURES

    mixed = _raw("llama_factory_mllm.json") + [{**_raw("one_object.json")[0]}]
    rows = load(write_jsonl(tmp_path / "mixed.jsonl", mixed))
    assert rows.column_names == list(EXPORT_FEATURES)
    assert rows["reward"] == [None, None, 1.0]
