"""Parallel, deterministic, bounded-memory encoding of text batches into token arrays.

Each worker process loads the tokenizer once and encodes one whole batch per task; batches come
back in input order, so the tokens are the same bytes at any worker count. At most
2 × workers batches are in flight, so memory does not grow with the input.

Worker processes import only this module's light dependencies (numpy, tiktoken, fastokens,
tokenizers), never Dagster: keep it that way, every worker pays for its imports when it starts.
A worker encoding with a fast backend holds no tiktoken: this process, which holds it for the
run-time sample anyway, self-checks the workers' backend (tiktoken's tables are ~45 MB a process).

A worker encodes each batch in a thread of its own, then hands the freed memory back to the system:
fastokens caches pieces per thread, with no knob to cap them, and on text whose words never repeat
they grew to ~450 MB a worker (tiktoken's to ~140 MB); a batch's thread takes its caches with it
(measured: ~185 MB at most for fastokens, ~40 MB for tiktoken, ~10 % slower on such text only).
"""

import ctypes
import ctypes.util
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import cache
from multiprocessing import get_context
from typing import TypeVar

import numpy as np

from fw_assets.lib.indexed_dataset import optimal_token_dtype
from fw_assets.tokenizing.backends import (
    AUTO,
    SELF_CHECK_TEXTS,
    TIKTOKEN_BACKEND,
    BackendMismatch,
    fallback_warning,
    open_backend,
    self_check_failure,
)
from fw_assets.tokenizing.tokenizer import TIKTOKEN, Tokenizer, TokenizerSpec


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


@dataclass(frozen=True)
class Encoder:
    """What a worker needs to encode documents: its texts' tokens, the EOD token, the vocabulary
    size (the token dtype), and what encodes (`warning`: why `auto` fell back to tiktoken)."""

    encode_arrays: Callable[[Sequence[str]], list[np.ndarray]]
    eod_id: int
    vocab_size: int
    backend: str
    backend_version: str
    backend_warning: str | None


@dataclass(frozen=True)
class EncoderSpec:
    """How a worker builds its Encoder: the tokenizer, and the EOD id and vocabulary size this
    process read from tiktoken, so that a worker encoding with another backend needs no tiktoken."""

    tokenizer: TokenizerSpec
    eod_id: int
    vocab_size: int

    def load(self) -> Encoder:
        if self.tokenizer.kind != TIKTOKEN:
            loaded = self.tokenizer.load()
            return Encoder(
                loaded.encode_arrays, loaded.eod_id, loaded.vocab_size, loaded.backend,
                loaded.backend_version, loaded.backend_warning,
            )
        backend, warning = open_backend(self.tokenizer.backend, self.tokenizer.name)
        return Encoder(backend.encode_arrays, self.eod_id, self.vocab_size, backend.name, backend.version, warning)


