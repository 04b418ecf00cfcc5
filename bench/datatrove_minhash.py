"""datatrove 0.10's own four MinHash stages, as the dedup benchmarks and the e2e test run them.

Its defaults (word 5-grams split by spaCy, 14 x 8) or fw_assets' n-grams and bands: the same
normalisation split on whitespace, MINHASH_POLICY's 5-grams and 16 x 7, 64-bit hashes. Whether
the words are the same is measured, not assumed:

    python -m bench.datatrove_minhash

prints, per Unicode category, the characters that split a word in one and not in the other.
"""

import argparse
import sys
import unicodedata
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from datatrove.pipeline.dedup.minhash import (
    MinhashConfig,
    MinhashDedupBuckets,
    MinhashDedupCluster,
    MinhashDedupFilter,
    MinhashDedupSignature,
)
from datatrove.pipeline.readers import ParquetReader
from datatrove.pipeline.writers import ParquetWriter
from datatrove.utils.hashing import HashConfig
from datatrove.utils.text import simplify_text
from datatrove.utils.typeshelper import Languages
from datatrove.utils.word_tokenizers import WordTokenizer

from fw_assets.dedup.minhash_policy import MINHASH_POLICY
from fw_assets.dedup.shingling.definition import hash_strings, words


class WhitespaceWords(WordTokenizer):
    """Words as fw_assets' shingles split the normalised text: on whitespace. Passed to
    MinhashDedupSignature in place of its spaCy tokenizer (~90 % of that stage's CPU)."""

    def word_tokenize(self, text: str) -> list[str]:
        return text.split()

    def sent_tokenize(self, text: str) -> list[str]:
        raise NotImplementedError("words only: MinhashDedupSignature calls word_tokenize alone")

    def span_tokenize(self, text: str) -> list[tuple[int, int]]:
        raise NotImplementedError("words only: MinhashDedupSignature calls word_tokenize alone")


def _id_only(writer: ParquetWriter, document) -> dict:
    return {"id": document.id}


def datatrove_pipelines(data: Path, work: Path, tasks: int, same_ngrams: bool = False) -> list[tuple[list, int]]:
    """The four stages over every row under `data` taken together, as (steps, tasks) in order;
    `tasks` reader tasks in the signature and filter stages. The kept ids go to `work/kept`."""
    config, words = MinhashConfig(), Languages.english
    if same_ngrams:
        config = MinhashConfig(
            n_grams=MINHASH_POLICY.ngram, num_buckets=MINHASH_POLICY.bands,
            hashes_per_bucket=MINHASH_POLICY.rows, hash_config=HashConfig(precision=64),
        )
        words = WhitespaceWords()

    def reader():
        return ParquetReader(str(data), recursive=True, text_key="text", id_key="id", read_metadata=False)

    kept = ParquetWriter(str(work / "kept"), adapter=_id_only)  # writing the texts again is no decision
    return [
        ([reader(), MinhashDedupSignature(str(work / "sigs"), config=config, language=words)], tasks),
        ([MinhashDedupBuckets(str(work / "sigs"), str(work / "buckets"), config=config)], config.num_buckets),
        ([MinhashDedupCluster(str(work / "buckets"), str(work / "remove"), config=config)], 1),
        ([reader(), MinhashDedupFilter(str(work / "remove")), kept], tasks),
    ]


def kept_ids(work: Path) -> set[str]:
    """The ids the filter stage of `datatrove_pipelines(data, work, ...)` kept."""
    return set(pq.read_table(work / "kept")["id"].to_pylist())


def texts_whose_words_differ(texts: Sequence[str]) -> list[int]:
    """Positions of the texts whose words differ: datatrove's `simplify_text` split on whitespace
    against the words fw_assets' shingles are made of (both hashed with fw_assets' word hash)."""
    ours, offsets = words(pa.array(texts, pa.string()))
    differ = []
    for i, text in enumerate(texts):
        theirs = hash_strings(pa.array(simplify_text(text).split(), pa.string()))
        if not np.array_equal(ours[offsets[i] : offsets[i + 1]], theirs):
            differ.append(i)
    return differ


def main(argv: list[str] | None = None) -> None:
    """Each assigned code point below U+20000 between two letters ("ab?cd"), counted per category
    where the two normalisations split it differently."""
    argparse.ArgumentParser(
        prog="python -m bench.datatrove_minhash",
        description="Print, per Unicode category, the characters that split a word in datatrove's "
        "normalisation and not in fw_assets' (or the reverse); takes no arguments.",
    ).parse_args(argv)
    by_category: dict[str, list[str]] = {}
    for code in range(0x20000):
        category = unicodedata.category(chr(code))
        if category not in ("Cn", "Co", "Cs"):
            by_category.setdefault(category, []).append(chr(code))
    print("| category | characters | split differently | examples |")
    print("|---|--:|--:|---|")
    for category, chars in sorted(by_category.items()):
        differ = [chars[i] for i in texts_whose_words_differ([f"ab{c}cd" for c in chars])]
        if differ:
            examples = " ".join(f"U+{ord(c):04X} {c}" for c in differ[:6])
            print(f"| {category} | {len(chars):,} | {len(differ):,} | {examples} |")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
