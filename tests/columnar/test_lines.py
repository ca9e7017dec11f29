"""``_lines.assemble`` (every line's bytes by one take) against the same
concatenation done per row in Python, on generated pieces."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from whileai_datasets.columnar import _lines

texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=6)
maybe_texts = st.one_of(st.none(), texts)


@st.composite
def pieces_and_rows(draw: Any) -> tuple[int, list[Any], list[list[str]]]:
    """``(n_rows, pieces, expected pieces per row)``."""
    n = draw(st.integers(0, 6))
    pieces: list[Any] = []
    expected: list[list[str]] = [[] for _ in range(n)]
    for _ in range(draw(st.integers(0, 5))):
        kind = draw(st.sampled_from(["const", "array", "ref", "run", "indexed run"]))
        if kind == "const":
            text = draw(texts)
            pieces.append(text)
            for row in expected:
                row.append(text)
        elif kind == "array":
            values = draw(st.lists(maybe_texts, min_size=n, max_size=n))
            pieces.append(pa.array(values, pa.string()))
            for row, value in zip(expected, values):
                row.append(value or "")
        elif kind == "ref":
            shared = draw(st.lists(maybe_texts, min_size=1, max_size=4))
            index = draw(st.lists(st.integers(0, len(shared) - 1), min_size=n, max_size=n))
            pieces.append(_lines.Ref(pa.array(shared, pa.string()), np.array(index, dtype=np.int64)))
            for row, i in zip(expected, index):
                row.append(shared[i] or "")
        else:
            pieces.append(_run(draw, n, expected, indexed=kind == "indexed run"))
    return n, pieces, expected


def _run(draw: Any, n: int, expected: list[list[str]], *, indexed: bool) -> _lines.Run:
    sizes = draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    lead = draw(st.integers(0, 2))  # the list array is a slice: its offsets do not start at 0
    offsets = lead + np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]).astype(np.int64)
    n_items = int(offsets[-1])
    if indexed:
        shared = draw(st.lists(texts, min_size=1, max_size=4))
        index = np.array(draw(st.lists(st.integers(0, len(shared) - 1), min_size=n_items, max_size=n_items)), np.int64)
        items = [shared[i] for i in index.tolist()]
        run = _lines.Run(offsets, pa.array(shared, pa.string()), index)
    else:
        items = draw(st.lists(texts, min_size=n_items, max_size=n_items))
        run = _lines.Run(offsets, pa.array(items, pa.string()))
    for r, row in enumerate(expected):
        row.append(", ".join(items[offsets[r] : offsets[r + 1]]))
    return run


@settings(max_examples=300, deadline=None)
@given(pieces_and_rows())
def test_assembled_lines_are_the_pieces_concatenated(case: tuple[int, list[Any], list[list[str]]]) -> None:
    n, pieces, expected = case
    lines = _lines.assemble(n, pieces)
    lines.validate(full=True)
    assert lines.to_pylist() == ["".join(row) for row in expected]


@settings(max_examples=100, deadline=None)
@given(pieces_and_rows())
def test_materialized_pieces_give_the_same_text(case: tuple[int, list[Any], list[list[str]]]) -> None:
    n, pieces, _ = case
    materialized = [_lines.materialize(p) for p in pieces]
    assert _lines.assemble(n, materialized).to_pylist() == _lines.assemble(n, pieces).to_pylist()


def test_a_dictionary_with_null_indices_is_materialized_not_referenced() -> None:
    array = pa.DictionaryArray.from_arrays(pa.array([1, None, 0], pa.int32()), pa.array(["a", "b"]))
    assert isinstance(_lines.reference(array), pa.Array)
    assert _lines.reference(array).to_pylist() == ["b", None, "a"]
    with pytest.raises(TypeError, match="index"):
        _lines.Ref(pa.array(["a"]))  # type: ignore[call-arg]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.integers(-3, 300), max_size=5), min_size=1, max_size=8), st.integers(0, 2))
def test_integer_lists_write_the_same_text_referenced_or_joined(masks: list[list[int]], lead: int) -> None:
    import json

    from whileai_datasets.columnar import _json

    table = pa.table({"loss_mask": pa.array([[0]] * lead + masks, pa.list_(pa.int16()))}).slice(lead)
    members = pa.DictionaryArray.from_arrays(pa.array([0] * table.num_rows, pa.int32()), pa.array([', "k": 1']))
    referenced = _json.encode_rows(table.append_column(_json.MEMBERS_COLUMN, members))  # the unrolled path
    expected = [json.dumps({"loss_mask": mask, "k": 1}) + "\n" for mask in masks]
    assert referenced.to_pylist() == expected
    assert _json.encode_rows(table).to_pylist() == [json.dumps({"loss_mask": m}) + "\n" for m in masks]
