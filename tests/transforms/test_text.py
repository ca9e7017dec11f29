"""``_text.quote`` / ``escape`` against Python's ``json.dumps``, on columns
that repeat values (escaped once per distinct value) and columns that do not."""

from __future__ import annotations

import json

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from whileai_datasets.transforms import _text

# quotes, backslashes and control characters among plain text: every escape whileai's json writes
chars = st.one_of(st.characters(blacklist_categories=("Cs",)), st.sampled_from('"\\\n\r\t\x00\x08\x0c\x1f\x7f'))
pool = st.lists(st.one_of(st.none(), st.text(alphabet=chars, max_size=8)), min_size=1, max_size=8)


@settings(max_examples=100, deadline=None)
@given(pool, st.data())
def test_repeated_values_quote_as_json_dumps(values: list[str | None], data: st.DataObject) -> None:
    column = data.draw(st.lists(st.sampled_from(values), min_size=64, max_size=300))  # few distinct: by value
    quoted = _text.quote(pa.array(column, pa.string())).to_pylist()
    assert quoted == [None if v is None else json.dumps(v, ensure_ascii=False) for v in column]
    escaped = _text.escape(pa.array(column, pa.string())).to_pylist()
    assert escaped == [None if v is None else json.dumps(v, ensure_ascii=False)[1:-1] for v in column]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.one_of(st.none(), st.text(alphabet=chars, max_size=8)), min_size=0, max_size=200, unique=True))
def test_distinct_values_quote_as_json_dumps(column: list[str | None]) -> None:
    quoted = _text.quote(pa.array(column, pa.string())).to_pylist()
    assert quoted == [None if v is None else json.dumps(v, ensure_ascii=False) for v in column]


def test_a_sliced_column_quotes_its_own_rows() -> None:
    column = pa.array(['a"', "b", None, "c\n"] * 40, pa.string()).slice(3, 100)
    expected = [None if v is None else json.dumps(v, ensure_ascii=False) for v in column.to_pylist()]
    assert _text.quote(column).to_pylist() == expected


ARGUMENTS = ['{"a": 1}', '"{\\"a\\": 1}"', "[1]", "not json", None, "{}", ' {"b": "x"} ', '"\\"{}\\""']


@settings(max_examples=50, deadline=None)
@given(st.lists(st.sampled_from(ARGUMENTS), min_size=64, max_size=200))
def test_repeated_arguments_are_checked_as_each_text_alone(column: list[str | None]) -> None:
    from whileai_datasets.transforms import _arguments

    parses, decodes, trl = _arguments.arguments_info(pa.array(column, pa.string()))  # few distinct: by value
    alone = [_arguments.arguments_info(pa.array([text], pa.string())) for text in column]
    assert parses.tolist() == [bool(p[0]) for p, _, _ in alone]
    assert decodes.tolist() == [bool(d[0]) for _, d, _ in alone]
    assert trl.storage.to_pylist() == [t.storage[0].as_py() for _, _, t in alone]


def test_float_columns_are_written_as_numbers_that_read_back_as_floats() -> None:
    import json

    from whileai_datasets.transforms import _json

    values = [1.0, -0.0, 0.0, 100.0, 0.5, 1e-7, 1e15, 1.2345678901234568e17, -3.0]
    texts = _json.encode(pa.array(values + [None], pa.float64())).to_pylist()
    parsed = [json.loads(t) for t in texts[:-1]]
    assert parsed == values
    assert all(type(p) is float for p in parsed)
    assert texts[0] == json.dumps(1.0) and texts[3] == json.dumps(100.0)
