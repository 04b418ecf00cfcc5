"""Shingling (fw_assets.dedup.shingling): the definition's normalisation and words, and the
compiled pass giving exactly the shingles of the Arrow path (the definition), so minhash files
written before it stay valid."""

from __future__ import annotations

import string

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fw_assets.dedup import signature_files
from fw_assets.dedup.minhash_policy import MINHASH_POLICY
from fw_assets.dedup.shingling import shingles
from fw_assets.dedup.shingling.definition import arrow_shingles, normalise, words
from fw_assets.dedup.shingling.fused import fused_pass
from fw_assets.paths import minhash_files
from fw_assets.synthetic.generator import sample_table
from fw_assets_tests.support.dedup_texts import BASE, VARIANTS

DUMP = "CC-MAIN-2013-20"


def assert_same_shingles(texts: list[str | None] | pa.Array, ngrams=(1, 2, 5)) -> None:
    texts = texts if isinstance(texts, (pa.Array, pa.ChunkedArray)) else pa.array(texts, pa.string())
    for n in ngrams:
        fused, arrow = shingles(texts, n), arrow_shingles(texts, n)
        assert np.array_equal(fused.offsets, arrow.offsets), f"{n}-grams: other counts"
        differing = np.flatnonzero(fused.hashes != arrow.hashes)
        assert not len(differing), f"{n}-grams: {len(differing)} hashes differ"


def test_normalisation_folds_case_punctuation_digits_accents_and_whitespace():
    (normalised,) = normalise(pa.array(["Café, 3.14 and 1,000 NAÏVE—words!\u00a0Done"])).to_pylist()
    assert normalised.split() == [
        "cafe", "0", "and", "0", "naive", "words", "done",
    ]
    hashes, offsets = words(pa.array([BASE, *VARIANTS]))
    per_doc = [hashes[offsets[i] : offsets[i + 1]] for i in range(len(offsets) - 1)]
    assert all(np.array_equal(per_doc[0], other) for other in per_doc[1:])


def left_to_arrow(texts: list[str]) -> set[str]:
    _, rows = fused_pass(pa.array(texts, pa.string()), 1)
    return {texts[row] for row in rows}


def test_every_ascii_character_number_and_spacing_shingles_alike():
    characters = [chr(c) for c in range(128)]
    texts = [f"ab{c}cd 1{c}2 {c}x{c}{c} Y{c}9" for c in characters]
    texts += [
        "3.14.15 and 1,000 and 1,000,000 or 2.5. 7, 8 .5 ,6 1..2 1,.2 a1.b 1.x x.1 0.0.0.0 12ab34",
        "", " ", "\t\n ", "  leading and trailing  ", "one", "two words", "four words in all",
        "exactly five words right here", "Mixed CASE, punctuation!!! and\x00controls\x7f too",
        "tab\tseparated\vvertical\fform\rreturn\x1cfile\x1fsep", None, "  \x0b\x0c  ",
    ]
    assert_same_shingles(texts)
    assert not left_to_arrow([t for t in texts if t is not None])


def test_random_ascii_shingles_alike():
    rng = np.random.default_rng(14)
    weighted = string.ascii_letters + string.digits * 3 + " " * 12 + ".,,..\t\n" + string.punctuation
    alphabet = np.array(list(weighted + "\x00\x1f\x7f"))
    texts = ["".join(rng.choice(alphabet, rng.integers(0, 300))) for _ in range(3000)]
    assert_same_shingles(texts)


def test_generated_sample_texts_shingle_alike_and_all_in_the_fused_pass():
    texts = sample_table(DUMP, 0, 1500)["text"]
    assert_same_shingles(texts, ngrams=(5,))
    assert not len(fused_pass(texts, 5)[1])


def test_every_code_point_below_u30000_shingles_alike_between_letters_and_digits():
    code_points = [c for c in range(0x80, 0x30000) if not 0xD800 <= c < 0xE000]
    texts = [f"a{c}b 1{c}2 {c} x {c}{c}é{c}\u0301z 3{c}y Q{c}" for c in map(chr, code_points)]
    assert_same_shingles(texts, ngrams=(1,))  # one word a shingle: every word compared
    _, left = fused_pass(pa.array(texts), 1)
    assert len(left) < 0.005 * len(texts)  # the compiled pass handles nearly every code point
    left_code_points = {chr(code_points[row]) for row in left}
    assert not left_code_points & set("’‘“”—–…«»·•€£©°±×é中あ한ß\u00a0\u200b\u0301😀")


