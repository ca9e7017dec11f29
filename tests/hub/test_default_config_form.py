"""The default config's messages reach the chat template in the form ``tokenize`` hands it (the one renderer input,
``tokenize.template_input``), so TRL's default ``SFTTrainer`` renders what the mask counts.

A template that concatenates a tool call's arguments as a string is handed them as JSON text by ``tokenize``; the
default config used to publish them as dicts (TRL's message shape), so under TRL every row with a call raised
(``can only concatenate str (not "dict") to str``) while the audit counted its tokens. Measured here with TRL's own
``SFTTrainer`` on the published rows.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import write_jsonl
from tests.support.tiny_lm import tiny_causal_lm, train_tokenizer

pytestmark = [pytest.mark.filterwarnings("ignore:`gradient_checkpointing` is deprecated:FutureWarning")]

#: Writes a call as '<call>' + name + ' ' + arguments + '</call>': it fails on arguments given as a dict.
CONCATENATES = (
    "{%- for m in messages %}<|im_start|>{{ m.role }}\n"
    "{%- if m.tool_calls %}{%- for c in m.tool_calls %}{{ '<call>' + c.function.name + ' ' + c.function.arguments"
    " + '</call>' }}{%- endfor %}{%- else %}{{ m.content }}{%- endif %}<|im_end|>\n{%- endfor %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n{%- endif %}"
)


def _row(i: int) -> dict[str, Any]:
    call = {"id": f"call_{i}", "type": "function", "function": {"name": "weigh", "arguments": json.dumps({"box": i})}}
    return {"messages": [{"role": "user", "content": f"weigh box {i}"},
                         {"role": "assistant", "content": "", "tool_calls": [call]},
                         {"role": "tool", "tool_call_id": f"call_{i}", "content": f"{i + 2} kg"},
                         {"role": "assistant", "content": f"box {i} weighs {i + 2} kg"}]}


def test_the_default_config_hands_the_template_arguments_as_tokenize_does(tmp_path: Path) -> None:
    import datasets
    from trl import SFTConfig, SFTTrainer

    from whileai_datasets import audit
    from whileai_datasets.hub import configs, facts

    rows = [_row(i) for i in range(4)]
    ds = datasets.load_dataset("whileai/export", data_files=str(write_jsonl(tmp_path / "rows.jsonl", rows)),
                               split="train", cache_dir=str(tmp_path / "cache"))
    tokenizer = train_tokenizer([json.dumps(r) for r in rows] * 5, chat_template=CONCATENATES, vocab_size=300)
    form = configs.template_form(tokenizer, None)
    assert form.arguments == "text"
    canonical = configs.canonical_table(ds, "x")
    default = configs.TrainerRows(False, form, tokenizer)(canonical, "x")
    calls = [json.loads(m) for ms in default.column("completion").to_pylist() for m in ms if "tool_calls" in m]
    assert calls and all(isinstance(c["tool_calls"][0]["function"]["arguments"], str) for c in calls)
    # TRL itself on the published rows: its labels are the tokens the audit counts
    published = datasets.Dataset.from_list(facts._decoded_rows(default))
    args = SFTConfig(output_dir=str(tmp_path / "sft"), report_to=[], use_cpu=True, max_length=None)
    trainer = SFTTrainer(model=tiny_causal_lm(len(tokenizer)), args=args, train_dataset=published,
                         processing_class=tokenizer)
    labelled = sum(sum(1 for x in row if x != -100) for row in trainer.train_dataset["labels"])
    found = audit(ds, tokenizer=tokenizer, trl_default=True)
    assert labelled == found.supervised_tokens > 0
    route = found.trainers["trl-default"]
    assert route["exact"] is True and route["trains_tokens"] == labelled
