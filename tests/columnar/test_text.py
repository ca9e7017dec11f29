"""``_text.quote`` / ``escape`` against Python's ``json.dumps``, on columns
that repeat values (escaped once per distinct value) and columns that do not."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from whileai_datasets.columnar import _arrow, _text

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
    from whileai_datasets.columnar import _arguments

    parses, decodes, trl = _arguments.arguments_info(pa.array(column, pa.string()))  # few distinct: by value
    alone = [_arguments.arguments_info(pa.array([text], pa.string())) for text in column]
    assert parses.tolist() == [bool(p[0]) for p, _, _ in alone]
    assert decodes.tolist() == [bool(d[0]) for _, d, _ in alone]
    assert trl.storage.to_pylist() == [t.storage[0].as_py() for _, _, t in alone]


def test_float_columns_are_written_as_numbers_that_read_back_as_floats() -> None:
    import json

    from whileai_datasets.columnar import _json

    values = [1.0, -0.0, 0.0, 100.0, 0.5, 1e-7, 1e15, 1.2345678901234568e17, -3.0]
    texts = _json.encode(pa.array(values + [None], pa.float64())).to_pylist()
    parsed = [json.loads(t) for t in texts[:-1]]
    assert parsed == values
    assert all(type(p) is float for p in parsed)
    assert texts[0] == json.dumps(1.0) and texts[3] == json.dumps(100.0)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.none(), st.text(alphabet=chars, max_size=6)), min_size=2, max_size=40), st.data())
def test_if_else_with_a_null_side_keeps_a_slices_own_rows(values: list[str | None], data: st.DataObject) -> None:
    # pyarrow 21-23 copy a slice's offsets unadjusted on this path (apache/arrow#49410)
    start = data.draw(st.integers(1, len(values) - 1))
    picks = data.draw(st.lists(st.booleans(), min_size=len(values) - start, max_size=len(values) - start))
    rows = values[start:]
    for arrow_type in (pa.string(), pa.large_string()):
        column = pa.array(values, pa.string()).cast(arrow_type).slice(start)
        null = pa.scalar(None, arrow_type)
        first = _arrow.if_else(pa.array(picks), null, column)
        second = _arrow.if_else(pa.array(picks), column, null)
        first.validate(full=True)
        second.validate(full=True)
        assert first.to_pylist() == [None if pick else v for pick, v in zip(picks, rows)]
        assert second.to_pylist() == [v if pick else None for pick, v in zip(picks, rows)]


def test_no_transform_calls_pyarrows_if_else_with_a_null_scalar() -> None:
    """The null-scalar paths of ``pc.if_else`` are the broken ones before pyarrow 24: ``_arrow.if_else``."""
    package = Path(_arrow.__file__).parents[1]
    found = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "pc.if_else":
                if any(_names_a_null(arg) for arg in node.args[1:]):
                    found.append(f"{path.relative_to(package.parent)}:{node.lineno}: {ast.unparse(node)}")
    assert not found, "use _arrow.if_else where a side is a null scalar:\n" + "\n".join(found)


def _names_a_null(arg: ast.expr) -> bool:
    text = ast.unparse(arg)
    return text in ("NULL", "_NULL", "None") or text.startswith("pa.scalar(None")
