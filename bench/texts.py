"""The texts of the bench's dumps, by kind, for the tokenizing cases:

- `paragraphs`: fw_assets.synthetic's own (Zipf-drawn words from a small vocabulary);
- `bigram`: word-bigram chains over English prose bundled with Python (its pydoc help topics):
  natural word statistics and no paragraph repeated, unlike texts assembled from a few words;
- `multiscript`: random words of 1-9 characters, each of one random script, which almost never
  repeat: no cache of pre-tokenized pieces helps.

Every kind keeps the synthetic generator's rows (ids, scores, urls, word counts) and replaces only
the text; every kind is deterministic by seed, dump and row.
"""

import re
import zlib
from functools import cache
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from fw_assets.paths import source_dump_dir
from fw_assets.synthetic import write_sample_dump
from fw_assets.synthetic.generator import (
    DEFAULT_MEDIAN_WORDS,
    DEFAULT_WORDS_SIGMA,
    ROW_GROUP_SIZE,
    file_row_ranges,
    sample_table,
    write_parquet_atomically,
)

PARAGRAPHS, BIGRAM, MULTISCRIPT = "paragraphs", "bigram", "multiscript"
TEXT_KINDS = (PARAGRAPHS, BIGRAM, MULTISCRIPT)

# Unicode blocks the multi-script words are drawn from: Latin, Greek, Cyrillic, Hebrew, Arabic,
# Devanagari, Thai, kana, CJK, Hangul, emoji.
SCRIPTS = np.array([
    (0x41, 0x7A), (0xC0, 0x24F), (0x370, 0x3FF), (0x400, 0x4FF), (0x5D0, 0x5EA), (0x620, 0x64A),
    (0x905, 0x939), (0xE01, 0xE30), (0x3041, 0x30FF), (0x4E00, 0x9FFF), (0xAC00, 0xD7A3), (0x1F300, 0x1F64F),
])
# Bigram chains walked side by side per row group: enough to vectorize the walk, few enough that
# each chain runs for hundreds of words.
CHAINS = 1024


def write_dump(root: Path, dump: str, rows: int, files: int, seed: int, texts: str,
               median_words: int = DEFAULT_MEDIAN_WORDS, words_sigma: float = DEFAULT_WORDS_SIGMA) -> None:
    """One FineWeb-shaped dump under `root/data/<dump>/` whose texts are of kind `texts`, their
    lengths the generator's (lognormal words, median `median_words`, sigma `words_sigma`)."""
    if texts == PARAGRAPHS:
        write_sample_dump(root, dump, rows, files, seed, median_words=median_words, words_sigma=words_sigma)
        return
    if texts not in TEXT_KINDS:
        raise ValueError(f"text kind is one of {TEXT_KINDS}, not {texts!r}")
    folder = source_dump_dir(root, dump)
    folder.mkdir(parents=True, exist_ok=True)
    for i, (start, stop) in enumerate(file_row_ranges(rows, files)):
        chunks = (
            _with_texts(
                sample_table(dump, lo, min(lo + ROW_GROUP_SIZE, stop), seed, 0.0, 0.0, 0.0, median_words,
                             words_sigma),
                texts,
                np.random.default_rng([seed, zlib.crc32(dump.encode()), lo, len(texts)]),
            )
            for lo in range(start, stop, ROW_GROUP_SIZE)
        )
        write_parquet_atomically(folder / f"train-{i:05d}-of-{files:05d}.parquet", chunks)


def _with_texts(table: pa.Table, texts: str, rng: np.random.Generator) -> pa.Table:
    """`table` with texts of kind `texts` of as many words as its own."""
    words = pc.list_value_length(pc.utf8_split_whitespace(table.column("text"))).to_numpy()
    made = bigram_texts(words, rng) if texts == BIGRAM else multiscript_texts(words, rng)
    return table.set_column(table.schema.get_field_index("text"), "text", pa.array(made, pa.string()))


def multiscript_texts(word_counts: np.ndarray, rng: np.random.Generator) -> list[str]:
    """Documents of these many words of 1-9 characters, each word of one random script."""
    lengths = rng.integers(1, 10, int(word_counts.sum()))
    blocks = SCRIPTS[rng.integers(0, len(SCRIPTS), lengths.size)].repeat(lengths, axis=0)
    letters = rng.integers(blocks[:, 0], blocks[:, 1] + 1)
    # a space after every word: its letters, then the space, all as one UTF-32 buffer decoded at once
    ends = np.cumsum(lengths + 1)
    points = np.full(int(ends[-1]) if ends.size else 0, ord(" "), np.uint32)
    is_letter = np.ones(points.size, bool)
    is_letter[ends - 1] = False
    points[is_letter] = letters
    return _split_documents(points.tobytes().decode("utf-32-le"), ends, word_counts)


def bigram_texts(word_counts: np.ndarray, rng: np.random.Generator) -> list[str]:
    """Documents of these many words, walked through the bigram model of `bigram_model()`."""
    words, successors, starts, counts = bigram_model()
    total = int(word_counts.sum())
    steps = -(-total // CHAINS)
    walk = np.empty((steps, CHAINS), np.int64)
    current = rng.integers(0, len(words), CHAINS)
    for step in range(steps):  # every chain one word further: the next word's share is the corpus's
        walk[step] = current
        current = successors[starts[current] + (rng.random(CHAINS) * counts[current]).astype(np.int64)]
    chosen = walk.T.reshape(-1)[:total]  # chain after chain
    ends = np.cumsum(word_counts)
    return [
        " ".join(words[i] for i in chosen[end - n : end].tolist())
        for end, n in zip(ends.tolist(), word_counts.tolist())
    ]


def _split_documents(text: str, word_ends: np.ndarray, word_counts: np.ndarray) -> list[str]:
    """`text` cut after the last word of each document (its trailing space dropped)."""
    ends = word_ends[np.cumsum(word_counts) - 1] if word_counts.size else word_ends[:0]
    starts = np.concatenate([[0], ends[:-1]])
    return [text[start : end - 1] for start, end in zip(starts.tolist(), ends.tolist())]


@cache
def bigram_model() -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    """Python's pydoc help topics (~65k words of English) as a bigram model: the words, every
    word's successors in the corpus grouped by word (with repeats, so a uniform draw among them is
    the bigram probability), and each word's start and count in that array (the last word's
    successor is the first)."""
    from pydoc_data.topics import topics

    corpus = re.findall(r"[A-Za-z][A-Za-z'’-]*[.,;:?!]?", " ".join(topics[key] for key in sorted(topics)))
    words, ids = np.unique(np.array(corpus), return_inverse=True)
    following = np.roll(ids, -1)
    order = np.argsort(ids, kind="stable")
    counts = np.bincount(ids, minlength=len(words))
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    return words.tolist(), following[order], starts, counts
