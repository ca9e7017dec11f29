"""The builder's leak facts: the check the normalizer feeds with the assistant
texts it has just added gives whileai's ``row_leak`` verdict on every row.

whileai normalizes ``lower(join(texts))`` (whitespace runs to one space, then
lowercase again); the builder lowercases once, after. The Unicode facts that
make the two equal are checked over every code point here, and the verdicts
over generated rows whose texts are made of the characters where case mapping
is odd (final sigma, dotted I, Kelvin sign, title case, every whitespace)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from whileai_datasets.rows.canonical import Normalizer, Options
from whileai_datasets.rows.leaks import LeakScan, row_leak
from whileai_datasets.rows.normalize import RowContext

WHITESPACE = [chr(c) for c in range(0x110000) if chr(c).isspace()]
#: letters whose case mapping depends on context or changes the length, and case-ignorables
ODD = ["Σ", "σ", "ς", "İ", "i", "\u0307", "K", "\u212a", "ǅ", "ß", "ẞ", "A", "a", "'", "\u00ad", "\u0345", ".", "Ω"]
TEXT = st.text(alphabet=st.sampled_from(ODD * 10 + WHITESPACE), min_size=14, max_size=40)


def test_case_mapping_keeps_whitespace_where_it_is_and_is_idempotent() -> None:
    spaced_sigma_after = [w for w in WHITESPACE if ("AΣ" + w + "B").lower() != "aς" + w + "b"]
    spaced_sigma_before = [w for w in WHITESPACE if ("A" + w + "ΣB").lower() != "a" + w + "σb"]
    assert not spaced_sigma_after and not spaced_sigma_before  # whitespace ends a word for the final sigma
    changed = []
    for code in range(0x110000):
        char = chr(code)
        low = char.lower()
        space = char.isspace()
        if low.lower() != low or (space and low != char) or (not space and any(c.isspace() for c in low)):
            changed.append(hex(code))
    assert changed == []


def _verdicts(rows: list[dict[str, Any]]) -> list[Any]:
    normalizer = Normalizer("default", Options(system_prompt="Be brief."))
    verdicts = []
    for i, row in enumerate(rows):
        scan = LeakScan()
        chunk = normalizer.chunk(scan)
        chunk.add(row, RowContext("rows.jsonl", i + 1, i))
        if not scan.n_checked:
            verdicts.append(None)
        else:
            verdicts.append({k: scan.leaked[0][k] for k in ("field", "needle")} if scan.n_leaked else {})
    return verdicts


@st.composite
def leaky_rows(draw: Any) -> dict[str, Any]:
    said = draw(st.lists(TEXT, min_size=1, max_size=3))
    final = draw(st.one_of(st.none(), TEXT))
    # quote one text, or across two (they are joined by whitespace), in another case
    quoted = draw(st.sampled_from([*said, final or "", " ".join(said + [final or ""])]))
    start = draw(st.integers(0, max(0, len(quoted) - 14)))
    needle = quoted[start : start + draw(st.integers(14, 40))]
    needle = draw(st.sampled_from([needle, needle.upper(), needle.swapcase(), " ".join(needle.split()) + " x"]))
    privileged = {"reference": needle, "hidden_state": {"a": draw(TEXT) + needle, "b": [needle[:20], 3]}}
    if draw(st.booleans()):
        steps: list[dict[str, Any]] = [{"text": text} for text in said]
        return {"prompt": "q", "steps": steps, "final_text": final, "privileged": privileged}
    messages = [{"role": "user", "content": "q"}]
    messages += [{"role": "assistant", "content": text} for text in said]
    return {"messages": messages, "final_text": final, "privileged": privileged, "scenario_id": "s"}


@settings(max_examples=300, deadline=None)
@given(st.lists(leaky_rows(), min_size=1, max_size=4))
def test_builder_leak_verdicts_equal_whileai_row_leak(rows: list[dict[str, Any]]) -> None:
    from whileai.simulations.score.privileged import row_leak as theirs

    assert _verdicts(rows) == [theirs(row) for row in rows]


def test_builder_leak_verdicts_on_parts_and_reasoning_equal_the_raw_message_walk() -> None:
    """Rows whose assistant turns are not plain text are checked by walking the
    raw messages (``row_leak`` without ``said``), which also reads reasoning and
    text parts (whileai reads content strings only: there it finds nothing)."""
    secret = "The Hidden Reference Text"
    rows = [
        {"messages": [{"role": "assistant", "content": "ok", "reasoning_content": f"so {secret.upper()}"}],
         "privileged": {"reference": secret}},
        {"messages": [{"role": "assistant", "content": [{"type": "text", "text": f"{secret[:10]}\n"},
                                                        {"type": "thinking", "thinking": secret[10:]}]}],
         "privileged": {"reference": secret}},
        {"messages": [{"role": "assistant", "content": 12345678901234}], "privileged": {"reference": "12345678901234"}},
        {"messages": [{"role": "assistant", "content": None}], "final_text": secret, "privileged": {"principle": secret}},
    ]
    verdicts = _verdicts(rows)
    assert verdicts == [row_leak(row) for row in rows]
    assert [bool(v) for v in verdicts] == [True, True, False, True]  # not vacuous


def test_needles_keep_short_texts_whose_lowercase_is_long_enough() -> None:
    from whileai.simulations.score.privileged import _needles as theirs

    from whileai_datasets.rows.leaks import needles

    block = {
        "hidden_state": {"a": "İ" * 6, "b": "short", "c": {"d": "İ" * 7, "e": ["x" * 11, "y" * 12, " z" * 7]}},
        "reference": "\u212a" * 11 + "  ",
        "principle": ["ǅ" * 12, {"f": "tiny"}],
    }
    found = needles(block, 12)
    assert found == theirs(block, min_len=12)
    assert ("hidden_state.a", "i\u0307" * 6) in found  # 6 characters, 12 once lowercased
