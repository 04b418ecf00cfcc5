"""Parallel, deterministic, bounded-memory encoding of text batches into token arrays.

A backend that encodes on threads of its own (fastokens) runs in this process, on as many threads as
there are workers: the texts and tokens never cross a process boundary (piping ~4 bytes a token back
cost more than fastokens' encoding of it). Any other encodes in `workers` processes, each loading the
tokenizer once and encoding one whole batch per task. Either way a batch is encoded while the caller
reads the next one and writes the last one, batches come back in input order, so the tokens are the
same bytes at any worker count, and at most 2 batches a worker are in flight, so memory does not
grow with the input. The end-of-document token is not in the encoded batch: the token file's writer
adds it.

Worker processes import only this module's light dependencies (numpy, tiktoken, tokenizers), never
Dagster: keep it that way, every worker pays for its imports when it starts. A worker process
encodes each batch in a thread of its own, then hands the freed memory back to the system: tiktoken
caches pieces per thread (it grew to ~140 MB a worker on text whose words never repeat; ~40 MB so).
fastokens caps its caches (~150 MB a thread at most, its source says), so its threads keep them.
"""

import ctypes
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from functools import partial
from multiprocessing import get_context
from typing import TypeVar

import numpy as np

from fw_assets.formats.indexed_dataset import as_token_dtype, optimal_token_dtype
from fw_assets.lib.libc import libc_function
from fw_assets.tokenizing.backends import (
    AUTO,
    SELF_CHECK_TEXTS,
    TIKTOKEN_BACKEND,
    BackendMismatch,
    fallback_warning,
    flat,
    open_backend,
    self_check_failure,
)
from fw_assets.tokenizing.tokenizer import TIKTOKEN, Tokenizer, TokenizerSpec


@dataclass(frozen=True)
class EncodedBatch:
    """A batch's documents as one token array in the token files' dtype plus each document's
    length (no end-of-document token: the token file's writer adds it).

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
    """What encodes documents: their tokens back to back with each one's length, the vocabulary
    size (the token dtype), what encodes (`warning`: why `auto` fell back to tiktoken), and
    `encodes_in_threads(n)`: whether it encodes on n threads of its own in this process."""

    encode_flat: Callable[[Sequence[str]], tuple[np.ndarray, np.ndarray]]
    vocab_size: int
    backend: str
    backend_version: str
    backend_warning: str | None
    encodes_in_threads: Callable[[int], bool]


@dataclass(frozen=True)
class EncoderSpec:
    """How a process builds its Encoder: the tokenizer, and the vocabulary size this process read
    from tiktoken, so that a worker encoding with another backend needs no tiktoken."""

    tokenizer: TokenizerSpec
    vocab_size: int

    def load(self) -> Encoder:
        if self.tokenizer.kind != TIKTOKEN:
            loaded = self.tokenizer.load()
            return Encoder(
                lambda texts: flat(loaded.encode_arrays(texts)), loaded.vocab_size, loaded.backend,
                loaded.backend_version, loaded.backend_warning, lambda threads: False,
            )
        backend, warning = open_backend(self.tokenizer.backend, self.tokenizer.name)
        return Encoder(
            backend.encode_flat, self.vocab_size, backend.name, backend.version, warning,
            backend.encodes_in_threads,
        )


def encode_batch(encoder: Encoder, texts: Sequence[str]) -> EncodedBatch:
    """Encode `texts` in this thread, as the token files' dtype (refusing an id it cannot hold)."""
    tokens, lengths = encoder.encode_flat(texts)
    return EncodedBatch(as_token_dtype(tokens, optimal_token_dtype(encoder.vocab_size)), lengths)


