"""The template families whose masks a review found wrong or silent, each on its real template.

TRL 1.16's own copies where it ships one; otherwise the family's public template (``templates/families``,
see its README). Masks are compared with the trained-span rule (``span_rule.py``) through a one-character-
per-token tokenizer, and a turn's output is known rendered or not by rendering the row with transformers
with that turn's pieces swapped for unique stand-ins (no code of ours decides it).
"""

from __future__ import annotations

import copy
import json
import re
import warnings
from pathlib import Path
from typing import Any

import pytest

from tests.chat_template.conftest import trl_names
from tests.chat_template.mask_oracle import loss_mask
from tests.chat_template.span_rule import render, rule_problems
from tests.chat_template.test_span_rule import ROWS, TOOLS, _call, _char_tokenizer, _supervised, _tool
from whileai_datasets.chat_template.masks.tool_ids import rewrite_ids
from whileai_datasets.errors import TemplateError
from whileai_datasets.tokenize.token_masks import BadMaskRowsWarning, PartialRenderWarning, tokenize

FAMILIES = Path(__file__).parent / "templates" / "families"
#: GLM-4.5's generation_config.json lists these eos ids (151329, 151336, 151338)
GLM_STOPS = ("<|endoftext|>", "<|user|>", "<|observation|>")
GLM_SPECIALS = ["[gMASK]", "<sop>", "<|system|>", "<|user|>", "<|assistant|>", "<|observation|>", "<|endoftext|>"]


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def _assistant(text: str, *calls: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": text, **({"tool_calls": list(calls)} if calls else {}), **more}


CALL_THEN_USER = [_user("Userask heron?"), _assistant("", _call("call_1", "Oslocity")),
                  _tool("call_1", "Toolresult one."), _assistant("Reply narwhal."), _user("Userask ibex?"), _assistant("", _call("call_2", "Limacity")),
                  _tool("call_2", "Toolresult two."), _assistant("Reply pangolin.")]
#: the call's argument is in the user's question and its name in the tool list: found "somewhere" either way
ARGS_IN_USER = [_user("Userask weather in Zanzibarcity?"), _assistant("", _call("call_1", "Zanzibarcity")),
                _tool("call_1", "Toolresult bison."), _assistant("Reply mongoose.")]


def _trl(stem: str, trl_dir: Path) -> str:
    return (trl_dir / f"{stem}.jinja").read_text(encoding="utf-8")


def _missing_output(tokenizer: Any, template: str, messages: list[dict[str, Any]], k: int) -> list[str]:
    """What of assistant turn k transformers' render of the original template lacks: the turn's content
    and each call's name and argument, swapped for stand-ins no other text holds."""
    swapped = copy.deepcopy(messages)
    turn = swapped[k]
    wanted = []
    if (turn.get("content") or "").strip():
        turn["content"] = "Standincontent"
        wanted.append("Standincontent")
    for n, call in enumerate(turn.get("tool_calls") or []):
        call["function"]["name"] = f"standin_fn{n}"
        call["function"]["arguments"] = json.dumps({"city": f"Standinarg{n}"})
        wanted += [f"standin_fn{n}", f"Standinarg{n}"]
    text = render(tokenizer, template, swapped, TOOLS, False)
    assert text is not None
    return [piece for piece in wanted if piece not in text]


def _spans_text(text: str, spans: list[tuple[int, int]]) -> list[str]:
    return [text[a:e] for a, e in spans]


# ---- GLM-4.x: no end marker; the model stops on the next opener ----------------------------------------


def _glm_tokenizer(template: str) -> Any:
    """One token per character, GLM's openers added as special tokens, and no generation config beside it
    (a tokenizer loaded on its own: ``from_pretrained`` does not fetch generation_config.json)."""
    tokenizer = _char_tokenizer(template)
    tokenizer.add_special_tokens({"additional_special_tokens": GLM_SPECIALS})
    tokenizer.eos_token = "<|endoftext|>"
    return tokenizer


@pytest.mark.parametrize("mode", ["assistant", "final"])
def test_glm_trains_the_opener_it_stops_on_without_a_generation_config(mode: str, trl_dir: Path) -> None:
    template = _trl("glm4moe", trl_dir)
    tokenizer = _glm_tokenizer(template)
    transform = tokenize(tokenizer)  # stop tokens as the tokenizer's files say: eos only, no config
    assert set(transform.plan.stop_tokens) == set(GLM_STOPS)
    for name in ("one_call", "parallel_beside_reasoning"):
        messages, flags = ROWS[name], loss_mask(ROWS[name], mode)
        row = transform.rows([messages], [TOOLS], [flags], [0])[0]
        text = render(tokenizer, template, messages, TOOLS, False)
        assert row is not None and text is not None
        supervised = _supervised(tokenizer, text, row.assistant_masks)
        problems, exact = rule_problems(tokenizer, template, messages, flags, TOOLS, text, supervised, GLM_STOPS)
        assert not problems and exact, (name, problems)
        if mode == "assistant":  # every call turn ends on <|observation|>, trained
            ends = [m.end() for m in re.finditer(re.escape("</tool_call><|observation|>"), text)]
            assert ends and all(set(range(e - len("<|observation|>"), e)) <= supervised for e in ends)


def test_a_template_with_an_end_marker_gets_no_opener_as_stop(trl_dir: Path) -> None:
    tokenizer = _char_tokenizer(_trl("qwen2_5", trl_dir))
    tokenizer.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})
    assert tokenize(tokenizer).plan.stop_tokens == ("</s>",)


