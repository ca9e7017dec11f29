"""tokenize's masks equal the trained-span rule on every TRL template family, on multi-turn tool rows.

A one-character-per-token tokenizer makes token masks character masks, so each row's mask is compared
with the rule (``span_rule.py``, computed from transformers' own renders of the original template) on
every character, in both mask modes. A row the template itself cannot render is refused naming the
template's own complaint; a row whose turn output the template does not render (tool calls, content
beside a call) is refused, never trained as an end marker alone.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.chat_template.conftest import trl_names
from tests.chat_template.mask_oracle import loss_mask
from tests.chat_template.span_rule import pieces, render, rule_problems
from whileai_datasets.chat_template.masks.tool_ids import rewrite_ids
from whileai_datasets.errors import TemplateError
from whileai_datasets.tokenize.token_masks import tokenize

#: the models' stop tokens beyond the tokenizer's eos token: GLM-4.5/4.6's generation config lists
#: <|endoftext|>, <|user|> and <|observation|>; Gemma 4 stops on <eos> (here </s>), <turn|> and
#: <|tool_response>, which its templates write right after a turn's calls (llama.cpp's end-of-generation
#: tokens for gemma4, in src/llama-vocab.cpp of the llama-cpp-python 0.3.36 sdist, are these three)
_GEMMA4_STOPS = ("<turn|>", "<|tool_response>")
STOPS = {"glm4moe": ("<|endoftext|>", "<|user|>", "<|observation|>"), "diffusion_gemma": _GEMMA4_STOPS,
         **{stem: _GEMMA4_STOPS for stem in trl_names("original") if stem.startswith("gemma4")}}
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]


def _call(call_id: str, city: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function",
            "function": {"name": "get_weather", "arguments": json.dumps({"city": city})}}


def _tool(call_id: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "content": text, "tool_call_id": call_id, "name": "get_weather"}


ROWS = {
    "one_call": [
        {"role": "user", "content": "Userask heron?"},
        {"role": "assistant", "content": "", "tool_calls": [_call("call_1", "Zanzibarcity")]},
        _tool("call_1", "Toolresult bison."),
        {"role": "assistant", "content": "Reply mongoose."}],
    "parallel_beside_reasoning": [
        {"role": "system", "content": "Sysprompt quokka."},
        {"role": "user", "content": "Userask walrus?"},
        {"role": "assistant", "content": "Saybeside lynx.", "reasoning_content": "Ponder marmot.",
         "tool_calls": [_call("call_a", "Oslocity"), _call("call_b", "Limacity")]},
        _tool("call_a", "Toolresult one."), _tool("call_b", "Toolresult two."),
        {"role": "assistant", "content": "Reply narwhal.", "reasoning_content": "Ponder okapi."},
        {"role": "user", "content": "Userask ibex?"},
        {"role": "assistant", "content": "", "tool_calls": [_call("call_c", "Quitocity")]},
        _tool("call_c", "Toolresult three."),
        {"role": "assistant", "content": "Reply pangolin."}],
    "beside_then_think": [
        {"role": "user", "content": "Userask tapir?"},
        {"role": "assistant", "content": "Saybeside gecko.", "tool_calls": [_call("call_9", "Hanoicity")]},
        _tool("call_9", "Toolresult four."),
        {"role": "assistant", "content": "Reply jackal.", "reasoning_content": "Ponder lemur."},
        {"role": "user", "content": "Userask yak?"},
        {"role": "assistant", "content": "Reply dingo."}],
}


def _supervised(tokenizer: Any, text: str, mask: list[int]) -> set[int]:
    offsets = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    assert len(offsets) == len(mask)
    return {i for (a, e), flag in zip(offsets, mask) if flag for i in range(a, e)}


def _dropped(text: str, messages: list[dict[str, Any]], flags: list[int]) -> list[str]:
    """The pieces of loss-carrying turns that the original template's rendering lacks."""
    return [p for m, f in zip(messages, flags) if f and m["role"] == "assistant" for p in pieces(m)
            if " ".join(p.split()) not in " ".join(text.split())]


def _char_tokenizer(chat_template: str) -> Any:
    """One token per character, line breaks included (so offsets are characters)."""
    tokenizers = pytest.importorskip("tokenizers")
    transformers = pytest.importorskip("transformers")
    backend = tokenizers.Tokenizer(tokenizers.models.WordLevel({"[UNK]": 0, "<s>": 1, "</s>": 2}, unk_token="[UNK]"))
    backend.pre_tokenizer = tokenizers.pre_tokenizers.Split(tokenizers.Regex(r"[\s\S]"), behavior="isolated")
    tokenizer = transformers.PreTrainedTokenizerFast(
        tokenizer_object=backend, bos_token="<s>", eos_token="</s>", unk_token="[UNK]")
    tokenizer.chat_template = chat_template
    return tokenizer


