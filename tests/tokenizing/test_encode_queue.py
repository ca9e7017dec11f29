"""The encoding queue: Rust calls on a thread, the encoder's own work and its pieces on the caller's."""

from __future__ import annotations

from typing import Any

import pytest

from whileai_datasets.tokenize.encode_queue import EncodeQueue
from whileai_datasets.tokenize.token_encode import PieceEncoder

SYSTEM = "<|im_start|>system\n" + "You look orders up before you answer, and you say so. " * 6 + "<|im_end|>\n"


def _texts(tag: str, count: int) -> list[str]:
    return [SYSTEM + f"<|im_start|>user\nask {tag}-{i} caf\u00e9<|im_end|>\n<|im_start|>assistant\nok {i}<|im_end|>"
            for i in range(count)]


def _whole(backend: Any, text: str) -> tuple[list[int], list[list[int]]]:
    encoding = backend.encode(text, add_special_tokens=False)
    return encoding.ids, [list(o) for o in encoding.offsets]


def _same(backend: Any, texts: list[str], encoded: list[Any]) -> bool:
    return all((ids.tolist(), offsets.tolist()) == _whole(backend, text) for (ids, offsets), text in zip(encoded, texts))


def test_a_piece_still_on_its_way_is_reused_by_the_chunks_queued_behind_it(qwen_tokenizer: Any) -> None:
    backend = qwen_tokenizer.backend_tokenizer
    encoder = PieceEncoder()
    first, second, third = _texts("a", 1), _texts("b", 3), _texts("c", 3)
    with EncodeQueue(qwen_tokenizer, encoder) as queue:
        checked = queue.submit(first)  # the backend's first chunk: encoded and checked at once
        assert checked is not None and checked.done() and checked.job is None
        assert _same(backend, first, queue.result(checked))
        # the system prompt met a second time: encoded in the second chunk's job, which the third one,
        # planned before the second is collected, uses too
        two, three = queue.submit(second), queue.submit(third)
        assert two is not None and three is not None and two.job is not None and three.job is not None
        assert len(two.job.fresh) == 1 and not three.job.fresh
        assert SYSTEM[len("<|im_start|>"):-len("<|im_end|>\n")] in encoder._pending
        assert _same(backend, second, queue.result(two)) and _same(backend, third, queue.result(three))
        # the tokenizer's encodings are handed back once read (freed on the thread, before its next call)
        assert two.job.fast_out == [] == three.job.fast_out and two.job.slow_out == [] == three.job.slow_out
    assert not encoder._pending and len(encoder._pieces) == 1 and not queue._spent


def test_tickets_are_collected_in_the_order_they_were_submitted(qwen_tokenizer: Any) -> None:
    with EncodeQueue(qwen_tokenizer, PieceEncoder()) as queue:
        one, two = queue.submit(_texts("a", 2)), queue.submit(_texts("b", 2))
        assert one is not None and two is not None
        with pytest.raises(RuntimeError, match="in the order they were submitted"):
            queue.result(two)
        queue.result(one)
        queue.result(two)


def test_a_failed_batch_leaves_no_piece_waiting_for_a_job_that_never_finishes(qwen_tokenizer: Any) -> None:
    backend = qwen_tokenizer.backend_tokenizer
    encoder = PieceEncoder()
    with pytest.raises(ValueError, match="the render failed"), EncodeQueue(qwen_tokenizer, encoder) as queue:
        queue.result(queue.submit(_texts("a", 1)))  # type: ignore[arg-type]
        queue.submit(_texts("b", 2))  # plans the system prompt as a fresh piece
        assert encoder._pending
        raise ValueError("the render failed")
    assert not encoder._pending
    texts = _texts("c", 2)
    with EncodeQueue(qwen_tokenizer, encoder) as queue:  # the next batch encodes the piece itself
        ticket = queue.submit(texts)
        assert ticket is not None and ticket.job is not None and ticket.job.fresh
        assert _same(backend, texts, queue.result(ticket))


def test_a_batchs_chunks_cover_its_rows_in_order_and_start_small() -> None:
    from whileai_datasets.tokenize.token_rows import RENDER_CHUNK, chunk_bounds

    for rows in (0, 1, 15, 16, 17, 111, 112, 113, 1000, 1001):
        bounds = chunk_bounds(rows)
        assert [i for start, end in bounds for i in range(start, end)] == list(range(rows))
        assert all(0 < end - start <= RENDER_CHUNK for start, end in bounds)
    sizes = [end - start for start, end in chunk_bounds(1000)]
    assert sizes[0] < sizes[1] < sizes[2] < sizes[3] == RENDER_CHUNK  # the encoding thread starts sooner
