"""Hostile templates are refused by the render budget, quickly and in bounded memory; real ones never notice it."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import warnings
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment

from whileai_datasets import RenderBudget, RenderBudgetError, TemplateError
from whileai_datasets.chat_template import ChatTemplate
from whileai_datasets.chat_template.rendering.render import prepare_messages, render_plain, template_context
from whileai_datasets.chat_template.sandbox.environment import GenerationExtension, _tojson, pinned_strftime

ROOT = Path(__file__).resolve().parents[2]
MESSAGES = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
FAST = RenderBudget(max_seconds=2)
CHARS = r"over max_chars=33,554,432 of the render budget; nothing was built\. If the template really needs more, " \
        r"raise it with ChatTemplate\(\.\.\., budget=RenderBudget\(max_chars=\.\.\.\)\) or the environment " \
        r"variable WHILEAI_TEMPLATE_MAX_CHARS"
SECONDS = r"the render computed for more than max_seconds=2 s \(CPU\) of the render budget \([\d,]+ loop passes " \
          r"and calls so far\) and was stopped\. If the template really needs more, raise it with ChatTemplate\(" \
          r"\.\.\., budget=RenderBudget\(max_seconds=\.\.\.\)\) or the environment variable WHILEAI_TEMPLATE_MAX_SECONDS"

HOSTILE = {
    "string_repetition": ("{{ 'a' * 300000000 }}",
                          r"<t>:1: str \* 300,000,000 \(of length 1\) would be 300,000,000 characters, " + CHARS),
    "doubling_concat": ("{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}"
                        "{% endfor %}{{ ns.s }}", r"<t>:1: the ~ concatenation would be 67,108,864 characters, "
                        + CHARS),
    "doubling_plus": ("{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}"
                      "{% endfor %}{{ ns.s }}", r"<t>:1: str \+ str would be 67,108,864 characters, " + CHARS),
    "join": ("{% set s = 'x' * 20000000 %}{{ [s, s]|join }}",
             r"<t>:1: the joined string would be 40,000,000 characters, " + CHARS),
    "str_join": ("{% set s = 'x' * 20000000 %}{{ ''.join([s, s, s]) }}",
                 r"<t>:1: the joined string would be 60,000,000 characters, " + CHARS),
    "printf_width": ("{{ '%0300000000d'|format(1) }}", r"<t>:1: the formatted string would be 300,000,\d+ "
                     r"characters, " + CHARS),
    "percent_width": ("{{ '%0300000000d' % 1 }}", r"<t>:1: the %-formatted string would be 300,000,\d+ "
                      r"characters, " + CHARS),
    "str_format_width": ("{{ '{:>300000000}'.format(1) }}", r"<t>:1: the str.format\(\) result would be "
                         r"300,000,\d+ characters, " + CHARS),
    "center_filter": ("{{ 'a'|center(300000000) }}", r"<t>:1: the centred string would be 300,000,000 characters, "
                      + CHARS),
    "ljust_method": ("{{ 'a'.ljust(300000000) }}", r"<t>:1: str.ljust\(\) would be 300,000,000 characters, "
                     + CHARS),
    "replace_empty": ("{{ ('x' * 1000)|replace('', 'y' * 100000) }}", r"<t>:1: the replaced string would be "
                      r"100,101,000 characters, " + CHARS),
    "shared_list_printed": ("{% set ns = namespace(x=[1]) %}{% for i in range(60) %}{% set ns.x = [ns.x, ns.x] %}"
                            "{% endfor %}{{ ns.x }}", r"<t>:1: printing a list would be more than 33,554,432 "
                            r"characters, " + CHARS),
    "shared_list_tojson": ("{% set a = [1] * 100000 %}{% set b = [a] * 100000 %}{{ b|tojson }}",
                           r"<t>:1: list \* 100,000, printed, would be [\d,]+ characters, " + CHARS),
    "nested_range_loops": ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
                           r"<t>:1: " + SECONDS),
    "nested_range_output": ("{% for i in range(100000) %}{% for j in range(100000) %}{{ j }}{% endfor %}"
                            "{% endfor %}", r"<t>:1: " + SECONDS),
    "branching_macro": ("{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}"
                        "{{ f(60) }}", r"<t>:1: " + SECONDS),
    "recursive_macro": ("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
                        r"<t>:1: the template recursed past Python's recursion limit \([\d,]+ frames; a macro or "
                        r"recursive loop that calls itself without end\)\. Real templates nest a few levels; "
                        r"sys.setrecursionlimit raises the limit if this one is genuine"),
}


def _refused_quickly(action: Any, pattern: str) -> None:
    start = time.monotonic()
    with pytest.raises(RenderBudgetError, match=f"^{pattern}$"):
        action()
    assert time.monotonic() - start < 60  # generous: the budget is 2 s of CPU, the machine may be busy


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_render_refuses_a_hostile_template_by_its_budget(name: str) -> None:
    text, pattern = HOSTILE[name]
    chat = ChatTemplate(text, name="<t>", budget=FAST)
    _refused_quickly(lambda: chat.render(MESSAGES), pattern)


@pytest.mark.parametrize("name", ["string_repetition", "nested_range_loops", "recursive_macro", "shared_list_printed"])
def test_inspect_and_patch_refuse_a_hostile_template_by_its_budget(name: str) -> None:
    text, pattern = HOSTILE[name]
    # probes swallow render failures; the budget's refusal comes out of them all the same
    _refused_quickly(lambda: ChatTemplate(text, name="<t>", budget=FAST).inspect(), pattern)
    _refused_quickly(lambda: ChatTemplate(text, name="<t>", budget=FAST).with_generation(), pattern)


def test_a_budget_error_is_a_template_error_and_survives_pickling() -> None:
    import pickle

    with pytest.raises(TemplateError) as caught:
        ChatTemplate(HOSTILE["string_repetition"][0], name="<t>").render(MESSAGES)
    again = pickle.loads(pickle.dumps(caught.value))
    assert type(again) is RenderBudgetError and str(again) == str(caught.value)


CHATML = ("{% for m in messages %}{% if m.content == 'EXPLODE' %}{{ 'a' * 300000000 }}{% endif %}"
          "{{ '<|im_start|>' + m.role + '\n' + m.content + '<|im_end|>\n' }}{% endfor %}"
          "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    from tests.support.tiny_lm import train_tokenizer

    return train_tokenizer(["hello there, how are you", "fine thanks"] * 20, chat_template=CHATML, vocab_size=300)


def _rows(contents: list[str]) -> Any:
    import datasets

    return datasets.Dataset.from_dict({
        "messages": [[{"role": "user", "content": c}, {"role": "assistant", "content": "fine thanks"}]
                     for c in contents],
        "loss_mask": [[0, 1] for _ in contents],
    })


@pytest.mark.parametrize("num_proc", [None, 2])
def test_a_row_over_the_budget_stops_tokenize_or_is_skipped_by_cause_even_in_worker_processes(
        tokenizer: Any, num_proc: Any) -> None:
    from whileai_datasets.tokenize.notices import BadMaskRowsWarning
    from whileai_datasets.tokenize.token_masks import tokenize

    ds = _rows(["hello"] * 7 + ["EXPLODE"])
    stops = r"^TokenizersBackend:1: row 7: str \* 300,000,000 \(of length 1\) would be 300,000,000 characters, "
    with pytest.raises(RenderBudgetError, match=stops + CHARS):
        ds.map(tokenize(tokenizer), batched=True, batch_size=4, num_proc=num_proc, with_indices=True)
    skip = tokenize(tokenizer, on_bad_row="skip")  # one row over the budget ends nothing else
    if num_proc is None:
        with pytest.warns(BadMaskRowsWarning, match=r"dropped 1 of 4 rows in this batch .*: 1 render-budget "
                                                    r"\(first: row 7: str \* 300,000,000"):
            out = ds.map(skip, batched=True, batch_size=4, with_indices=True)
    else:  # whether a worker's warning reaches this process is datasets' business
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", BadMaskRowsWarning)
            out = ds.map(skip, batched=True, batch_size=4, num_proc=num_proc, with_indices=True)
    assert out["messages"] == ds["messages"][:7]


def test_tokenize_refuses_a_hostile_template_before_any_row(tokenizer: Any) -> None:
    from whileai_datasets.tokenize.token_masks import tokenize

    text, pattern = HOSTILE["nested_range_loops"]
    _refused_quickly(lambda: tokenize(tokenizer, ChatTemplate(text, name="<t>", budget=FAST)), pattern)


_MEMORY_PROBE = """
import json, sys, psutil
from whileai_datasets.chat_template import ChatTemplate, RenderBudget
from whileai_datasets.errors import RenderBudgetError
before = psutil.Process().memory_info().rss
peaks = {}
for name, text in json.loads(sys.argv[1]).items():
    for action in ("render", "inspect"):
        chat = ChatTemplate(text, budget=RenderBudget(max_seconds=2))
        try:
            chat.render([{"role": "user", "content": "hi"}]) if action == "render" else chat.inspect()
        except RenderBudgetError:
            pass
        else:
            raise SystemExit(f"not refused: {text}")
        # VmHWM, the peak RSS of this process image (ru_maxrss would carry the parent's over exec)
        with open("/proc/self/status") as status:
            peak = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmHWM:"))
        peaks[f"{name} {action}"] = peak - before