MISTRAL = Path(__file__).parent / "templates" / "mistral_common"


@pytest.mark.parametrize("stem", trl_names("original"))
def test_masks_follow_the_trained_span_rule(stem: str, trl_dir: Path) -> None:
    right = _check_rows((trl_dir / f"{stem}.jinja").read_text(encoding="utf-8"), ("</s>", *STOPS.get(stem, ())))
    assert right or stem in REFUSED_EVERYWHERE, f"{stem}: no row masked"


@pytest.mark.parametrize("path", sorted(MISTRAL.glob("*.jinja")), ids=lambda p: p.stem)
def test_mistral_templates_follow_the_rule_through_their_copied_messages(path: Path) -> None:
    """mistral-common's templates rebuild the message list and move the tool definitions before the last
    user message; v3 and later need 9-character tool-call ids, which tokenize rewrites (losslessly)."""
    right = _check_rows(path.read_text(encoding="utf-8"), ("</s>",))
    assert right >= 2, f"{path.stem}: {right} rows masked"  # v2/v3 refuse content beside calls, by name


def _check_rows(template: str, stops: tuple[str, ...]) -> int:
    """Every row in both modes: refused by name, or masked by the rule; how many were masked."""
    tokenizer = _char_tokenizer(template)
    transform = tokenize(tokenizer, stop_tokens=stops)
    right = 0
    for name, given in ROWS.items():
        messages = rewrite_ids(given, transform.plan.tool_call_ids)  # what the template renders
        text = render(tokenizer, template, messages, TOOLS, False)
        for mode in ("assistant", "final"):
            flags = loss_mask(messages, mode)
            if text is None:  # the template itself refuses the row: so does tokenize, with its reason
                with pytest.raises(TemplateError, match=r"row 0: .*(template failed to render|reads an item)"):
                    transform.rows([given], [TOOLS], [flags], [0])
                continue
            if _dropped(text, messages, flags):
                with pytest.raises(TemplateError, match=r"row 0, messages\[\d+\] \(assistant\): the template does "
                                                        r"not render its (tool call|content)"):
                    transform.rows([given], [TOOLS], [flags], [0])
                continue
            row = transform.rows([given], [TOOLS], [flags], [0])[0]
            assert row is not None
            assert list(row.input_ids) == tokenizer(text, add_special_tokens=False)["input_ids"], (name, mode)
            problems, _ = rule_problems(tokenizer, template, messages, flags, TOOLS, text,
                                        _supervised(tokenizer, text, row.assistant_masks), stops)
            assert not problems, (name, mode, problems)
            right += 1
    return right


#: families that render none of the rows above: they need alternating roles, no system message, or
#: content as a list of parts (each row refused above, naming the template's own reason)
REFUSED_EVERYWHERE = {"cohere", "cohere2", "gemma", "gemma3", "idefics3", "llava_next", "smolvlm"}


@pytest.mark.parametrize("stem", [s for s in trl_names("original") if "gemma4" in s or s == "diffusion_gemma"])
def test_gemma4_trains_the_stop_token_after_calls_inside_a_turn(stem: str, trl_dir: Path) -> None:
    """A Gemma 4 turn with text beside its calls renders calls, tool results, then the text: the model
    stopped on <|tool_response>, so it is trained there too, and the results it did not write are not.
    (gemma4_v2 writes the results as a tool turn after the whole model turn: its end marker ends it.)"""
    tokenizer = _char_tokenizer((trl_dir / f"{stem}.jinja").read_text(encoding="utf-8"))
    messages = ROWS["beside_then_think"]
    flags = loss_mask(messages, "assistant")
    text, spans = tokenize(tokenizer, stop_tokens=_GEMMA4_STOPS).row_spans(messages, TOOLS, flags)
    supervised = {i for a, e in spans for i in range(a, e)}
    said = text.index("Saybeside gecko.")
    assert set(range(said, said + len("Saybeside gecko."))) <= supervised
    result = text.index("Toolresult four.")
    call_end = text.index("<tool_call|>") + len("<tool_call|>")
    if result < said:
        assert text.startswith("<|tool_response>", call_end), text[call_end - 40:result]
        assert set(range(call_end, call_end + len("<|tool_response>"))) <= supervised
        assert not supervised & set(range(call_end + len("<|tool_response>"), result + len("Toolresult four.")))
    else:
        end = text.index("<turn|>", said)
        assert set(range(call_end, end + len("<turn|>"))) <= supervised
        assert result not in supervised