# ---- Nemotron 3: </think> before a call, before and after the last user turn alike ------------------


@pytest.mark.parametrize("stem", [s for s in trl_names("original") if s.startswith("nemotron_3")])
def test_nemotron_3_trains_think_close_before_every_call(stem: str, trl_dir: Path) -> None:
    template = _trl(stem, trl_dir)
    tokenizer = _char_tokenizer(template)
    flags = loss_mask(CALL_THEN_USER, "assistant")
    text, spans = tokenize(tokenizer, stop_tokens=("</s>",)).row_spans(CALL_THEN_USER, TOOLS, flags)
    supervised = {i for a, e in spans for i in range(a, e)}
    problems, exact = rule_problems(tokenizer, template, CALL_THEN_USER, flags, TOOLS, text, supervised, ("</s>",))
    assert not problems and exact == 4, problems
    closes = [m.start() for m in re.finditer(re.escape("</think>\n<tool_call>"), text)]
    assert len(closes) == 2  # the call turn before the second user message, and the one after it
    assert all(set(range(at, at + len("</think>\n"))) <= supervised for at in closes)


# ---- partial renders: refused where the turn trains, named where it does not -------------------------

BESIDE = [_user("Userask tapir?"), _assistant("Saybeside gecko.", _call("call_9", "Hanoicity")),
          _tool("call_9", "Toolresult four."), _assistant("Reply jackal."), _user("Userask yak?"),
          _assistant("Reply dingo.")]
PARALLEL = [_user("Userask walrus?"), _assistant("", _call("call_a", "Oslocity"), _call("call_b", "Limacity")),
            _tool("call_a", "Toolresult one."), _tool("call_b", "Toolresult two."), _assistant("Reply narwhal.")]
PLAIN = [_user("Userask okapi?"), _assistant("Reply axolotl.")]


def _batch(rows: list[list[dict[str, Any]]], mode: str) -> dict[str, Any]:
    return {"messages": rows, "tools": [TOOLS] * len(rows), "loss_mask": [loss_mask(r, mode) for r in rows]}


@pytest.mark.parametrize(("stem", "row"), [("gptoss", BESIDE), ("muse_glimmer", BESIDE), ("llama3_1", BESIDE),
                                           ("llama3_2", BESIDE), ("lfm2", ARGS_IN_USER)])
def test_a_partly_rendered_turn_is_refused_when_trained_and_named_when_not(stem: str, row: list[dict[str, Any]],
                                                                          trl_dir: Path) -> None:
    template = _trl(stem, trl_dir)
    tokenizer = _char_tokenizer(template)
    assert _missing_output(tokenizer, template, row, 1)  # the template loses part of turn 1
    transform = tokenize(tokenizer, stop_tokens=("</s>",))
    with pytest.raises(TemplateError, match=r"row 1, messages\[1\] \(assistant\): the template does not render"):
        transform(_batch([PLAIN, row], "assistant"), indices=[0, 1])
    with pytest.warns(PartialRenderWarning, match=r"1 of 3 rows .* 1 history-partly-rendered \(row 11; first: row 11, "
                                                  r"messages\[1\] \(assistant, no loss\)"):
        out = transform(_batch([PLAIN, row, PLAIN], "final"), indices=[10, 11, 12])
    assert len(out["input_ids"]) == 3  # named, and trained: the model is shown the history the template writes
    assert [f.row for f in transform.notices.items] == [11]


def test_partial_rows_are_named_beside_rows_refused_for_another_cause(trl_dir: Path) -> None:
    """Llama 3.1 takes one call per turn: a batch with such a row and a partly rendered one names each."""
    tokenizer = _char_tokenizer(_trl("llama3_1", trl_dir))
    transform = tokenize(tokenizer, stop_tokens=("</s>",), on_bad_row="skip")
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        out = transform(_batch([PARALLEL, BESIDE, PLAIN], "final"), indices=[0, 1, 2])
    kinds = {type(w.message): str(w.message) for w in said}
    assert set(kinds) == {BadMaskRowsWarning, PartialRenderWarning}
    assert "1 single-tool-call-only (first: row 0" in kinds[BadMaskRowsWarning]
    assert "history-partly-rendered (row 1;" in kinds[PartialRenderWarning]
    assert "row 0" not in kinds[PartialRenderWarning]
    assert len(out["input_ids"]) == 2


