"""Token-level masks: one render, one tokenization, spans mapped to tokens."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import SYSTEM_PROMPT, TOOLS, read_jsonl, write_jsonl
from tests.support.prefix_diff import prefix_diff_mask
from tests.support.tiny_lm import train_tokenizer, trl_template
from whileai_datasets import ChatTemplate, SchemaError
from whileai_datasets.tokenize import mask_report
from whileai_datasets.tokenize.token_masks import UnsupervisedRowsWarning, spans_to_token_mask, tokenize


def test_spans_to_token_mask_marks_tokens_overlapping_a_span() -> None:
    offsets = np.array([[0, 3], [3, 5], [5, 9], [9, 9], [9, 12], [12, 15]])
    assert spans_to_token_mask(offsets, [(4, 9), (12, 13)]).tolist() == [0, 1, 1, 0, 0, 1]


def test_chunk_token_masks_equal_each_rows_own() -> None:
    from whileai_datasets.tokenize.token_masks import chunk_token_masks

    offsets = [np.array([[0, 3], [3, 5], [5, 5], [5, 9]]), np.zeros((0, 2), dtype=np.int64),
               np.array([[0, 2], [2, 4]]), np.array([[0, 1], [1, 6]]), np.array([[0, 4]])]
    spans = [[(3, 6)], [], [], [(0, 1), (5, 6)], [(0, 4)]]
    lengths = [9, 0, 4, 6, 4]  # the rows' text lengths: a span at a row's very end reaches no next row
    masks, supervised = chunk_token_masks(offsets, spans, lengths)
    assert [m.tolist() for m in masks] == [spans_to_token_mask(o, s).tolist() for o, s in zip(offsets, spans)]
    assert [m.tolist() for m in masks] == [[0, 1, 0, 1], [], [0, 0], [1, 1], [1]]
    assert supervised == [2, 0, 0, 2, 1]


def test_spans_to_token_mask_without_spans_is_all_zero() -> None:
    assert spans_to_token_mask(np.array([[0, 2], [2, 4]]), []).tolist() == [0, 0]


def test_tokenize_one_example_at_a_time_is_refused_with_the_fix(load: Any, rows_file: Path, qwen_tokenizer: Any) -> None:
    ds = _canonical(load, rows_file).select(range(3))
    transform = tokenize(qwen_tokenizer)
    for formatted in (ds, ds.with_format("arrow")):
        with pytest.raises(SchemaError, match=r"tokenize changes the number of rows.*Pass batched=True"):
            formatted.map(transform)


def _canonical(load: Any, rows_file: Path, **kwargs: Any) -> Any:
    return load(rows_file, system_prompt=SYSTEM_PROMPT, tools=TOOLS, **kwargs)


def _supervised_text(tokenizer: Any, row: dict[str, Any]) -> list[str]:
    return [tokenizer.decode([i]) for i, m in zip(row["input_ids"], row["assistant_masks"]) if m]


def test_tokenize_equals_the_prefix_diff_method_on_a_prefix_preserving_template(
    load: Any, rows_file: Path, qwen_tokenizer: Any
) -> None:
    ds = _canonical(load, rows_file)
    ours = ds.map(tokenize(qwen_tokenizer), batched=True)
    template = ChatTemplate(trl_template("qwen2_5")).with_generation().text
    from whileai_datasets.tokenize.token_masks import template_messages

    checked = 0
    for source, row in zip(ds, ours):
        messages = template_messages(source["messages"])
        if any(a["role"] == b["role"] == "tool" for a, b in zip(messages, messages[1:])):
            continue  # parallel tool results: qwen2_5 is not prefix-preserving there
        ids, mask = prefix_diff_mask(qwen_tokenizer, template, messages, source["loss_mask"], tools=source["tools"])
        assert row["input_ids"] == ids
        assert row["assistant_masks"] == mask
        checked += 1
    assert checked >= len(ds) - 1


def test_supervised_tokens_are_the_assistant_output_and_end_of_turn(load: Any, rows_file: Path, qwen_tokenizer: Any) -> None:
    ds = _canonical(load, rows_file)
    row = ds.map(tokenize(qwen_tokenizer), batched=True)[0]
    text = "".join(_supervised_text(qwen_tokenizer, row))
    assistant = [m for m in ds[0]["messages"] if m["role"] == "assistant"]
    assert text.count("<|im_end|>") == len(assistant)
    assert "<|im_start|>" not in text
    assert SYSTEM_PROMPT not in text
    assert ds[0]["prompt"] not in text


def test_final_mask_mode_supervises_only_the_last_assistant_turn(load: Any, rows_file: Path, qwen_tokenizer: Any) -> None:
    every = _canonical(load, rows_file).map(tokenize(qwen_tokenizer), batched=True)
    final = _canonical(load, rows_file, mask_mode="final").map(tokenize(qwen_tokenizer), batched=True)
    for a, f in zip(every, final):
        assert a["input_ids"] == f["input_ids"]
        assert sum(f["assistant_masks"]) <= sum(a["assistant_masks"])
        assert "".join(_supervised_text(qwen_tokenizer, f)).count("<|im_end|>") == 1


def test_a_hand_edited_mask_survives_to_the_tokens(load: Any, rows_file: Path, qwen_tokenizer: Any) -> None:
    ds = _canonical(load, rows_file).select(range(1))

    def silence(batch: dict[str, Any]) -> dict[str, Any]:
        batch["loss_mask"] = [[0] * len(mask) for mask in batch["loss_mask"]]
        return batch

    with pytest.warns(UnsupervisedRowsWarning, match=r"dropped 1 of 1 rows in this batch: no token of theirs"):
        out = ds.map(silence, batched=True).map(tokenize(qwen_tokenizer), batched=True)
    assert out.num_rows == 0


def test_arrow_and_python_batches_and_batch_sizes_agree(load: Any, rows_file: Path, qwen_tokenizer: Any) -> None:
    ds = _canonical(load, rows_file)
    transform = tokenize(qwen_tokenizer)
    python = ds.map(transform, batched=True)
    arrow = ds.with_format("arrow").map(transform, batched=True).with_format(None)
    one = ds.map(transform, batched=True, batch_size=1)
    sliced = ds.select(range(1, len(ds))).with_format("arrow").map(transform, batched=True).with_format(None)
    columns = ["input_ids", "attention_mask", "assistant_masks", "num_supervised_tokens"]
    assert python.select_columns(columns).to_list() == arrow.select_columns(columns).to_list()
    assert python.select_columns(columns).to_list() == one.select_columns(columns).to_list()
    assert python.select_columns(columns).to_list()[1:] == sliced.select_columns(columns).to_list()


def test_truncation_is_reported_and_rows_left_unsupervised_are_dropped(load: Any, rows_file: Path, qwen_tokenizer: Any) -> None:
    ds = _canonical(load, rows_file)
    full = ds.map(tokenize(qwen_tokenizer), batched=True)
    # a limit that cuts some rows before their first supervised token and others after it
    firsts = sorted(row["assistant_masks"].index(1) for row in full)
    limit = firsts[len(firsts) // 2] + 1
    assert firsts[0] < limit <= firsts[-1]
    with pytest.warns(UnsupervisedRowsWarning, match=r"dropped \d+ of \d+ rows"):
        cut = ds.map(tokenize(qwen_tokenizer, max_length=limit), batched=True)
    report = mask_report(cut, len(ds))
    kept_full = [row for row in full if sum(row["assistant_masks"][:limit]) > 0]
    assert cut.num_rows == len(kept_full)
    assert report["rows_dropped_unsupervised"] == len(ds) - len(kept_full)
    assert all(len(row["input_ids"]) <= limit for row in cut)
    for short, long in zip(cut, kept_full):
        assert short["tokens_truncated"] == len(long["input_ids"]) - len(short["input_ids"])
        assert short["supervised_tokens_truncated"] == sum(long["assistant_masks"][limit:])


def test_mask_report_compares_with_the_naive_route(load: Any, rows_file: Path, qwen_tokenizer: Any) -> None:
    out = _canonical(load, rows_file).map(tokenize(qwen_tokenizer), batched=True)
    report = mask_report(out)
    assert report["tokens"] == sum(len(r["input_ids"]) for r in out)
    assert report["supervised_tokens"] == sum(sum(r["assistant_masks"]) for r in out)
    assert report["naive_over_masked"] == report["tokens"] / report["supervised_tokens"] > 1


def test_a_raw_tokenizers_tokenizer_gives_the_same_masks(load: Any, rows_file: Path, qwen_tokenizer: Any) -> None:
    ds = _canonical(load, rows_file)
    template = ChatTemplate(trl_template("qwen2_5"))
    fast = ds.map(tokenize(qwen_tokenizer), batched=True)
    raw = ds.map(tokenize(qwen_tokenizer.backend_tokenizer, template=template), batched=True)
    assert fast["assistant_masks"] == raw["assistant_masks"]
    assert fast["input_ids"] == raw["input_ids"]


def test_a_tokenizer_without_template_needs_one(qwen_tokenizer: Any) -> None:
    with pytest.raises(SchemaError, match=r"no chat template: the tokenizer \(Tokenizer\) has none and none was given"):
        tokenize(qwen_tokenizer.backend_tokenizer)


def test_rows_of_a_wire_shape_are_refused_with_a_hint(qwen_tokenizer: Any) -> None:
    import pyarrow as pa

    with pytest.raises(SchemaError, match=r"no 'messages' and 'loss_mask' columns .*Tokenize canonical rows"):
        tokenize(qwen_tokenizer)(pa.table({"prompt": ["x"]}))


def test_think_dropping_template_prefix_diff_misaligns_where_one_render_does_not(
    tmp_path: Path, load: Any
) -> None:
    """Qwen3 drops <think> from assistant turns before the last user message,
    so the conversation's rendering is not a prefix of its continuation. The
    prefix-diff method then marks token positions computed on other renderings;
    one render marks exactly the turns as the final text shows them."""
    rows = [{
        "prompt": "first ask",
        "messages": [
            {"role": "user", "content": "first ask"},
            {"role": "assistant", "content": "<think>\nplan A\n</think>\n\nanswer A"},
            {"role": "user", "content": "second ask"},
            {"role": "assistant", "content": "<think>\nplan B\n</think>\n\nanswer B"},
        ],
    }]
    path = write_jsonl(tmp_path / "think.jsonl", rows)
    ds = load(path)
    texts = [m["content"] for m in rows[0]["messages"]] * 20
    tokenizer = train_tokenizer(texts, chat_template=trl_template("qwen3"))
    ours = ds.map(tokenize(tokenizer), batched=True)[0]
    supervised = "".join(_supervised_text(tokenizer, ours))
    # the final text shows turn 1 without its reasoning, turn 2 with it: that is what is trained
    assert "answer A<|im_end|>" in supervised and "plan A" not in supervised
    assert "plan B" in supervised and "answer B<|im_end|>" in supervised
    template = ChatTemplate(trl_template("qwen3")).with_generation().text
    from whileai_datasets.tokenize.token_masks import template_messages

    ids, mask = prefix_diff_mask(tokenizer, template, template_messages(ds[0]["messages"]), ds[0]["loss_mask"])
    assert ids == ours["input_ids"]
    theirs = "".join(tokenizer.decode([i]) for i, m in zip(ids, mask) if m)
    assert theirs != supervised  # prefix-diff marks positions taken from renderings the final text does not have


def test_show_mask_highlights_the_supervised_text(
    tmp_path: Path, rows_file: Path, qwen_tokenizer: Any, load: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from whileai_datasets import cli

    tokenizer_dir = tmp_path / "tok"
    qwen_tokenizer.save_pretrained(str(tokenizer_dir))
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps(TOOLS))
    page = tmp_path / "row.html"
    args = ["show-mask", str(rows_file), "--tokenizer", str(tokenizer_dir), "--row", "1", "--no-color",
            "--system-prompt", SYSTEM_PROMPT, "--tools", str(tools), "--html", str(page)]
    assert cli.main(args) == 0
    out = capsys.readouterr().out
    row = _canonical(load, rows_file).map(tokenize(qwen_tokenizer), batched=True)[1]
    assert f"{len(row['input_ids'])} tokens, {row['num_supervised_tokens']} supervised" in out
    marked = [chunk.split("]]")[0] for chunk in out.split("[[")[1:]]
    final = [m for m in _canonical(load, rows_file)[1]["messages"] if m["role"] == "assistant"][-1]["content"]
    assert any(final in chunk for chunk in marked)
    assert all(SYSTEM_PROMPT not in chunk for chunk in marked)
    assert '<span class="sup">' in page.read_text() and "&lt;|im_end|&gt;" in page.read_text()


def test_num_proc_gives_the_same_rows_and_the_transform_hashes_the_same_after_use(
    load: Any, rows_file: Path, qwen_tokenizer: Any
) -> None:
    from datasets.fingerprint import Hasher

    ds = _canonical(load, rows_file)
    transform = tokenize(qwen_tokenizer)
    before = Hasher.hash(transform)
    one = ds.map(transform, batched=True, batch_size=4)
    assert Hasher.hash(transform) == before  # the piece cache it filled is not part of its identity
    two = ds.map(transform, batched=True, batch_size=4, num_proc=2)
    columns = ["input_ids", "assistant_masks", "mask_method"]
    assert one.select_columns(columns).to_list() == two.select_columns(columns).to_list()


def test_piece_reuse_gives_the_tokenizers_own_ids_and_offsets(qwen_tokenizer: Any) -> None:
    from whileai_datasets.tokenize.token_encode import REUSED_CHARS, PieceEncoder

    system = "<|im_start|>system\nYou are kind, " + "and careful " * 24 + "always.<|im_end|>\n"
    long_reply = "<|im_start|>assistant\n" + "Sure thing, let me look that up for you. " * 7 + "<|im_end|>"
    texts = [system + "<|im_start|>user\nhi there<|im_end|>\n" + long_reply,
             system + "<|im_start|>user\nbye<|im_end|>\n<|im_end|>" + long_reply + "\n",
             system + long_reply, "plain", "", "<|im_end|>", system]
    backend = qwen_tokenizer.backend_tokenizer
    encoder = PieceEncoder()
    encoder.encode(backend, texts[:1])  # the first batch is checked against whole encodes
    for _ in range(2):  # the second time round every long piece is reused
        for (ids, offsets), text in zip(encoder.encode(backend, texts), texts):
            whole = backend.encode(text, add_special_tokens=False)
            assert ids.tolist() == whole.ids and offsets.tolist() == [list(o) for o in whole.offsets]
    assert encoder._pattern is not None
    assert sorted(encoder._pieces) == sorted({system[12:-11], long_reply[12:-10]})  # the long repeats only
    assert all(len(piece) >= REUSED_CHARS for piece in encoder._pieces)


_BYTE_TEXTS = ["<|im_start|>user\nhi there, how are you?<|im_end|>\n<|im_start|>assistant\nFine.<|im_end|>",
               "<|im_start|>user\ncaf\u00e9 na\u00efve \u2014 \u65e5\u672c\u8a9e \U0001f600<|im_end|>",  # not ASCII
               "   spaces   and\ttabs\n\n\nnewlines  ", "", "<|im_end|><|im_start|>", "x" * 300]


def _whole(backend: Any, text: str) -> tuple[list[int], list[list[int]]]:
    encoding = backend.encode(text, add_special_tokens=False)
    return encoding.ids, [list(o) for o in encoding.offsets]


def test_offsets_from_byte_lengths_are_the_tokenizers_own(qwen_tokenizer: Any) -> None:
    from whileai_datasets.tokenize.token_encode import PieceEncoder, byte_lengths

    backend = qwen_tokenizer.backend_tokenizer
    assert byte_lengths(backend) is not None  # a byte-level BPE: ASCII texts are encoded without offsets
    encoder = PieceEncoder()
    for _ in range(3):  # the first batch checked against whole encodes, then the fast path
        for (ids, offsets), text in zip(encoder.encode(backend, _BYTE_TEXTS), _BYTE_TEXTS):
            assert (ids.tolist(), offsets.tolist()) == _whole(backend, text)
    assert encoder._lengths is not None and encoder._pattern is not None  # the check kept both


def test_pieces_and_lengths_hold_under_a_unicode_normal_form(qwen_tokenizer: Any) -> None:
    from tokenizers import Tokenizer, normalizers

    from whileai_datasets.tokenize.token_encode import PieceEncoder

    backend = Tokenizer.from_str(qwen_tokenizer.backend_tokenizer.to_str())
    backend.normalizer = normalizers.NFC()  # Qwen2.5's and Qwen3's: composes "e" + U+0301 into one character
    system = "<|im_start|>system\nBe brief, " + "cafe\u0301 " * 45 + "ok<|im_end|>\n"
    texts = [system + text for text in _BYTE_TEXTS] + ["<|im_start|>user\nre\u0301sume\u0301<|im_end|>"]
    encoder = PieceEncoder()
    for _ in range(3):
        for (ids, offsets), text in zip(encoder.encode(backend, texts), texts):
            assert (ids.tolist(), offsets.tolist()) == _whole(backend, text)
    assert encoder._pattern is not None and encoder._lengths is not None and encoder._pieces  # both paths ran


@pytest.mark.parametrize("change", ["trimmed offsets", "prefix space", "removed characters"])
def test_offsets_are_read_from_the_encoder_where_lengths_do_not_give_them(qwen_tokenizer: Any, change: str) -> None:
    from tokenizers import Tokenizer, pre_tokenizers, processors

    from whileai_datasets.tokenize.token_encode import PieceEncoder, byte_lengths

    backend = Tokenizer.from_str(qwen_tokenizer.backend_tokenizer.to_str())
    if change == "trimmed offsets":  # GPT-2's: a token's offsets leave out its leading space
        backend.post_processor = processors.ByteLevel(trim_offsets=True)
    elif change == "prefix space":
        backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    else:  # a split that drops what it splits on: the tokens no longer cover the text
        backend.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split("\n", behavior="removed"),
                                                         pre_tokenizers.ByteLevel(add_prefix_space=False)])
    assert byte_lengths(backend) is None
    encoder = PieceEncoder()
    for _ in range(2):
        for (ids, offsets), text in zip(encoder.encode(backend, _BYTE_TEXTS), _BYTE_TEXTS):
            assert (ids.tolist(), offsets.tolist()) == _whole(backend, text)


_LLAMA_TEXTS = ["<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief, " + "and careful " * 24
                + "<|eot_id|>", "<|start_header_id|>user<|end_header_id|>\n\n hi  there\tyou<|eot_id|>",
                "starts with text, " + "then more text " * 18 + "<|eot_id|>",  # a piece at offset 0 (prepend)
                "caf\u00e9 na\u00efve \u65e5\u672c\u8a9e \U0001f600<|eot_id|>",  # not ASCII: byte fallback
                " leading space", "", "<|eot_id|>", "~`|{}\x01\x7f"]  # rare ASCII: byte-fallback tokens


@pytest.mark.parametrize("style", ["metaspace first", "metaspace always", "metaspace never", "gemma normalizer"])
def test_sentencepiece_offsets_from_lengths_are_the_tokenizers_own(rows_file: Path, style: str) -> None:
    from tokenizers import Tokenizer, normalizers

    from tests.support.tiny_lm import LLAMA3_TOKENS, train_sentencepiece_tokenizer
    from whileai_datasets.tokenize.token_encode import PieceEncoder, byte_lengths

    texts = [json.dumps(row) for row in read_jsonl(rows_file)]
    scheme = style.split()[1] if style.startswith("metaspace") else "first"
    backend = train_sentencepiece_tokenizer(texts, chat_template="x", prepend_scheme=scheme,
                                            **LLAMA3_TOKENS).backend_tokenizer
    if style == "gemma normalizer":  # Gemma's: no pre-tokenizer, spaces replaced by the normalizer
        backend = Tokenizer.from_str(backend.to_str())
        backend.pre_tokenizer = None
        backend.normalizer = normalizers.Replace(" ", "\u2581")
    assert byte_lengths(backend) is not None  # ASCII texts are encoded without offsets
    batch = [a + b for a in _LLAMA_TEXTS for b in _LLAMA_TEXTS]
    encoder = PieceEncoder()
    for _ in range(3):  # the first batch checked against whole encodes, then long pieces reused
        for (ids, offsets), text in zip(encoder.encode(backend, batch), batch):
            assert (ids.tolist(), offsets.tolist()) == _whole(backend, text)
    assert encoder._pattern is not None and encoder._lengths is not None and encoder._pieces  # both paths ran
    assert (encoder._shield is not None) == (style == "metaspace first")  # a piece behind an added token


def _arrow_rows(rows: list[dict[str, Any]]) -> Any:
    import pyarrow as pa

    from whileai_datasets.rows.features import MESSAGE_TYPE, message_to_storage, storage_type

    return pa.table({
        "messages": pa.array([[message_to_storage(m) for m in r["messages"]] for r in rows],
                             pa.list_(storage_type(MESSAGE_TYPE))),
        "loss_mask": pa.array([[int(m["role"] == "assistant") for m in r["messages"]] for r in rows],
                              pa.list_(pa.int8())),
        "tools": pa.array([json.dumps(r["tools"]) if r.get("tools") else None for r in rows], pa.string())})


def _marker_rows(content: str = "fine", arguments: str = '{"city": "Paris"}', tool_name: str = "get_weather") -> Any:
    call = {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": arguments}}
    tool = {"type": "function", "function": {"name": tool_name, "parameters": {"type": "object"}}}
    clean = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
             "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]}
    marked = {"messages": [{"role": "user", "content": content},
                           {"role": "assistant", "content": "", "tool_calls": [call]},
                           {"role": "tool", "content": "sunny", "tool_call_id": "c1", "name": "get_weather"},
                           {"role": "assistant", "content": "It is sunny."}], "tools": [tool]}
    return _arrow_rows([clean, clean, marked])


@pytest.mark.parametrize("where", ["content", "arguments", "tools"])
def test_a_span_marker_character_anywhere_in_a_batch_is_refused_naming_the_row(qwen_tokenizer: Any, where: str) -> None:
    from whileai_datasets import TemplateError
    from whileai_datasets.chat_template.rendering.render import marker_free

    batch = {"content": lambda: _marker_rows(content="a\ue000b"),
             "arguments": lambda: _marker_rows(arguments='{"city": "Pa\\ue001ris"}'),  # a JSON escape, decoded later
             "tools": lambda: _marker_rows(tool_name="get\ue000weather")}[where]()
    assert marker_free(batch.column("messages")) is (where == "tools")  # the batch check only reads messages
    with pytest.raises(TemplateError, match=r"row 2: the input contains the private-use character U\+E000 or U\+E001"):
        tokenize(qwen_tokenizer)(batch)


def test_a_clean_batch_is_checked_once_and_tokenized_like_row_by_row(qwen_tokenizer: Any) -> None:
    from whileai_datasets.chat_template.rendering.render import marker_free

    batch = _marker_rows()
    assert marker_free(batch.column("messages"))
    transform = tokenize(qwen_tokenizer)
    whole = transform(batch)
    one_by_one = [transform(batch.slice(i, 1)) for i in range(batch.num_rows)]
    assert whole.column("input_ids").to_pylist() == [r.column("input_ids")[0].as_py() for r in one_by_one]
    assert whole.column("assistant_masks").to_pylist() == [r.column("assistant_masks")[0].as_py() for r in one_by_one]


@pytest.mark.parametrize("kind", ["string", "large_string"])
def test_the_batch_marker_check_reads_only_its_own_slice_and_knows_the_json_escape(kind: str) -> None:
    import pyarrow as pa

    from whileai_datasets.chat_template.rendering.render import marker_free

    values = ["plain", "caf\\u00e9 is JSON for a non-ASCII letter", None, "x\ue000y", '{"a": "\\uE001"}', "end"]
    array = pa.array(values, getattr(pa, kind)())
    verdicts = [marker_free(array.slice(i, 1)) for i in range(len(values))]
    assert verdicts == [True, True, True, False, False, True]
    assert marker_free(array.slice(0, 3)) and marker_free(array.slice(5))  # the marked values lie outside
    assert not marker_free(array.slice(2, 2)) and not marker_free(array)
    nested = pa.array([[{"content": v}] for v in values], pa.list_(pa.struct([("content", getattr(pa, kind)())])))
    assert marker_free(nested.slice(0, 3)) and not marker_free(nested.slice(1, 3))


def test_a_batch_of_many_chunks_keeps_its_rows_in_order_and_names_the_bad_one(qwen_tokenizer: Any) -> None:
    import pyarrow as pa

    from whileai_datasets import TemplateError
    from whileai_datasets.tokenize.token_masks import BadMaskRowsWarning
    from whileai_datasets.tokenize.token_rows import RENDER_CHUNK

    def row(i: int, content: str | None = None) -> dict[str, Any]:
        return {"messages": [{"role": "user", "content": content or f"question {i}"},
                             {"role": "assistant", "content": f"answer {i} " * (i % 7 + 1)}], "tools": None}

    n = 2 * RENDER_CHUNK + 45  # three chunks, the last one short
    batch = _arrow_rows([row(i) for i in range(n)])
    transform = tokenize(qwen_tokenizer)
    whole = transform(batch)
    alone = [transform(batch.slice(i, 1)).column("input_ids")[0].as_py() for i in (0, RENDER_CHUNK, n - 1)]
    assert [whole.column("input_ids")[i].as_py() for i in (0, RENDER_CHUNK, n - 1)] == alone
    bad = RENDER_CHUNK + 7  # in the second chunk
    rows = [row(i) for i in range(n)]
    rows[bad] = row(bad, content="a\ue000b")
    with pytest.raises(TemplateError, match=rf"row {bad}: the input contains the private-use character"):
        transform(_arrow_rows(rows))
    with pytest.warns(BadMaskRowsWarning, match=f"dropped 1 of {n} rows"):
        skipped = tokenize(qwen_tokenizer, on_bad_row="skip")(_arrow_rows(rows))
    assert skipped.num_rows == n - 1
    assert pa.compute.sum(skipped.column("bad_rows_dropped")).as_py() == 1
    kept = whole.column("input_ids").to_pylist()
    assert skipped.column("input_ids").to_pylist() == kept[:bad] + kept[bad + 1:]


def test_show_mask_names_the_row_a_template_cannot_render(
    tmp_path: Path, rows_file: Path, qwen_tokenizer: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from whileai_datasets import cli

    tokenizer_dir = tmp_path / "tok"
    qwen_tokenizer.save_pretrained(str(tokenizer_dir))
    template = tmp_path / "reads_a_late_message.jinja"
    template.write_text("{% for m in messages %}{{ m.role }}: {% generation %}{{ m.content }}{% endgeneration %}\n"
                        "{% endfor %}{{ messages[99]['content'] }}")
    args = ["show-mask", str(rows_file), "--tokenizer", str(tokenizer_dir), "--template", str(template),
            "--row", "1", "--system-prompt", SYSTEM_PROMPT]
    assert cli.main(args) == 1
    err = capsys.readouterr().err
    assert "reads_a_late_message.jinja:2: row 1: the template reads an item this conversation does not have" in err


def test_the_encoders_memory_of_pieces_is_bounded_on_unique_texts(qwen_tokenizer: Any,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Unique rows never repeat a piece: what the encoder keeps of them stays under its caps, and the ids and
    offsets stay the tokenizer's own after the sets start over."""
    from whileai_datasets.tokenize import token_encode

    monkeypatch.setattr(token_encode, "MAX_SEEN", 8)
    monkeypatch.setattr(token_encode, "MAX_PIECES", 2)
    backend = qwen_tokenizer.backend_tokenizer
    encoder = token_encode.PieceEncoder()
    system = "<|im_start|>system\n" + "Be kind and careful. " * 15 + "<|im_end|>\n"
    for batch in range(6):
        texts = [system + f"<|im_start|>user\n{'unique text %d-%d, ' % (batch, i) * 20}<|im_end|>" for i in range(5)]
        for (ids, offsets), text in zip(encoder.encode(backend, texts), texts):
            assert (ids.tolist(), offsets.tolist()) == _whole(backend, text)
        assert len(encoder._seen) <= 8 + len(texts) and len(encoder._pieces) <= 2 + 1
    assert system[len("<|im_start|>"):-len("<|im_end|>\n")] in encoder._pieces  # the repeat is still reused