def test_random_mixes_of_scripts_marks_punctuation_and_emoji_shingle_alike():
    pieces = list(
        "aeiouAEIOU éÉèçÇñÑüÜøØåÅßẞİıΣσςΑΩωЖжЯя中文字日本語あアカ한국어가각ءأبةت١٢٣٫،٬"
        "0123456789.,;:!?'\"()[]{}-_/\\@#%&*+=<>|~^`’‘“”„—–…«»·•€£¥©®°±×÷§¶"
        "\u0301\u0300\u0308\u0323\u0327\u0345\u0334\u05b0\u0610\u1dc0\u20d7\u093f\u0940\u0903"
        "😀👍🏽🇫🇷\u200d\ufe0f\u200b\u00ad\u2060\u00a0\u2003\u3000\u2028\u2029\u0085 \t\n"
        "ﬁﬀĲǅǈẞΐΰ\u1e9e\u2126\u212a\u212b\u0130\U0001d400\U00010400\U0001f600"
    )
    rng = np.random.default_rng(5)
    texts = ["".join(rng.choice(pieces, rng.integers(0, 120))) for _ in range(4000)]
    assert_same_shingles(texts)
    assert not left_to_arrow(texts)  # all of them in the compiled pass


def test_documents_with_a_context_dependent_code_point_take_the_arrow_path_and_match():
    # U+0897 (Arabic pepet) is a mark NFD reorders that the normalisation keeps; code points
    # above plane 2 (but tags) have no table entry; invalid UTF-8
    # never reaches Arrow kernels, which refuse it, but the pass leaves such bytes to them.
    reordered = "xa\u0897\u0301b the quick brown fox jumps"
    untabulated = "CJK extension G \U00030000 and private use \U000f0000 \U0010ffff"
    plain, accented = "the quick brown fox jumps over", "Ünïcödé wörds àre fïne hère tôo"
    texts = [plain, reordered, accented, reordered, untabulated]
    assert left_to_arrow(texts) == {reordered, untabulated}
    assert_same_shingles(texts)
    invalid = pa.Array.from_buffers(
        pa.string(), 2, [None, pa.py_buffer(np.array([0, 3, 6], np.int32)), pa.py_buffer(b"ab\xffcde")]
    )
    assert list(fused_pass(invalid, 1)[1]) == [0]


def test_the_minhash_file_of_a_sample_dump_is_byte_identical_to_the_arrow_paths(tmp_path, monkeypatch):
    table = sample_table(DUMP, 0, 3000)
    extra = ["Ünïcödé “quoted” text — with 3,5 numbers and ‘marks’ é\u0301 here and there"] * 10
    extra.append("xa\u0897\u0301b a document the compiled pass leaves to the Arrow path")
    texts = pa.concat_arrays([table["text"].combine_chunks(), pa.array(extra)])
    ids = [f"<urn:uuid:{i:08d}>" for i in range(len(texts))]
    pq.write_table(pa.table({"id": ids, "text": texts, "score": [3.0] * len(texts)}), tmp_path / "b.parquet")
    sources = [("3.0", tmp_path / "b.parquet")]

    def written(name: str) -> list[bytes]:
        output = tmp_path / f"{name}.parquet"
        signature_files.write_minhash_file(
            duckdb.connect(), sources, output, DUMP, MINHASH_POLICY, threads=2, batch_rows=500
        )
        return [path.read_bytes() for path in minhash_files(output)]

    fused = written("fused")
    monkeypatch.setattr(signature_files, "shingles", arrow_shingles)
    assert fused == written("arrow")


@pytest.mark.parametrize("n", [1, 5])
def test_chunked_sliced_and_large_strings_shingle_alike(n):
    texts = sample_table(DUMP, 0, 300)["text"]
    sliced = texts.combine_chunks().slice(17, 200)
    for variant in (texts, sliced, sliced.cast(pa.large_string()), pa.chunked_array([], pa.string())):
        assert_same_shingles(variant, ngrams=(n,))


def test_a_document_has_the_same_words_in_any_batch(tmp_path):
    """Words do not depend on the batch a document is read in, first or last in it."""
    texts = sample_table(DUMP, 0, 999)["text"]  # three batches of 333
    pq.write_table(pa.table({"text": texts}), tmp_path / "texts.parquet")
    batches = pq.ParquetFile(tmp_path / "texts.parquet").iter_batches(333)
    alone = {}
    for batch in batches:
        hashes, offsets = words(batch.column("text"))
        for i in (0, 1, batch.num_rows - 2, batch.num_rows - 1):
            text = batch.column("text")[i].as_py()
            alone[text] = words(pa.array([text]))[0]
            assert np.array_equal(hashes[offsets[i] : offsets[i + 1]], alone[text])
    assert len(alone) == 12