def encode_with_eod(tokenizer: Tokenizer | Encoder, texts: Sequence[str]) -> EncodedBatch:
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
        self._encoder: Encoder | None = None
        self._pool: ProcessPoolExecutor | None = None
        reference = spec.reference().load()  # tiktoken, in this process only
        self._start(EncoderSpec(spec, reference.eod_id, reference.vocab_size))
        self._backend = self._self_checked(reference)

    def _start(self, encoder: EncoderSpec) -> None:
        if self.workers == 1:
            self._encoder = encoder.load()
            return
        # spawn, not fork: the caller (a Dagster step) may hold threads and locks a fork would copy
        self._pool = ProcessPoolExecutor(
            self.workers,
            mp_context=get_context("spawn"),
            initializer=_start_worker,
            initargs=(encoder, os.getpid()),
        )

    def _self_checked(self, reference: Tokenizer) -> tuple[str, str, str | None]:
        """The workers' backend (name, version, warning) once it encoded SELF_CHECK_TEXTS as
        tiktoken; an `auto` backend that does not is replaced by tiktoken, with a warning."""
        name, version, warning, encoded = self._loaded_backend()
        oracle = reference.oracle()
        tiktoken_itself = name == TIKTOKEN_BACKEND and self.spec.backend in (AUTO, TIKTOKEN_BACKEND)
        if oracle is None or tiktoken_itself:
            return name, version, warning
        failure = self_check_failure(name, encoded, oracle)
        if failure is None:
            return name, version, warning
        self.close()
        if self.spec.backend != AUTO:
            raise BackendMismatch(failure)
        fallback = replace(self.spec, backend=TIKTOKEN_BACKEND)
        self._start(EncoderSpec(fallback, reference.eod_id, reference.vocab_size))
        name, version, _, _ = self._loaded_backend()
        return name, version, fallback_warning(self.spec.name, BackendMismatch(failure))

    def _loaded_backend(self) -> "BackendCheck":
        """What encodes where the documents are encoded (a worker, or this process)."""
        if self._pool is None:
            assert self._encoder is not None
            return _backend_of(self._encoder)
        return self._pool.submit(_worker_backend).result()

    def backend(self) -> tuple[str, str, str | None]:
        """What encodes, self-checked: backend name, version, and the warning of an `auto` that
        fell back to tiktoken (each worker chooses alike; any choice is exact)."""
        return self._backend

    def encode(self, text_batches: Iterable[Sequence[str]]) -> Iterator[EncodedBatch]:
        """Encode each batch of texts, yielding results in input order."""
        if self._encoder is not None:
            return (encode_with_eod(self._encoder, texts) for texts in text_batches)
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
            self._pool = None

    def __enter__(self) -> "ParallelEncoder":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


PARENT_WATCH_SECONDS = 1.0
_Result = TypeVar("_Result")

# The encoder of this worker process, loaded once by the pool's initializer, or why it failed to.
_worker_encoder: Encoder | Exception | None = None


def _start_worker(encoder: EncoderSpec, parent: int) -> None:
    global _worker_encoder
    _exit_with_parent(parent)
    try:
        _worker_encoder = encoder.load()
        _return_freed_memory()  # what loading the vocabulary used and freed (~10 MB)
    except Exception as error:  # raised by every task instead: an initializer's error says nothing
        _worker_encoder = error


def _loaded_encoder() -> Encoder:
    if isinstance(_worker_encoder, Exception):
        raise _worker_encoder
    assert _worker_encoder is not None, "the pool initializer loads the encoder"
    return _worker_encoder


def _exit_with_parent(parent: int) -> None:
    """A run killed with kill -9 (or by the OOM killer) cannot stop its workers, and an idle worker
    never notices on its own: it would wait for work forever, holding its tokenizer's memory. So each
    worker watches its parent and exits once it is gone (it is then re-parented)."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_WATCH_SECONDS)
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


# backend name, version, warning, and its tokens of SELF_CHECK_TEXTS
BackendCheck = tuple[str, str, str | None, list[np.ndarray]]


def _backend_of(encoder: Encoder) -> BackendCheck:
    return (
        encoder.backend, encoder.backend_version, encoder.backend_warning,
        encoder.encode_arrays(SELF_CHECK_TEXTS),
    )


def _worker_backend() -> BackendCheck:
    return _in_own_thread(_backend_of, _loaded_encoder())


def _encode_in_worker(texts: Sequence[str]) -> EncodedBatch:
    return _in_own_thread(encode_with_eod, _loaded_encoder(), texts)


def _in_own_thread(function: Callable[..., _Result], *arguments: object) -> _Result:
    """`function(*arguments)` in a thread of its own, whose caches end with it, their memory
    handed back to the system."""
    with ThreadPoolExecutor(1, thread_name_prefix="encode") as thread:
        result = thread.submit(function, *arguments).result()
    _return_freed_memory()
    return result


def _return_freed_memory() -> None:
    """Hand the heap's free pages back to the system, where the C library keeps them (glibc's
    malloc_trim; elsewhere nothing to do)."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@cache
def _malloc_trim() -> Callable[[int], int] | None:
    libc = ctypes.util.find_library("c")
    return getattr(ctypes.CDLL(libc), "malloc_trim", None) if libc else None
