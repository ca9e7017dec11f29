"""How far real chat templates stay from the render budget, and what the budget's checks cost.

For every shipped template, every template trl ships and the test templates,
renders a long agent conversation (``--turns`` assistant turns with tool calls
and tool outputs of ``--tool-chars`` characters) and prints the largest
rendered text and the slowest render, each as a fraction of the default
``RenderBudget``. Then renders a short conversation through the shipped
qwen2_5 template with this package's budgeted sandbox and with jinja2's plain
``ImmutableSandboxedEnvironment`` side by side (the budget's hooks are the
difference, with the transformers names this package's environment adds)
and prints the ratio. Times are CPU time of the rendering thread, the
budget's own clock. Nothing here asserts:

    python benchmarks/bench_render_budget.py [--turns 400] [--tool-chars 4000]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from jinja2.sandbox import ImmutableSandboxedEnvironment

from whileai_datasets.chat_template import ChatTemplate
from whileai_datasets.chat_template.rendering.render import render_plain
from whileai_datasets.errors import TemplateError

ROOT = Path(__file__).resolve().parent.parent
TOOLS = [{"type": "function", "function": {"name": "lookup_order", "description": "Find an order by id.",
                                           "parameters": {"type": "object", "properties": {
                                               "order_id": {"type": "string", "description": "The id."}},
                                                          "required": ["order_id"]}}}]


def conversation(turns: int, tool_chars: int) -> list[dict]:
    messages = [{"role": "system", "content": "You are a support agent. " * 40}]
    for turn in range(turns):
        call = {"id": f"call_{turn}", "type": "function",
                "function": {"name": "lookup_order", "arguments": {"order_id": f"A-{turn:05d}"}}}
        messages += [
            {"role": "user", "content": f"Where is order A-{turn:05d}? " * 8},
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"call_{turn}", "name": "lookup_order",
             "content": json.dumps({"status": "shipped", "log": "x" * tool_chars})},
            {"role": "assistant", "content": f"Order A-{turn:05d} has shipped. " * 6},
        ]
    return messages


def templates() -> dict[str, ChatTemplate]:
    found = {f"shipped/{p.stem}": ChatTemplate.from_file(p) for p in sorted((ROOT / "templates").glob("*.jinja"))}
    found |= {f"tests/{p.stem}": ChatTemplate.from_file(p)
              for p in sorted((ROOT / "tests" / "chat_template" / "templates").glob("*.jinja"))}
    try:
        import trl
    except ImportError:
        print("trl not installed: its templates are left out", file=sys.stderr)
    else:
        folder = Path(trl.__file__).parent / "chat_templates"
        found |= {f"trl/{p.stem}": ChatTemplate.from_file(p) for p in sorted(folder.glob("*.jinja"))}
    return found


def largest(messages: list[dict]) -> None:
    from whileai_datasets.chat_template.sandbox.budget import DEFAULT_MAX_CHARS, DEFAULT_MAX_SECONDS

    sizes: list[tuple[int, float, str]] = []
    for name, chat in templates().items():
        start = time.thread_time()  # the budget's clock: CPU time of this thread
        try:
            text = render_plain(chat.text, messages, tools=TOOLS, kwargs=chat.special_tokens, name=name)
        except TemplateError as err:
            print(f"  {name}: does not render this conversation ({err.problem[:70]})")
            continue
        sizes.append((len(text), time.thread_time() - start, name))
    chars, _, name = max(sizes)
    slowest = max(sizes, key=lambda item: item[1])
    print(f"{len(sizes)} templates rendered {len(messages)} messages "
          f"({sum(len(str(m.get('content', ''))) for m in messages):,} characters of content)")
    print(f"  largest render: {chars:,} characters ({name}), {chars / DEFAULT_MAX_CHARS:.1%} of max_chars "
          f"({DEFAULT_MAX_CHARS:,})")
    print(f"  slowest render: {slowest[1]:.3f} s of CPU ({slowest[2]}), {slowest[1] / DEFAULT_MAX_SECONDS:.1%} of "
          f"max_seconds ({DEFAULT_MAX_SECONDS:g})")


def overhead(messages: list[dict], rounds: int) -> None:
    chat = ChatTemplate.shipped("qwen2_5")
    plain = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                          extensions=["jinja2.ext.loopcontrols", _NoGeneration])
    plain.filters["tojson"] = lambda value, **kw: json.dumps(value, ensure_ascii=False, **kw)
    compiled = plain.from_string(chat.text)
    times = {"budgeted": 0.0, "plain sandbox": 0.0}
    for _ in range(rounds):  # interleaved, so a busy machine slows both alike
        start = time.thread_time()
        ours = render_plain(chat.text, messages, tools=TOOLS, name="qwen2_5")
        times["budgeted"] += time.thread_time() - start
        start = time.thread_time()
        theirs = compiled.render(messages=messages, tools=TOOLS, add_generation_prompt=False)
        times["plain sandbox"] += time.thread_time() - start
    same = "same text" if ours == theirs else "TEXT DIFFERS"
    print(f"qwen2_5, {len(messages)} messages x {rounds}: budgeted {times['budgeted'] / rounds * 1e3:.2f} ms, "
          f"plain sandbox {times['plain sandbox'] / rounds * 1e3:.2f} ms, ratio "
          f"{times['budgeted'] / times['plain sandbox']:.2f}x ({same})")


from jinja2 import nodes  # noqa: E402
from jinja2.ext import Extension  # noqa: E402


class _NoGeneration(Extension):
    """``{% generation %}`` as a plain block, for the unbudgeted baseline."""

    tags = frozenset({"generation"})  # type: ignore[assignment]

    def parse(self, parser):  # type: ignore[no-untyped-def]
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.Scope(body).set_lineno(lineno)


def per_render(messages: list[dict], label: str) -> None:
    """CPU time per render of three shipped templates, best of 7 x 60 (runs on a checkout without the budget
    too, for a side-by-side run: ``PYTHONPATH=<that checkout> python benchmarks/bench_render_budget.py --per-render``)."""
    figures = []
    for family in ("qwen2_5", "llama3_1", "gptoss"):
        chat = ChatTemplate.shipped(family)
        render_plain(chat.text, messages, tools=TOOLS, kwargs=chat.special_tokens)
        best = float("inf")
        for _ in range(7):
            start = time.thread_time()
            for _ in range(60):
                render_plain(chat.text, messages, tools=TOOLS, kwargs=chat.special_tokens)
            best = min(best, (time.thread_time() - start) / 60)
        figures.append(f"{family} {best * 1e3:.3f} ms")
    print(label, ", ".join(figures))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=400)
    parser.add_argument("--tool-chars", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--per-render", action="store_true", help="only the CPU time per short render")
    args = parser.parse_args()
    if args.per_render:
        import whileai_datasets

        per_render(conversation(4, 400), str(Path(whileai_datasets.__file__).parent.parent))
        return
    largest(conversation(args.turns, args.tool_chars))
    overhead(conversation(4, 400), args.rounds)


if __name__ == "__main__":
    main()
