"""The cyclic garbage collector paused around work that makes many short-lived objects and no cycles."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector off inside the block, and back as it was after.

    Parsing a chunk of JSON lines or tokenizing a batch makes hundreds of thousands of small dicts,
    lists and strings and no reference cycle (``gc.collect()`` after one finds nothing), so reference
    counting frees them all; each automatic collection meanwhile walks every tracked object of the
    process, about a tenth of the work here and more the larger the caller's heap. A block that runs
    while the collector is already paused leaves it paused.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