def test_every_trl_template_names_or_refuses_rows_it_renders_partly(trl_dir: Path) -> None:
    """No row is tokenized in silence whose render lacks a call or the text beside it, in either mode."""
    silent, partial = [], 0
    for stem in trl_names("original"):
        template = _trl(stem, trl_dir)
        tokenizer = _char_tokenizer(template)
        rows = {name: given for name, given in {"beside": BESIDE, "args_in_user": ARGS_IN_USER}.items()
                if render(tokenizer, template, given, TOOLS, False) is not None
                and _missing_output(tokenizer, template, given, 1)}
        transform = tokenize(tokenizer, stop_tokens=("</s>",)) if rows else None
        for name, given in rows.items():
            partial += 1
            for mode in ("assistant", "final"):
                try:
                    transform.rows([given], [TOOLS], [loss_mask(given, mode)], [0])  # type: ignore[union-attr]
                except TemplateError:
                    continue
                if not transform.notices.items:  # type: ignore[union-attr]
                    silent.append((stem, name, mode))
    assert partial >= 10  # the rows do reach partial renders (Llama 3.0/3.1, Phi-3, gpt-oss, LFM2 v1, ...)
    assert not silent


# ---- Gemma 4 v5: the text beside a call runs into the next turn -------------------------------------


def test_gemma4_v5_names_a_turn_it_runs_into_the_next(trl_dir: Path) -> None:
    flags = loss_mask(BESIDE, "assistant")
    v5 = _trl("gemma4_v5", trl_dir)
    tokenizer = _char_tokenizer(v5)
    text = render(tokenizer, v5, BESIDE, TOOLS, False)
    assert text is not None and "Saybeside gecko.Reply jackal." in text  # the template's own render
    transform = tokenize(tokenizer, stop_tokens=("</s>", "<turn|>", "<|tool_response>"))
    with pytest.warns(PartialRenderWarning, match=r"1 turn-runs-on \(row 4; first: row 4, messages\[1\]"):
        transform({"messages": [BESIDE], "tools": [TOOLS], "loss_mask": [flags]}, indices=[4])
    v4 = _trl("gemma4_v4", trl_dir)
    assert "Saybeside gecko.<turn|>" in (render(_char_tokenizer(v4), v4, BESIDE, TOOLS, False) or "")
    tokenize(_char_tokenizer(v4), stop_tokens=("</s>", "<turn|>", "<|tool_response>"))(
        {"messages": [BESIDE], "tools": [TOOLS], "loss_mask": [flags]})  # an end of its own: no warning


# ---- templates that render no call: the drop check looks inside the turn ----------------------------


@pytest.mark.parametrize("path", [FAMILIES / "axolotl_granite3.jinja"], ids=lambda p: p.stem)
def test_a_call_mentioned_elsewhere_is_not_taken_as_rendered(path: Path) -> None:
    template = path.read_text(encoding="utf-8")
    tokenizer = _char_tokenizer(template)
    assert _missing_output(tokenizer, template, ARGS_IN_USER, 1) == ["standin_fn0", "Standinarg0"]
    transform = tokenize(tokenizer, stop_tokens=("</s>",))
    with pytest.raises(TemplateError, match=r"messages\[1\] \(assistant\): the template does not render its tool "
                                            r"call 'get_weather\(Zanzibarcity\)'"):
        transform.rows([ARGS_IN_USER], [TOOLS], [loss_mask(ARGS_IN_USER, "assistant")], [0])
    transform.rows([ARGS_IN_USER], [TOOLS], [loss_mask(ARGS_IN_USER, "final")], [0])
    assert [f.cause for f in transform.notices.items] == ["history_partly_rendered"]


# ---- Mistral tool templates that slice their own JSON -----------------------------------------------


