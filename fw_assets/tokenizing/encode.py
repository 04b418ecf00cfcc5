"""Parallel, deterministic, bounded-memory encoding of text batches into token arrays.

Each worker process loads the tokenizer once and encodes one whole batch per task; batches come
back in input order, so the tokens are the same bytes at any worker count. At most
2 × workers batches are in flight, so memory does not grow with the input.
"""

from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from itertools import chain
from multiprocessing import get_context

import numpy as np

from fw_assets.tokenizing.indexed_dataset import optimal_token_dtype
from fw_assets.tokenizing.tokenizer import Tokenizer, TokenizerSpec


@dataclass(frozen=True)
class EncodedBatch:
    """A batch's documents as one token array plus each document's length (EOD included).

    Two arrays pickle cheaply between processes, unlike lists of Python ints.
    """

    tokens: np.ndarray
    lengths: np.ndarray

    def documents(self) -> list[np.ndarray]:
        """Each document's tokens, as views into `tokens`."""
        ends = np.cumsum(self.lengths)
        return [self.tokens[end - length : end] for end, length in zip(ends, self.lengths)]


def encode_with_eod(tokenizer: Tokenizer, texts: list[str]) -> EncodedBatch:
    """Encode `texts` in this process, appending the EOD token to every document."""
    encoded = tokenizer.encode_batch(texts)
    eod = (tokenizer.eod_id,)
    lengths = np.fromiter((len(ids) + 1 for ids in encoded), dtype=np.int64, count=len(encoded))
    tokens = np.fromiter(
        chain.from_iterable(chain(ids, eod) for ids in encoded),
        dtype=optimal_token_dtype(tokenizer.vocab_size),
        count=int(lengths.sum()),
    )
    return EncodedBatch(tokens, lengths)


def encode_batches(
    text_batches: Iterable[list[str]], spec: TokenizerSpec, workers: int = 1
) -> Iterator[EncodedBatch]:
    """Encode each batch of texts, yielding results in input order.

    `workers` = 1 encodes in this process; more start that many worker processes.
    """
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    if workers == 1:
        return _encode_in_process(text_batches, spec)
    return _encode_in_pool(text_batches, spec, workers)


def encode_documents(
    text_batches: Iterable[list[str]], spec: TokenizerSpec, workers: int = 1
) -> Iterator[np.ndarray]:
    """Each document's tokens (EOD appended) in input order; see `encode_batches`."""
    for batch in encode_batches(text_batches, spec, workers):
        yield from batch.documents()


def _encode_in_process(
    text_batches: Iterable[list[str]], spec: TokenizerSpec
) -> Iterator[EncodedBatch]:
    tokenizer = spec.load()
    for texts in text_batches:
        yield encode_with_eod(tokenizer, texts)


def _encode_in_pool(
    text_batches: Iterable[list[str]], spec: TokenizerSpec, workers: int
) -> Iterator[EncodedBatch]:
    # spawn, not fork: the caller (a Dagster step) may hold threads and locks a fork would copy
    pool = ProcessPoolExecutor(
        workers,
        mp_context=get_context("spawn"),
        initializer=_load_worker_tokenizer,
        initargs=(spec,),
    )
    in_flight: deque[Future[EncodedBatch]] = deque()
    try:
        for texts in text_batches:
            in_flight.append(pool.submit(_encode_in_worker, texts))
            if len(in_flight) >= 2 * workers:
                yield in_flight.popleft().result()
        while in_flight:
            yield in_flight.popleft().result()
    finally:
        # also runs when the consumer stops early: queued batches are dropped, not encoded
        pool.shutdown(cancel_futures=True)


# The tokenizer of this worker process, loaded once by the pool's initializer.
_worker_tokenizer: Tokenizer | None = None


def _load_worker_tokenizer(spec: TokenizerSpec) -> None:
    global _worker_tokenizer
    _worker_tokenizer = spec.load()


def _encode_in_worker(texts: list[str]) -> EncodedBatch:
    assert _worker_tokenizer is not None, "the pool initializer loads the tokenizer"
    return encode_with_eod(_worker_tokenizer, texts)