print(json.dumps(peaks))
"""


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the peak RSS (VmHWM) from /proc")
def test_hostile_templates_stay_in_bounded_memory() -> None:
    names = ["string_repetition", "doubling_concat", "join", "printf_width", "str_format_width", "center_filter",
             "shared_list_printed", "shared_list_tojson", "nested_range_output", "branching_macro"]
    probe = subprocess.run([sys.executable, "-c", _MEMORY_PROBE, json.dumps({n: HOSTILE[n][0] for n in names})],
                           capture_output=True, text=True, timeout=600, check=False)
    assert probe.returncode == 0, probe.stderr[-2000:]
    growth = {key: value // 2**20 for key, value in json.loads(probe.stdout.splitlines()[-1]).items()}
    # unguarded, the first alone grows the process by 1.3 GB; the largest string these may build is 33 MB
    assert max(growth.values()) < 400, f"peak RSS growth in MB after each case: {growth}"


# ---------------------------------------------------------------- real templates never notice


def _templates() -> dict[str, Path]:
    found = {f"shipped/{p.stem}": p for p in sorted((ROOT / "templates").glob("*.jinja"))}
    found |= {f"tests/{p.stem}": p for p in sorted((ROOT / "tests" / "chat_template" / "templates").glob("*.jinja"))}
    return found


def _conversation(turns: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a support agent."}]
    for turn in range(turns):
        call = {"id": f"call_{turn}", "type": "function",
                "function": {"name": "lookup", "arguments": {"order_id": f"A-{turn}"}}}
        messages += [{"role": "user", "content": f"Where is order A-{turn}?"},
                     {"role": "assistant", "content": "", "tool_calls": [call]},
                     {"role": "tool", "tool_call_id": f"call_{turn}", "name": "lookup",
                      "content": json.dumps({"status": "shipped", "log": "x" * 2000})},
                     {"role": "assistant", "content": f"A-{turn} has shipped."}]
    return messages


TOOLS = [{"type": "function", "function": {"name": "lookup", "description": "Find an order.",
                                           "parameters": {"type": "object",
                                                          "properties": {"order_id": {"type": "string"}}}}}]
NOW = datetime(2026, 1, 2, 3, 4, 5)


def _unbudgeted(text: str, messages: list[dict[str, Any]], tokens: dict[str, str]) -> str:
    """jinja2's own sandbox with transformers' names and no budget hooks: the reference text."""
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationExtension, "jinja2.ext.loopcontrols"])
    env.filters["tojson"] = _tojson
    env.globals.update(raise_exception=lambda message: (_ for _ in ()).throw(ValueError(message)),
                       strftime_now=pinned_strftime(NOW))
    context = template_context(prepare_messages(messages), TOOLS, False, tokens, NOW)
    return env.from_string(text).render(**context)


def _variants(messages: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The conversation as given, with JSON-text tool-call arguments, and without tool turns."""
    text_arguments = [{**m, "tool_calls": [{**c, "function": {**c["function"],
                                                               "arguments": json.dumps(c["function"]["arguments"])}}
                                           for c in m["tool_calls"]]} if m.get("tool_calls") else m
                      for m in messages]
    plain = [m for m in messages if m["role"] != "tool" and not m.get("tool_calls")]
    return [messages, text_arguments, plain]