@pytest.mark.parametrize("path", sorted(FAMILIES.glob("vllm_tool_chat_template_mistral*.jinja")), ids=lambda p: p.stem)
def test_mistral_tool_templates_train_each_turn_from_inst_to_eos(path: Path) -> None:
    """In these templates the model writes everything from the end of a ``[/INST]`` or ``[/TOOL_RESULTS]``
    to the ``</s>`` that ends its turn (the call written as ``function|tojson`` with its last brace cut,
    then the id): that, and nothing else, trains."""
    template = path.read_text(encoding="utf-8")
    tokenizer = _char_tokenizer(template)
    transform = tokenize(tokenizer, stop_tokens=("</s>",))
    for name, given in {"one_call": ROWS["one_call"], "call_then_user": CALL_THEN_USER,
                        "args_in_user": ARGS_IN_USER}.items():
        messages = rewrite_ids(given, transform.plan.tool_call_ids)
        text = render(tokenizer, template, messages, TOOLS, False)
        assert text is not None
        row = transform.rows([given], [TOOLS], [loss_mask(given, "assistant")], [0])[0]
        assert row is not None
        truth = {i for m in re.finditer(r"(?:\[/INST\]|\[/TOOL_RESULTS\])(.*?</s>)", text)
                 for i in range(m.start(1), m.end(1))}
        assert _supervised(tokenizer, text, row.assistant_masks) == truth, name
        assert text.count("[TOOL_CALLS]") == sum(bool(m.get("tool_calls")) for m in given)


# ---- what TRL's SFTTrainer trains from these masks --------------------------------------------------


@pytest.mark.slow  # trl and torch on import: as tests/tokenizing/test_trl_end_to_end.py
@pytest.mark.filterwarnings("ignore:`gradient_checkpointing` is deprecated:FutureWarning")
@pytest.mark.parametrize(("stem", "specials", "eos"), [
    ("glm4moe", GLM_SPECIALS, "<|endoftext|>"),
    ("nemotron_3_nano", ["<|im_start|>", "<|im_end|>", "<think>", "</think>", "<tool_call>", "</tool_call>",
                         "<|endoftext|>"], "<|im_end|>"),
])
def test_sft_trainer_labels_the_tokens_the_family_trains(stem: str, specials: list[str], eos: str, trl_dir: Path,
                                                          tmp_path: Path) -> None:
    """A BPE tokenizer trained here (the family's special tokens, no generation config), TRL's SFTTrainer
    with default settings on the tokenized rows: its labels are our masks, the stop token and the
    ``</think>`` before each call included."""
    datasets = pytest.importorskip("datasets")
    trl = pytest.importorskip("trl")
    from tests.support.tiny_lm import tiny_causal_lm, train_tokenizer

    template = _trl(stem, trl_dir)
    rows = [ROWS["one_call"], ROWS["parallel_beside_reasoning"], CALL_THEN_USER]
    texts = [render(_char_tokenizer(template), template, r, TOOLS, False) or "" for r in rows]
    tokenizer = train_tokenizer(texts * 4, chat_template=template, special_tokens=specials, eos_token=eos,
                                pad_token="<|endoftext|>", additional=[t for t in specials if t != eos])
    tokenized = tokenize(tokenizer)(_batch(rows, "assistant"))
    dataset = datasets.Dataset.from_dict({k: tokenized[k] for k in ("input_ids", "attention_mask", "assistant_masks")})
    args = trl.SFTConfig(output_dir=str(tmp_path), report_to=[], use_cpu=True, max_length=None,
                         per_device_train_batch_size=4, dataloader_drop_last=False, save_strategy="no")
    trainer = trl.SFTTrainer(model=tiny_causal_lm(len(tokenizer)), args=args, train_dataset=dataset,
                             processing_class=tokenizer)
    labelled = [[int(t) for t, label in zip(batch["input_ids"].flatten(), batch["labels"].flatten()) if label != -100]
                for batch in trainer.get_train_dataloader()]
    ours = [int(t) for ids, mask in zip(tokenized["input_ids"], tokenized["assistant_masks"])
            for t, m in zip(ids, mask) if m]
    assert sorted(t for batch in labelled for t in batch) == sorted(ours)
    stop = "<|observation|>" if stem == "glm4moe" else "</think>"
    calls = sum(len(m.get("tool_calls") or []) and 1 for r in rows for m in r if m["role"] == "assistant")
    assert ours.count(tokenizer.convert_tokens_to_ids(stop)) >= calls


def test_the_audit_counts_the_rows_tokenize_names(tmp_path: Path, trl_dir: Path) -> None:
    """gpt-oss drops the text beside a call from the history: with mask_mode='final' the rows train and
    the audit counts them under history-partly-rendered, as tokenize names them."""
    from tests.conftest import write_jsonl
    from whileai_datasets import audit

    tokenizer = _char_tokenizer(_trl("gptoss", trl_dir))
    rows = [{"messages": BESIDE, "tools": TOOLS}, {"messages": PLAIN}, {"messages": BESIDE, "tools": TOOLS}]
    found = audit(str(write_jsonl(tmp_path / "rows.jsonl", rows)), tokenizer=tokenizer, mask_mode="final")
    assert found.count("history_partly_rendered") == 2
    assert found.count("bad_rows") == 0
    line = next(x for x in found.format().splitlines() if "history-partly-rendered" in x)
    assert line.split() == ["history-partly-rendered", "2", "rows", "(66.7%)"]
