"""The publishing machine, in a client process (tests/hub/conftest.py `Identity.run`): publish with this package.

Until the package publishes the `messages` and `sharegpt` configs itself, they are built here in
the shapes issue 20 specifies and pushed beside the package's own configs.
"""

from __future__ import annotations

import json
from typing import Any


# --- until the package publishes them: the issue's `messages` and `sharegpt` shapes, built here ------------
def _openai_message(message: dict[str, Any], mark: int) -> dict[str, Any]:
    out: dict[str, Any] = {"role": message["role"], "content": message.get("content") or ""}
    if message.get("tool_calls"):
        out["tool_calls"] = [{"id": c["id"], "type": "function",
                              "function": {"name": c["function"]["name"],
                                           "arguments": json.loads(c["function"]["arguments"])}}
                             for c in message["tool_calls"]]
    for key in ("tool_call_id", "name"):
        if message.get(key):
            out[key] = message[key]
    return {**out, "weight": mark, "loss": bool(mark)}


def _sharegpt_turn(message: dict[str, Any]) -> dict[str, str]:
    if message["role"] == "user":
        return {"from": "human", "value": message["content"]}
    if message["role"] == "tool":
        return {"from": "observation", "value": message["content"]}
    if message.get("tool_calls"):
        calls = [{"name": c["function"]["name"], "arguments": json.loads(c["function"]["arguments"])}
                 for c in message["tool_calls"]]
        return {"from": "function_call", "value": json.dumps(calls[0] if len(calls) == 1 else calls)}
    return {"from": "gpt", "value": message["content"]}


def stopgap_configs(canonical: Any) -> dict[str, list[dict[str, Any]]]:
    messages, sharegpt = [], []
    for row in canonical.to_list():
        turns = [{k: v for k, v in m.items() if v is not None} for m in row["messages"]]
        messages.append({"messages": [_openai_message(m, k) for m, k in zip(turns, row["loss_mask"])],
                         "tools": row["tools"]})
        system = turns[0]["content"] if turns[0]["role"] == "system" else ""
        body = turns[1:] if system else turns
        offset = len(turns) - len(body)
        for end, mark in enumerate(row["loss_mask"]):
            if mark:
                sharegpt.append({"conversations": [_sharegpt_turn(m) for m in body[: end + 1 - offset]],
                                 "system": system, "tools": json.dumps(row["tools"])})
    return {"messages": messages, "sharegpt": sharegpt}


def publish_for_trainers(path: str, repo_id: str, token: str, tokenizer_dir: str) -> dict[str, Any]:
    """In a client process: publish the canonical rows with a tokenizer, plus the stopgap configs."""
    from datasets import Dataset, Features, Json, List, Value, load_from_disk
    from transformers import AutoTokenizer

    from whileai_datasets.hub import publish

    canonical = load_from_disk(path)
    result = dict(publish(canonical, repo_id, token=token, tokenizer=AutoTokenizer.from_pretrained(tokenizer_dir)))
    extra = stopgap_configs(canonical)
    call = {"id": Value("string"), "type": Value("string"), "function": {"name": Value("string"), "arguments": Json()}}
    message = {"role": Value("string"), "content": Value("string"), "tool_calls": List(call),
               "tool_call_id": Value("string"), "name": Value("string"), "weight": Value("int8"), "loss": Value("bool")}
    Dataset.from_list(extra["messages"], features=Features({"messages": List(message), "tools": Json()})
                      ).push_to_hub(repo_id, "messages", token=token, private=True)
    turn = {"from": Value("string"), "value": Value("string")}
    Dataset.from_list(extra["sharegpt"], features=Features({"conversations": List(turn), "system": Value("string"),
                                                            "tools": Value("string")})
                      ).push_to_hub(repo_id, "sharegpt", token=token, private=True)
    return result
