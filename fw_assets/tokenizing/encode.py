"""Parallel, deterministic, bounded-memory encoding of text batches into token arrays.

Each worker process loads the tokenizer once and encodes one whole batch per task; batches come
back in input order, so the tokens are the same bytes at any worker count. At most
2 × workers batches are in flight, so memory does not grow with the input.

Worker processes import only this module's light dependencies (numpy, tiktoken, fastokens,
tokenizers), never Dagster: keep it that way, every worker pays for its imports when it starts.
"""

import os
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context

import numpy as np

from fw_assets.lib.indexed_dataset import optimal_token_dtype
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


def encode_with_eod(tokenizer: Tokenizer, texts: Sequence[str]) -> EncodedBatch:
    """Encode `texts` in this process, appending the EOD token to every document."""
    dtype = optimal_token_dtype(tokenizer.vocab_size)
    eod = np.array([tokenizer.eod_id], dtype=dtype)
    encoded = tokenizer.encode_arrays(texts)
    lengths = np.fromiter((len(ids) + 1 for ids in encoded), dtype=np.int64, count=len(encoded))
    if not encoded:
        return EncodedBatch(np.empty(0, dtype), lengths)
    # One concatenate of [doc, eod, doc, eod, ...], no per-token Python work. The cast cannot
    # wrap: every id is below vocab_size, which the dtype was chosen to hold.
    parts = [part for ids in encoded for part in (ids, eod)]
    return EncodedBatch(np.concatenate(parts, dtype=dtype, casting="unsafe"), lengths)


class ParallelEncoder:
    """The tokenizer in `workers` processes (1: in this one), reused for every call of `encode`.

    Start it once per run, not once per file: each worker loads the tokenizer when it starts.
    Use it as a context manager; leaving it stops the workers.
    """

    def __init__(self, spec: TokenizerSpec, workers: int = 1) -> None:
        if workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers}")
        self.spec = spec
        self.workers = workers
        self._tokenizer: Tokenizer | None = None
        self._pool: ProcessPoolExecutor | None = None
        if workers == 1:
            self._tokenizer = spec.load()
        else:
            # spawn, not fork: the caller (a Dagster step) may hold threads and locks a fork would copy
            self._pool = ProcessPoolExecutor(
                workers,
                mp_context=get_context("spawn"),
                initializer=_start_worker,
                initargs=(spec, os.getpid()),
            )

    def backend(self) -> tuple[str, str, str | None]:
        """What encodes, as a worker loaded it: backend name, version, and the warning of an
        `auto` that fell back to tiktoken (each worker chooses alike; any choice is exact)."""
        if self._tokenizer is not None:
            return _backend_of(self._tokenizer)
        assert self._pool is not None
        return self._pool.submit(_worker_backend).result()

    def encode(self, text_batches: Iterable[Sequence[str]]) -> Iterator[EncodedBatch]:
        """Encode each batch of texts, yielding results in input order."""
        if self._tokenizer is not None:
            return (encode_with_eod(self._tokenizer, texts) for texts in text_batches)
        return self._encode_in_pool(text_batches)

    def _encode_in_pool(self, text_batches: Iterable[Sequence[str]]) -> Iterator[EncodedBatch]:
        assert self._pool is not None
        in_flight: deque[Future[EncodedBatch]] = deque()
        try:
            for texts in text_batches:
                in_flight.append(self._pool.submit(_encode_in_worker, texts))
                if len(in_flight) >= 2 * self.workers:
                    yield in_flight.popleft().result()
            while in_flight:
                yield in_flight.popleft().result()
        finally:
            # also runs when the consumer stops early: its queued batches are not encoded
            for future in in_flight:
                future.cancel()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)

    def __enter__(self) -> "ParallelEncoder":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


PARENT_WATCH_SECONDS = 1.0

# The tokenizer of this worker process, loaded once by the pool's initializer, or why it failed to.
_worker_tokenizer: Tokenizer | Exception | None = None


def _start_worker(spec: TokenizerSpec, parent: int) -> None:
    global _worker_tokenizer
    _exit_with_parent(parent)
    try:
        _worker_tokenizer = spec.load()
    except Exception as error:  # raised by every task instead: an initializer's error says nothing
        _worker_tokenizer = error


def _loaded_tokenizer() -> Tokenizer:
    if isinstance(_worker_tokenizer, Exception):
        raise _worker_tokenizer
    assert _worker_tokenizer is not None, "the pool initializer loads the tokenizer"
    return _worker_tokenizer


def _exit_with_parent(parent: int) -> None:
    """A run killed with kill -9 (or by the OOM killer) cannot stop its workers, and an idle worker
    never notices on its own: it would wait for work forever, holding its tokenizer's memory. So each
    worker watches its parent and exits once it is gone (it is then re-parented)."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_WATCH_SECONDS)
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def _backend_of(tokenizer: Tokenizer) -> tuple[str, str, str | None]:
    return tokenizer.backend, tokenizer.backend_version, tokenizer.backend_warning


def _worker_backend() -> tuple[str, str, str | None]:
    return _backend_of(_loaded_tokenizer())


def _encode_in_worker(texts: Sequence[str]) -> EncodedBatch:
    return encode_with_eod(_loaded_tokenizer(), texts)
