"""Encoding on a background thread while the caller renders: only the Rust calls leave the caller's thread."""

from __future__ import annotations

from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self

from whileai_datasets.tokenize.token_encode import Encoded, EncodeJob, PieceEncoder, backend_of, encode_texts

__all__ = ["EncodeQueue", "Ticket"]


@dataclass(eq=False)
class Ticket:
    """A chunk queued on an ``EncodeQueue``: its future, and its job when the encoder planned one."""

    future: Future[Any]
    job: EncodeJob | None = None

    def done(self) -> bool:
        return self.future.done()


class EncodeQueue:
    """Encodes chunks of texts on one background thread, in order, while the caller renders the next chunk.

    The tokenizer's Rust code runs without the GIL, so on two cores a batch's
    encoding overlaps its Jinja rendering instead of following it. Only the
    Rust calls run on the thread (``EncodeJob.run``): the ``PieceEncoder``'s
    Python work (cutting texts into pieces, offsets from lengths, joining) is
    done on the caller's thread, in ``submit`` and ``result``. So the thread
    asks for the GIL only around its calls, and the Rust side is not left idle
    while it waits for the GIL to do Python work between them. A backend's
    first chunk is encoded (and checked) at once. The thread lives only inside
    ``with`` (none is left running when ``datasets`` forks its workers).

    The tokenizer's encodings of a collected chunk are freed on the thread too,
    before its next call: their memory comes from the tokenizer's own threads'
    allocator arenas, and freeing it on the caller's thread, while those threads
    allocate for the next chunk, waited on the arenas' locks with the GIL held
    (a tenth of the caller's time on Llama 3.1's rows, sampled with py-spy).
    """

    def __init__(self, tokenizer: Any, encoder: PieceEncoder) -> None:
        self._tokenizer, self._encoder, self._backend = tokenizer, encoder, backend_of(tokenizer)
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="wai-encode")
        self._open: deque[Ticket] = deque()
        self._spent: deque[Any] = deque()  # encodings already read, freed on the thread (``_run``)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._pool.shutdown(wait=True, cancel_futures=error is not None)
        self._spent.clear()  # the tokenizer's threads are idle now
        if self._open:  # chunks never collected: their pieces never arrive
            self._encoder.forget_pending()

    def submit(self, texts: list[str]) -> Ticket | None:
        """Queue ``texts`` for encoding (None for no text); ``result`` gives their (ids, offsets)."""
        if not texts:
            return None
        backend = self._backend
        if backend is None:  # a transformers tokenizer called as it is: all of it on the thread
            ticket = Ticket(self._pool.submit(encode_texts, self._tokenizer, texts, self._encoder))
        elif not self._encoder.checked(backend):
            ticket = Ticket(Future())
            ticket.future.set_result(self._encoder.encode(backend, texts))
        else:
            job = self._encoder.plan(backend, texts)
            ticket = Ticket(self._pool.submit(self._run, job), job)
        self._open.append(ticket)
        return ticket

    def result(self, ticket: Ticket) -> list[Encoded]:
        """The (ids, offsets) of a ticket's texts, waiting for them; tickets are collected in submit order."""
        if not self._open or self._open[0] is not ticket:
            raise RuntimeError("EncodeQueue.result: tickets are collected in the order they were submitted")
        self._open.popleft()
        done = ticket.future.result()
        if ticket.job is None:
            return done
        out = self._encoder.finish(done)
        self._spent.append(done.release())
        return out

    def _run(self, job: EncodeJob) -> EncodeJob:
        """On the thread: free what the caller has read (the tokenizer's threads are idle), then encode."""
        while self._spent:
            self._spent.popleft()
        return job.run()
