"""``tokenize`` on Ray Data: ``map_batches`` over actors that each build the tokenizer once.

A tokenizer is heavy to build and to ship (a large vocabulary and merges, the
chat template's mask plan). Each actor of the pool builds it once, in its
constructor, from a path (``AutoTokenizer.from_pretrained`` there), a factory
(a picklable zero-argument callable) or a tokenizer object (pickled once per
actor), then tokenizes every batch Ray hands it with the same ``Tokenize`` a
local ``ds.map`` runs, so the rows are the local rows.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from whileai_datasets._typing import OnBadRow
from whileai_datasets.errors import SchemaError
from whileai_datasets.tokenize.token_masks import Tokenize

TokenizerSource = str | os.PathLike[str] | Callable[[], Any] | Any

__all__ = ["tokenize"]


def build_tokenizer(source: TokenizerSource) -> Any:
    """The tokenizer ``source`` names: loaded from a directory or Hub id, made by a factory, or as given."""
    if isinstance(source, (str, os.PathLike)):
        try:
            from transformers import AutoTokenizer
        except ImportError:
            raise SchemaError(f"cannot load the tokenizer {str(source)!r}: transformers is not installed",
                              hint="pip install transformers, or pass a tokenizer object or factory.") from None
        return AutoTokenizer.from_pretrained(os.fspath(source))
    if callable(source) and not hasattr(source, "encode_batch") and not hasattr(source, "apply_chat_template"):
        return source()
    return source


class TokenizeBatches:
    """The actor-side callable: one ``Tokenize`` per actor, applied to each Arrow batch."""

    def __init__(self, source: TokenizerSource, template: Any, max_length: int | None, column: str,
                 on_bad_row: OnBadRow, salvage: bool = False) -> None:
        self.transform = Tokenize(build_tokenizer(source), template, max_length, column, on_bad_row, salvage=salvage)

    def __call__(self, batch: pa.Table) -> pa.Table:
        out: pa.Table = self.transform(batch)
        return out


def tokenize(ds: Any, tokenizer: TokenizerSource, template: Any = None, max_length: int | None = None, *,
             column: str = "messages", on_bad_row: OnBadRow = "raise", concurrency: int | tuple[int, int] = 1,
             batch_size: int | None = 1000, num_cpus: float = 1, salvage: bool = False) -> Any:
    """``wai_transforms.tokenize`` over a Ray dataset of canonical rows.

    Args:
        ds: A Ray dataset of canonical rows (``ray_engine.read_whileai``).
        tokenizer: A tokenizer directory or Hub id (loaded with
            ``AutoTokenizer.from_pretrained`` in each actor), a zero-argument
            factory (module-level, so it pickles), or a tokenizer object.
        template, max_length, column, on_bad_row, salvage: As ``wai_transforms.tokenize``: with ``salvage``, a
            row the template cannot take whole trains the turns before the one it cannot take (each actor's
            ``SalvagedRowsWarning`` names the rows of its batches).
        concurrency: Actors in the pool (an int, or ``(min, max)`` to autoscale);
            each builds the tokenizer once.
        batch_size: Rows per batch handed to an actor.
        num_cpus: CPUs reserved per actor.
    Returns:
        The lazy Ray dataset of tokenized rows: the columns ``tokenize`` adds,
        rows without a supervised token dropped, as locally.
    Example:
        >>> ds = ray_engine.tokenize(ray_engine.read_whileai(path), "tok/", concurrency=4)  # doctest: +SKIP
    """
    Tokenize(build_tokenizer(tokenizer), template, max_length, column, on_bad_row,  # bad options fail here, once
             salvage=salvage)
    return ds.map_batches(TokenizeBatches, batch_format="pyarrow", batch_size=batch_size, concurrency=concurrency,
                          num_cpus=num_cpus,
                          fn_constructor_args=(tokenizer, template, max_length, column, on_bad_row, salvage))