class ParallelEncoder:
    """The tokenizer on `workers` cores, reused for every call of `encode`: in this process when
    its backend encodes on threads of its own (or `workers` is 1), else in `workers` processes.

    Start it once per run, not once per file: each worker loads the tokenizer when it starts.
    It starts on a thread of its own, while the caller goes on (loading fastokens takes ~0.4 s,
    without the GIL): `backend()`, `placement()` and `encode()` wait for it and raise what failed
    it. Use it as a context manager; leaving it stops the workers.
    """

    def __init__(self, spec: TokenizerSpec, workers: int = 1) -> None:
        if workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers}")
        self.spec = spec
        self.workers = workers
        self._encoder: Encoder | None = None  # set when this process encodes
        self._executor: ThreadPoolExecutor | ProcessPoolExecutor | None = None
        starter = ThreadPoolExecutor(1, thread_name_prefix="encoder-start")
        self._starting = starter.submit(self._start_self_checked)
        starter.shutdown(wait=False)  # its one thread ends with the task

    def _start_self_checked(self) -> tuple[str, str, str | None]:
        reference = self.spec.reference().load()  # tiktoken, in this process only
        self._start(EncoderSpec(self.spec, reference.vocab_size))
        return self._self_checked(reference)

    def _start(self, spec: EncoderSpec) -> None:
        # only a tiktoken encoding's backend may encode on threads of its own: a tokenizer.json
        # for processes is not loaded here too
        encoder = spec.load() if self.workers == 1 or spec.tokenizer.kind == TIKTOKEN else None
        if encoder is not None and (self.workers == 1 or encoder.encodes_in_threads(self.workers)):
            self._encoder = encoder
            # one thread: the next batch is encoded while the caller writes this one
            self._executor, self._in_flight = ThreadPoolExecutor(1, thread_name_prefix="encode"), 2
            return
        # spawn, not fork: the caller (a Dagster step) may hold threads and locks a fork would copy
        self._in_flight = 2 * self.workers
        self._executor = ProcessPoolExecutor(
            self.workers,
            mp_context=get_context("spawn"),
            initializer=_start_worker,
            initargs=(spec, os.getpid()),
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
        self._stop()
        if self.spec.backend != AUTO:
            raise BackendMismatch(failure)
        self._start(EncoderSpec(replace(self.spec, backend=TIKTOKEN_BACKEND), reference.vocab_size))
        name, version, _, _ = self._loaded_backend()
        return name, version, fallback_warning(self.spec.name, BackendMismatch(failure))

    def _loaded_backend(self) -> "BackendCheck":
        """What encodes where the documents are encoded (this process, or a worker)."""
        if self._encoder is not None:
            return _backend_of(self._encoder)
        assert self._executor is not None
        return self._executor.submit(_worker_backend).result()

    def placement(self) -> str:
        """Where the documents are encoded, in words."""
        self._starting.result()
        if self._encoder is not None and self.workers > 1:
            return f"on {self.workers} threads of this process"
        return "in this process" if self._encoder is not None else f"in {self.workers} processes"

    def backend(self) -> tuple[str, str, str | None]:
        """What encodes, self-checked: backend name, version, and the warning of an `auto` that
        fell back to tiktoken (each worker chooses alike; any choice is exact)."""
        return self._starting.result()

    def encode(self, text_batches: Iterable[Sequence[str]]) -> Iterator[EncodedBatch]:
        """Encode each batch of texts, yielding results in input order."""
        self._starting.result()
        assert self._executor is not None, "encode before close"
        executor = self._executor
        task = partial(encode_batch, self._encoder) if self._encoder is not None else _encode_in_worker
        in_flight: deque[Future[EncodedBatch]] = deque()
        try:
            for texts in text_batches:
                in_flight.append(executor.submit(task, texts))
                if len(in_flight) >= self._in_flight:
                    yield in_flight.popleft().result()
            while in_flight:
                yield in_flight.popleft().result()
        finally:
            # also runs when the consumer stops early: its queued batches are not encoded
            for future in in_flight:
                future.cancel()

    def close(self) -> None:
        wait([self._starting])  # what failed it is raised by the calls that needed it
        self._stop()

    def _stop(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(cancel_futures=True)
            self._executor = self._encoder = None

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
        EncodedBatch(*encoder.encode_flat(SELF_CHECK_TEXTS)).documents(),
    )


def _worker_backend() -> BackendCheck:
    return _in_own_thread(_backend_of, _loaded_encoder())


def _encode_in_worker(texts: Sequence[str]) -> EncodedBatch:
    return _in_own_thread(encode_batch, _loaded_encoder(), texts)


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
    trim = libc_function("malloc_trim", (ctypes.c_size_t,))
    if trim is not None:
        trim(0)