@pytest.mark.parametrize("name", sorted(_templates()))
def test_real_templates_render_unchanged_under_the_default_budget(name: str) -> None:
    chat = ChatTemplate.from_file(_templates()[name])
    tokens = {"bos_token": "<s>", "eos_token": "</s>", **chat.special_tokens}
    failures = []
    for messages in _variants(_conversation(60)):
        try:
            expected = _unbudgeted(chat.text, messages, tokens)
        except Exception as err:  # this template does not take that shape of conversation
            failures.append(err)
            continue
        assert render_plain(chat.text, messages, tools=TOOLS, kwargs=tokens, now=NOW, name=name) == expected
        assert len(expected) > 1000
        return
    raise AssertionError(f"{name} renders none of the conversations: {failures}")


# ---------------------------------------------------------------- settings


def test_the_environment_variables_set_the_default_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WHILEAI_TEMPLATE_MAX_CHARS", "1_000")
    with pytest.raises(RenderBudgetError, match=r"^<t>: the rendered text would be 1,200 characters, over "
                                                r"max_chars=1,000 of the render budget"):
        ChatTemplate("{% for i in range(400) %}abc{% endfor %}", name="<t>").render(MESSAGES)
    assert RenderBudget.from_env() == RenderBudget(max_chars=1000)
    monkeypatch.setenv("WHILEAI_TEMPLATE_MAX_SECONDS", "soon")
    with pytest.raises(TemplateError, match=r"^WHILEAI_TEMPLATE_MAX_SECONDS: WHILEAI_TEMPLATE_MAX_SECONDS must be "
                                            r"a positive number, got 'soon'\. Set it to e\.g\. 240\.0 or unset it\.$"):
        RenderBudget.from_env()