_KEYS_TEMPLATE = (
    "{%- for message in messages %}<|im_start|>{{ message.role }}\n"
    "{%- if message.role == 'assistant' %}{% generation %}"
    "{%- if message.thinking is defined %}<think>{{ message.thinking }}|{{ message.reasoning_content }}</think>"
    "{% endif %}"
    "{%- if message.content is defined %}{{ message.content }}{% else %}(none){% endif %}"
    "{%- for c in message.tool_calls or [] %} call {{ c.function.name }} {{ c.function.arguments | tojson }}"
    "{% endfor %}<|im_end|>{% endgeneration %}"
    "{%- else %}{% if message.note is defined %}[note {{ message.note }}]{% endif %}{{ message.content }}<|im_end|>"
    "{% endif %}\n{%- endfor %}")


def test_arrow_rows_reach_the_template_as_the_python_path_prepares_them(qwen_tokenizer: Any) -> None:
    """An Arrow batch's messages go to the template without ``prepare_messages`` copying them: null keys
    (a content, an extra key) must still be absent and reasoning still under both names, as for Python rows."""
    from tokenizers import decoders

    from whileai_datasets.rows.features import message_from_storage

    call = {"id": None, "type": "function", "function": {"name": "lookup", "arguments": '{"order": 7, "x": null}'}}
    rows = [{"messages": [{"role": "user", "content": "where is it", "note": None},
                          {"role": "assistant", "content": "checking", "reasoning_content": "look it up first"},
                          {"role": "assistant", "content": None, "tool_calls": [call]},
                          {"role": "tool", "content": "shipped", "note": "from the API"},
                          {"role": "assistant", "content": "It shipped."}]}]
    batch = _arrow_rows(rows)
    transform = tokenize(qwen_tokenizer, template=_KEYS_TEMPLATE)
    arrow = transform(batch)
    python = [[message_from_storage(m) for m in row] for row in batch.column("messages").to_pylist()]
    expected = transform.rows(python, [None], batch.column("loss_mask").to_pylist())
    assert arrow.column("input_ids").to_pylist() == [list(expected[0].input_ids)]
    assert arrow.column("assistant_masks").to_pylist() == [expected[0].assistant_masks]
    backend = qwen_tokenizer.backend_tokenizer
    backend.decoder = backend.decoder or decoders.ByteLevel()
    text = qwen_tokenizer.decode(arrow.column("input_ids")[0].as_py())
    assert "[note" not in text.split("where is it")[0] and "[note from the API]" in text  # a null key is absent
    assert "<think>look it up first|look it up first</think>checking" in text and "(none) call lookup" in text
