"""What the normalisation of the definition (definition.py) does to each code point, as lookup
tables for the compiled pass (kernel.py).

The tables are not a second definition: they are derived by running the Arrow kernels and
regexes of `normalise` and `words` on every code point, so both paths agree by construction.
Each code point, lower-cased, is a digit (folds into `0`, digit runs and a separator between two
runs included), a space (punctuation, symbols, controls and whitespace), or part of a word (its
NFD decomposition without nonspacing marks, as UTF-8 bytes; possibly none). A code point whose
effect depends on its neighbours is marked FALLBACK, and a document containing one is shingled
by the Arrow path: a lower case that is not one code point, a decomposition keeping a mark that
NFD would reorder against its neighbours (canonical combining class not 0), whitespace that
Arrow's split and trim do not treat alike; and every code point outside TABULATED.
"""

from dataclasses import dataclass
from functools import cache

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from fw_assets.dedup.shingling.definition import ACCENTS, DIGITS, PUNCTUATION, string_buffers

WORD, SPACE, DIGIT, FALLBACK = 0, 1, 2, 3
CODE_POINTS = 0x110000
# Code points with a table entry: planes 0-2 (letters, CJK, emoji) and 14 (tags, variation
# selectors), less the surrogates (never in valid UTF-8). Others (CJK extension G and later,
# private use) are FALLBACK: rare in web text, and the tables are built in a fifth of the time.
TABULATED = np.concatenate([np.arange(0, 0xD800), np.arange(0xE000, 0x30000), np.arange(0xE0000, 0xE1000)])
# Marks of the lowest and highest nonzero combining class: NFD moves a mark past one of them
# exactly when the mark's class is not 0.
_LOWEST_CLASS_MARK, _HIGHEST_CLASS_MARK = "\u0334", "\u0345"


@dataclass(frozen=True)
class CodePointTables:
    kinds: np.ndarray  # uint8 per code point: WORD, SPACE, DIGIT or FALLBACK
    separators: np.ndarray  # bool per code point: joins two digit runs into one number
    word_offsets: np.ndarray  # int64, code points + 1: word_bytes[word_offsets[c]:...[c + 1]]
    word_bytes: np.ndarray  # uint8: what a WORD code point adds to its word, UTF-8


@cache
def code_point_tables() -> CodePointTables:
    characters = _characters(TABULATED)
    lower = pc.utf8_lower(characters)
    digit = _equal(pc.replace_substring_regex(lower, DIGITS, "0"), "0")
    between_digits = _joined("1", lower, "1")
    separator = _equal(pc.replace_substring_regex(between_digits, DIGITS, "0"), "0") & ~digit
    space = _equal(pc.replace_substring_regex(lower, PUNCTUATION, " "), " ")
    kept = pc.replace_substring_regex(pc.utf8_normalize(lower, "NFD"), ACCENTS, "")
    kept_space, kept_word = _whitespace(kept)
    reordered = _keeps_a_reordered_mark(kept, characters)
    single = pc.equal(pc.utf8_length(lower), 1).to_numpy(zero_copy_only=False)

    kinds = np.full(len(TABULATED), FALLBACK, np.uint8)
    kinds[kept_word & ~reordered] = WORD
    kinds[space | kept_space] = SPACE
    kinds[digit] = DIGIT
    kinds[~single] = FALLBACK
    every_kind = np.full(CODE_POINTS, FALLBACK, np.uint8)
    every_kind[TABULATED] = kinds
    separators = np.zeros(CODE_POINTS, bool)
    separators[TABULATED] = separator & single
    words = kept.cast(pa.large_string())
    offsets = np.frombuffer(words.buffers()[1], np.int64)[: len(TABULATED) + 1]
    lengths = np.zeros(CODE_POINTS, np.int64)
    lengths[TABULATED] = np.diff(offsets)  # in code point order, as the bytes are
    word_offsets = np.concatenate([[0], np.cumsum(lengths)])
    word_bytes = np.frombuffer(words.buffers()[2], np.uint8)[: offsets[-1]].copy()
    return CodePointTables(every_kind, separators, word_offsets, word_bytes)


def _characters(code_points: np.ndarray) -> pa.Array:
    """Each code point as a one-character string."""
    data = code_points.astype(np.uint32).tobytes().decode("utf-32-le").encode()
    lengths = np.searchsorted([0x80, 0x800, 0x10000], code_points, side="right") + 1
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    buffers = [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    return pa.Array.from_buffers(pa.string(), len(code_points), buffers)


def _joined(before: str, strings: pa.Array, after: str) -> pa.Array:
    """`before + s + after` for each string s (pc.binary_join_element_wise, 20 x faster)."""
    data, offsets = string_buffers(strings)
    head, tail = np.frombuffer(before.encode(), np.uint8), np.frombuffer(after.encode(), np.uint8)
    joined_offsets = offsets + np.arange(len(offsets)) * (len(head) + len(tail))
    joined = np.empty(joined_offsets[-1], np.uint8)
    lengths = np.diff(offsets)
    body = np.arange(len(data)) + np.repeat(joined_offsets[:-1] - offsets[:-1] + len(head), lengths)
    joined[body] = data
    for k, byte in enumerate(head):
        joined[joined_offsets[:-1] + k] = byte
    for k, byte in enumerate(tail):
        joined[joined_offsets[1:] - len(tail) + k] = byte
    buffers = [None, pa.py_buffer(joined_offsets), pa.py_buffer(joined)]
    return pa.Array.from_buffers(pa.large_string(), len(strings), buffers)


def _equal(strings: pa.Array, value: str) -> np.ndarray:
    return pc.equal(strings, value).to_numpy(zero_copy_only=False)


def _whitespace(kept: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """Which kept strings are all whitespace and which have none, alike for Arrow's split (between
    two letters) and trim; anything else is neither."""
    between = _joined("a", kept, "a")
    pieces = pc.list_value_length(pc.utf8_split_whitespace(between)).to_numpy()
    trimmed = pc.utf8_trim_whitespace(kept)
    nonempty = pc.greater(pc.utf8_length(kept), 0).to_numpy(zero_copy_only=False)
    all_space = (pieces == 2) & _equal(trimmed, "") & nonempty
    no_space = (pieces == 1) & pc.equal(trimmed, kept).to_numpy(zero_copy_only=False)
    return all_space, no_space


def _keeps_a_reordered_mark(kept: pa.Array, characters: pa.Array) -> np.ndarray:
    """Kept strings holding a character of nonzero combining class (one NFD reorders against
    its neighbours): harmless for the marks the normalisation removes, not for the others."""
    alone = pc.utf8_normalize(characters, "NFD")
    after = pc.utf8_normalize(_joined("", characters, _LOWEST_CLASS_MARK), "NFD")
    before = pc.utf8_normalize(_joined(_HIGHEST_CLASS_MARK, characters, ""), "NFD")
    moved = pc.invert(pc.and_(
        pc.equal(after, _joined("", alone, _LOWEST_CLASS_MARK)),
        pc.equal(before, _joined(_HIGHEST_CLASS_MARK, alone, "")),
    ))
    removed = _equal(pc.replace_substring_regex(characters, ACCENTS, ""), "")
    marks = TABULATED[moved.to_numpy(zero_copy_only=False) & ~removed]
    if not len(marks):
        return np.zeros(len(kept), bool)
    pattern = "[" + "".join(f"\\x{{{mark:x}}}" for mark in marks) + "]"
    return pc.match_substring_regex(kept, pattern).to_numpy(zero_copy_only=False)
