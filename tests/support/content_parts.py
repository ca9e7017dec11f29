"""Rows of reasoning and vision agents, one per content shape (issue 15).

Every text, reasoning text and media reference is a distinct marker string, so
a test can check that an output still holds each of them (``needles``) without
knowing how the output is laid out.
"""

from __future__ import annotations

import base64
import json
import struct
import zlib
from typing import Any


def png_data_uri(width: int = 8, height: int = 8, rgb: tuple[int, int, int] = (200, 30, 30)) -> str:
    """A real PNG (one colour), as a data URI, built without any image library."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    raw = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
    png += chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
    return "data:image/png;base64," + base64.b64encode(png).decode()


RED = png_data_uri(rgb=(200, 30, 30))
BLUE = png_data_uri(rgb=(30, 30, 200))
CAT_URL = "https://images.example.com/cat-7731.png"
DOG_URL = "https://images.example.com/dog-1187.jpg"
CLIP_PATH = "/mnt/clips/ball-drop-0042.mp4"
CHART_PATH = "/mnt/tool-out/chart-5510.png"


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def _call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


#: Rows whose messages are already in the canonical form (content parts kept as
#: they are), so the builder must give each message back exactly.
CANONICAL_ROWS: list[dict[str, Any]] = [
    {  # text parts only, with a think block in the assistant's text part
        "messages": [
            {"role": "user", "content": [text("alpha question part one."), text(" alpha part two?")]},
            {"role": "assistant", "content": [text("<think>alpha hidden musing</think>\n alpha answer text.")]},
        ],
        "reward": 1.0,
        "scenario_id": "s-text-parts",
    },
    {  # image by URL (both keys HF processors read), a multi-turn follow-up image
        "messages": [
            {"role": "user", "content": [{"type": "image", "image": CAT_URL}, text("bravo what animal?")]},
            {"role": "assistant", "content": "bravo it is a cat."},
            {"role": "user", "content": [{"type": "image", "url": DOG_URL}, text("bravo and this one?")]},
            {"role": "assistant", "content": [text("bravo a dog.")]},
        ],
        "reward": 0.5,
        "scenario_id": "s-image-url",
    },
    {  # OpenAI's image_url dict with detail, and a data URI
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "image_url", "image_url": {"url": RED, "detail": "low"}},
                    {"type": "image", "image": BLUE},
                    text("charlie compare the colours"),
                ],
            },
            {"role": "assistant", "content": "charlie red then blue.", "reasoning_content": "charlie first pixel is red"},
        ],
        "reward": 0.0,
        "scenario_id": "s-data-uri",
    },
    {  # video, a tool call answered by a tool turn with text and an image
        "messages": [
            {"role": "user", "content": [{"type": "video", "video": CLIP_PATH}, text("delta what happens in the clip?")]},
            {
                "role": "assistant",
                "content": "",
                "reasoning_content": "delta I should chart the fall",
                "tool_calls": [_call("call_d1", "plot", {"series": "delta-height"})],
            },
            {
                "role": "tool",
                "content": [text("delta chart rendered, peak at 3.2 m"), {"type": "image", "path": CHART_PATH}],
                "tool_call_id": "call_d1",
                "name": "plot",
            },
            {"role": "assistant", "content": "delta the ball falls from 3.2 m."},
        ],
        "reward": 0.75,
        "scenario_id": "s-video",
    },
]

#: Typed parts under other names: reasoning / thinking / tool_call parts.
MAPPED_ROW: dict[str, Any] = {
    "messages": [
        {"role": "user", "content": [text("echo look it up"), {"type": "image", "image": CAT_URL}]},
        {
            "role": "assistant",
            "content": [
                {"type": "reasoning", "value": "echo reasoning in a typed part"},
                {"type": "tool_call", "value": json.dumps({"name": "lookup", "arguments": {"q": "echo cat"}})},
            ],
        },
        {"role": "tool", "content": "echo lookup result: tabby", "tool_call_id": "call_e1"},
        {
            "role": "assistant",
            "content": [{"type": "thinking", "thinking": "echo second thought"}, text("echo a tabby cat.")],
        },
    ],
    "reward": 1.0,
    "scenario_id": "s-mapped",
}

ROWS = [*CANONICAL_ROWS, MAPPED_ROW]

#: Reasoning texts (dropped by strip_think, kept otherwise).
REASONING = [
    "charlie first pixel is red",
    "delta I should chart the fall",
    "echo reasoning in a typed part",
    "echo second thought",
]
THINK_TEXT = "alpha hidden musing"
MEDIA = [CAT_URL, DOG_URL, RED, BLUE, CLIP_PATH, CHART_PATH]


def texts() -> list[str]:
    """Every text the rows say (the think block excepted)."""
    out = []
    for row in ROWS:
        for message in row["messages"]:
            content = message["content"]
            parts = content if isinstance(content, list) else [text(content)]
            out += [p["text"].replace(f"<think>{THINK_TEXT}</think>", "").strip() for p in parts if p["type"] == "text"]
    return [t for t in out if t]


def missing(output: Any, needles: list[str]) -> list[str]:
    """The needles that no string inside ``output`` contains."""
    haystack = "\n".join(_strings(output))
    return [n for n in needles if n not in haystack]


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        try:
            decoded = json.loads(value)
        except ValueError:
            return [value]
        return [value] if isinstance(decoded, str) else [value, *_strings(decoded)]
    if isinstance(value, dict):
        return [s for item in value.values() for s in _strings(item)]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


# ---------------------------------------------------------------- part layouts (issue 23)
#
# Every layout real rollouts write parts in, each row written here with its own
# marker strings: text under ``value`` (LLaMA-Factory) or ``content`` (a
# tool_result), OpenAI's image_url / input_audio / file parts, Anthropic's
# base64 image source, Qwen-VL's video object, and processor / API keys.

HOTEL_URL = "https://images.example.com/hotel-lobby-3318.webp"
AUDIO_B64 = base64.b64encode(b"RIFF-hotel-voice-note-wave-bytes-0917").decode()
PDF_URI = "data:application/pdf;base64," + base64.b64encode(b"%PDF-1.4 hotel invoice 4471").decode()
INDIA_B64 = RED.split(",", 1)[1]  # raw base64, as Anthropic's source holds it
JULIET_CLIP = "https://videos.example.com/juliet-rolling-ball-2210.mp4"
FILE_ID = "file-kilo-88120"

LAYOUT_ROWS: list[dict[str, Any]] = [
    {  # LLaMA-Factory: text under "value"; Qwen-VL processor hints on an image
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "value": "golf text that sits under value"},
                    {"type": "image", "image": CAT_URL, "min_pixels": 3136, "max_pixels": 1003520},
                ],
            },
            {"role": "assistant", "content": [{"type": "text", "value": "golf answer under value too"}]},
        ],
        "scenario_id": "s-value",
    },
    {  # OpenAI: image_url with detail, input_audio, a file part by data and by id, cache_control
        "messages": [
            {"role": "system", "content": [{"type": "text", "text": "hotel system rules", "cache_control": {"type": "ephemeral"}}]},
            {
                "role": "user",
                "content": [
                    {"type": "image_url", "image_url": {"url": HOTEL_URL, "detail": "high"}},
                    {"type": "input_audio", "input_audio": {"data": AUDIO_B64, "format": "wav"}},
                    {"type": "file", "file": {"filename": "hotel-invoice.pdf", "file_data": PDF_URI}},
                    {"type": "file", "file": {"file_id": FILE_ID}},
                    text("hotel summarise all of these"),
                ],
            },
            {"role": "assistant", "content": "hotel a lobby, a voice note and an invoice."},
        ],
        "scenario_id": "s-openai",
    },
    {  # Anthropic: base64 image source, a tool_result part holding its text under "content"
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": INDIA_B64}},
                    {"type": "text", "text": "india which colour is it?", "cache_control": {"type": "ephemeral"}},
                ],
            },
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [_call("call_i1", "palette", {"hex": "india"})],
            },
            {
                "role": "tool",
                "content": [{"type": "tool_result", "tool_use_id": "call_i1", "content": "india palette says crimson red"}],
                "tool_call_id": "call_i1",
            },
            {"role": "assistant", "content": [text("<think>india check the palette</think>india it is red.")]},
        ],
        "scenario_id": "s-anthropic",
    },
    {  # Qwen-VL: a video object with url, fps and pixel bounds beside it
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "video", "video": {"url": JULIET_CLIP}, "fps": 2.0, "max_pixels": 151200},
                    text("juliet what moves in the clip?"),
                ],
            },
            {"role": "assistant", "content": "juliet a ball rolls left."},
        ],
        "scenario_id": "s-qwen-video",
    },
]
LAYOUT_TEXTS = [
    "golf text that sits under value",
    "golf answer under value too",
    "hotel system rules",
    "hotel summarise all of these",
    "hotel a lobby, a voice note and an invoice.",
    "india which colour is it?",
    "india palette says crimson red",
    "india it is red.",
    "juliet what moves in the clip?",
    "juliet a ball rolls left.",
]
LAYOUT_THINK = "india check the palette"
LAYOUT_MEDIA = [CAT_URL, HOTEL_URL, AUDIO_B64, PDF_URI, FILE_ID, INDIA_B64, JULIET_CLIP]
#: Keys beside the reference that every stage keeps (wire shapes included).
LAYOUT_KEYS = ["min_pixels", "max_pixels", "cache_control", "input_audio", "format", "filename", "fps", "file_id"]


def keys_of(value: Any) -> set[str]:
    """Every dict key anywhere inside ``value`` (JSON text decoded)."""
    if isinstance(value, str):
        try:
            decoded = json.loads(value)
        except ValueError:
            return set()
        return keys_of(decoded) if isinstance(decoded, (dict, list)) else set()
    if isinstance(value, dict):
        return set(value) | {k for item in value.values() for k in keys_of(item)}
    if isinstance(value, list):
        return {k for item in value for k in keys_of(item)}
    return set()
