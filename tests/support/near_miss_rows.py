"""Rows in the near-miss shapes of issue 29, written as LLaMA-Factory and Hub datasets write them,
with the canonical messages each must read as (the builder, the export, the Ray engine and the
fuzz seeds share them)."""

from __future__ import annotations

import json
from typing import Any

LOOKUP = {"name": "lookup_order", "description": "Look up an order",
          "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}}
REFUND = {"name": "refund_payment", "description": "Refund a payment",
          "parameters": {"type": "object", "properties": {"payment_id": {"type": "string"}}}}
#: LLaMA-Factory's tools column: JSON text of the schemas
TOOLS_TEXT = json.dumps([LOOKUP, REFUND])
JOIN = "\n</tool_response>\n<tool_response>\n"


def _call(name: str, arguments: dict[str, Any]) -> str:
    return json.dumps({"name": name, "arguments": arguments})


#: LLaMA-Factory sharegpt rows: text, reasoning (<think>), one call, parallel calls (their results
#: joined into one observation), a call after a think block, the system as a key and as a turn
LLAMA_FACTORY_ROWS: list[dict[str, Any]] = [
    {
        "conversations": [
            {"from": "human", "value": "Where is order 7?"},
            {"from": "function_call", "value": _call("lookup_order", {"order_id": "7"})},
            {"from": "observation", "value": '{"status": "shipped"}'},
            {"from": "gpt", "value": "<think>The tool says shipped.</think>It has shipped."},
        ],
        "system": "You are a careful support agent.",
        "tools": TOOLS_TEXT,
    },
    {
        "conversations": [
            {"from": "human", "value": "Look up 1 and refund p2."},
            {"from": "function_call", "value": json.dumps([{"name": "lookup_order", "arguments": {"order_id": "1"}},
                                                           {"name": "refund_payment",
                                                            "arguments": {"payment_id": "p2"}}])},
            {"from": "observation", "value": '{"status": "open"}' + JOIN + '{"refunded": true}'},
            {"from": "gpt", "value": "Order 1 is open and p2 is refunded."},
            {"from": "human", "value": "Thanks. And order 3?"},
            {"from": "function_call",
             "value": "<think>One more lookup.</think>" + _call("lookup_order", {"order_id": "3"})},
            {"from": "observation", "value": "not found"},
            {"from": "gpt", "value": "Order 3 does not exist."},
        ],
        "tools": TOOLS_TEXT,
    },
    {
        "conversations": [
            {"from": "system", "value": "Answer briefly."},
            {"from": "human", "value": "Hi"},
            {"from": "gpt", "value": "Hello."},
        ],
        "system": "",
        "tools": "",
    },
]


def _id(i: int) -> str:
    return f"call_{i:04d}"


def _wire(name: str, arguments: dict[str, Any], i: int) -> dict[str, Any]:
    return {"id": _id(i), "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


#: what each row of LLAMA_FACTORY_ROWS reads as: (messages, loss_mask, tools)
LLAMA_FACTORY_EXPECTED: list[tuple[list[dict[str, Any]], list[int], list[Any] | None]] = [
    (
        [
            {"role": "system", "content": "You are a careful support agent."},
            {"role": "user", "content": "Where is order 7?"},
            {"role": "assistant", "content": "", "tool_calls": [_wire("lookup_order", {"order_id": "7"}, 0)]},
            {"role": "tool", "content": '{"status": "shipped"}', "tool_call_id": _id(0)},
            {"role": "assistant", "content": "<think>The tool says shipped.</think>It has shipped."},
        ],
        [0, 0, 1, 0, 1],
        [LOOKUP, REFUND],
    ),
    (
        [
            {"role": "user", "content": "Look up 1 and refund p2."},
            {"role": "assistant", "content": "", "tool_calls": [_wire("lookup_order", {"order_id": "1"}, 0),
                                                                 _wire("refund_payment", {"payment_id": "p2"}, 1)]},
            {"role": "tool", "content": '{"status": "open"}', "tool_call_id": _id(0)},
            {"role": "tool", "content": '{"refunded": true}', "tool_call_id": _id(1)},
            {"role": "assistant", "content": "Order 1 is open and p2 is refunded."},
            {"role": "user", "content": "Thanks. And order 3?"},
            {"role": "assistant", "content": "<think>One more lookup.</think>",
             "tool_calls": [_wire("lookup_order", {"order_id": "3"}, 2)]},
            {"role": "tool", "content": "not found", "tool_call_id": _id(2)},
            {"role": "assistant", "content": "Order 3 does not exist."},
        ],
        [0, 1, 0, 0, 1, 0, 1, 0, 1],
        [LOOKUP, REFUND],
    ),
    (
        [
            {"role": "system", "content": "Answer briefly."},
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello."},
        ],
        [0, 0, 1],
        None,
    ),
]

#: OpenAI messages under ``conversations`` (axolotl's and many Hub datasets' shape): reasoning,
#: content parts, a call with an id and JSON-text arguments, tools as a list
OPENAI_CONVERSATION_ROW: dict[str, Any] = {
    "conversations": [
        {"role": "user", "content": [{"type": "text", "text": "Where is order 9?"}]},
        {"role": "assistant", "content": "", "reasoning_content": "Look it up.",
         "tool_calls": [{"id": "c9", "type": "function",
                         "function": {"name": "lookup_order", "arguments": '{"order_id": "9"}'}}]},
        {"role": "tool", "content": "delivered", "tool_call_id": "c9"},
        {"role": "assistant", "content": "Delivered."},
    ],
    "tools": [LOOKUP],
    "reward": 1.0,
}
