"""Row-preserving transforms in datasets' default one-example-at-a-time map.

``ds.map(t)`` (no ``batched=True``) hands the transform one example: a
``LazyRow`` under plain formatting, a one-row table under ``with_format("arrow")``.
The rows it writes must equal those of ``ds.map(t, batched=True)``; the
transforms that change the row count refuse, naming ``batched=True``.
"""

from __future__ import annotations

from typing import Any

import pytest

from whileai_datasets import transforms as wai_transforms
from whileai_datasets.errors import SchemaError

from .conftest import edge_rows, seeded_rows

ROW_PRESERVING = {
    "strip_think": wai_transforms.strip_think,
    "truncate_tool_output": wai_transforms.truncate_tool_output(40),
    "loss_mask": wai_transforms.loss_mask("final"),
    "to_openai": wai_transforms.to_openai,
    "to_fireworks": wai_transforms.to_fireworks,
    "to_trl_training": wai_transforms.to_trl("training"),
}
ROW_CHANGING = {
    "unroll": (wai_transforms.unroll, r"unroll changes the number of rows.*Pass batched=True"),
    "to_trl_completion": (
        wai_transforms.to_trl("completion"),
        r'to_trl\("completion"\) changes the number of rows.*Pass batched=True',
    ),
}


@pytest.fixture
def ds(load_canonical: Any) -> Any:
    return load_canonical(seeded_rows(0, "sft") + edge_rows(), system_prompt="S")


@pytest.mark.parametrize("name", sorted(ROW_PRESERVING))
@pytest.mark.parametrize("fmt", [None, "arrow"])
def test_per_example_map_gives_the_rows_of_a_batched_map(ds: Any, name: str, fmt: str | None) -> None:
    transform = ROW_PRESERVING[name]
    source = ds.with_format(fmt)
    batched = source.map(transform, batched=True, load_from_cache_file=False)
    one_by_one = source.map(transform, load_from_cache_file=False)
    assert one_by_one.num_rows == ds.num_rows
    assert list(one_by_one.with_format(None)) == list(batched.with_format(None))
    assert one_by_one.features == batched.features


@pytest.mark.parametrize("name", sorted(ROW_PRESERVING))
def test_per_example_map_chains_like_batched(ds: Any, name: str) -> None:
    # a per-example map after another: the second transform sees the first one's features
    first = ds.map(wai_transforms.strip_think, load_from_cache_file=False)
    transform = ROW_PRESERVING[name]
    chained = first.map(transform, load_from_cache_file=False)
    expected = ds.map(wai_transforms.strip_think, batched=True).map(transform, batched=True)
    assert list(chained) == list(expected)


@pytest.mark.parametrize("name", sorted(ROW_PRESERVING))
def test_iterable_dataset_per_example_map_gives_the_same_rows(ds: Any, name: str) -> None:
    transform = ROW_PRESERVING[name]
    # an IterableDataset merges a returned dict with the input row, so a wire
    # shape (which drops columns) is mapped with remove_columns, batched or not
    kwargs = {"remove_columns": ds.column_names} if name.startswith("to_") else {}
    expected = list(ds.to_iterable_dataset().map(transform, batched=True, batch_size=5, **kwargs))
    streamed = list(ds.to_iterable_dataset().map(transform, **kwargs))
    assert len(streamed) == ds.num_rows
    assert streamed == expected


@pytest.mark.parametrize("name", sorted(ROW_CHANGING))
@pytest.mark.parametrize("fmt", [None, "arrow"])
def test_row_changing_transforms_still_refuse_one_example(ds: Any, name: str, fmt: str | None) -> None:
    transform, message = ROW_CHANGING[name]
    with pytest.raises(SchemaError, match=message):
        ds.with_format(fmt).map(transform)



# to_fireworks refuses referenced images (batched too); to_trl("training") adds an `images` column only to
# batches that hold images, so on these rows it fails with batch_size=1 as well as one example at a time
@pytest.mark.parametrize("name", ["loss_mask", "strip_think", "to_openai", "truncate_tool_output"])
def test_per_example_map_keeps_content_parts(load_canonical: Any, name: str) -> None:
    from tests.support.content_parts import ROWS as PART_ROWS

    ds = load_canonical(PART_ROWS)
    transform = ROW_PRESERVING[name]
    batched = ds.map(transform, batched=True, load_from_cache_file=False)
    one_by_one = ds.map(transform, load_from_cache_file=False)
    assert list(one_by_one) == list(batched)
    assert one_by_one.features == batched.features