def test_a_budget_passed_to_the_template_travels_with_its_copies() -> None:
    budget = RenderBudget(max_chars=5000, max_seconds=30)
    chat = ChatTemplate.shipped("qwen2_5")
    chat = ChatTemplate(chat.text, name="qwen2_5.jinja", budget=budget)
    assert chat.with_generation().budget == budget
    assert chat.mask_plan().template.budget == budget
    with pytest.raises(RenderBudgetError, match="over max_chars=5,000"):
        chat.render([{"role": "user", "content": "x" * 6000}])


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"max_chars": 0}, r"max_chars must be a positive int, got 0"),
    ({"max_chars": True}, r"max_chars must be a positive int, got True"),
    ({"max_chars": "10"}, r"max_chars must be a positive int, got '10'"),
    ({"max_seconds": -1}, r"max_seconds must be a positive number, got -1"),
    ({"max_seconds": "2"}, r"max_seconds must be a positive number, got '2'"),
])
def test_render_budget_refuses_bad_limits(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(TemplateError, match=f"^RenderBudget: {message}"):
        RenderBudget(**kwargs)
    with pytest.raises(TemplateError, match=r"budget must be a RenderBudget, got dict"):
        ChatTemplate("{{ 1 }}", budget={"max_chars": 5})  # type: ignore[arg-type]


def test_shared_tools_print_once_per_batch_and_still_obey_the_size_limit() -> None:
    from whileai_datasets.chat_template.rendering.render import batch_inputs
    from whileai_datasets.chat_template.sandbox.budget import shared_values

    template = ChatTemplate(
        "{% for tool in tools %}{{ tool | tojson }}|{{ tool | tojson(indent=2) }}|{{ tool.function | tojson }}"
        "{% endfor %}{{ tools | tojson }}{% for m in messages %}{{ m.content | tojson }}{% endfor %}")
    tools = [{"type": "function", "function": {"name": f"f{i}", "parameters": {"type": "object"}}} for i in range(3)]
    rows = [[{"role": "user", "content": f"row {i} \u00e9"}] for i in range(4)]
    alone = [template.render(messages, tools=tools).text for messages in rows]
    with batch_inputs():
        together = [template.render(messages, tools=tools).text for messages in rows]
        memo = shared_values()
        assert memo is not None and len(memo._results) == 3 * 3 + 1  # each tool three ways, and the list
    assert together == alone
    assert json.dumps(tools[2], indent=2) in together[0]  # the indented form is its own entry, not the plain one

    small = ChatTemplate(template.text, budget=RenderBudget(max_chars=60))
    with batch_inputs():
        for messages in rows:  # every row is refused, the first by computing, the rest as well
            with pytest.raises(RenderBudgetError, match="max_chars"):
                small.render(messages, tools=tools)
