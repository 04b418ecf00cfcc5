"""The compiled pass of the shingling: one pass over each document's UTF-8 bytes that normalises,
splits, hashes words and combines n-grams as the definition (definition.py) does.

Its functions are compiled when the module is imported (they call one another, so each must be
compiled before its callers): it is imported only when a batch is shingled (fused.py), so that
loading the code location does not load LLVM (fw_assets_tests/test_structure.py).
"""

import numpy as np

from fw_assets.dedup.shingling.code_points import DIGIT, FALLBACK, WORD
from fw_assets.dedup.shingling.definition import BYTE_BASE, MULTIPLIER, fmix64
from fw_assets.lib.compiled import compiled

_ZERO, _ONE = np.uint64(0), np.uint64(1)
_FOLDED_DIGITS = np.uint64(ord("0") + 1)  # a number's one byte, `0`, as a polynomial term
_fmix64 = compiled(fmix64)  # the numpy function, compiled for one hash at a time


@compiled
def _decode(data, i, end):
    """The code point starting at data[i] and its length in bytes; -1 if not valid UTF-8."""
    first = np.int64(data[i])
    if first < 0x80:
        return first, 1
    if first < 0xC2 or first > 0xF4:
        return -1, 1
    size = 2 if first < 0xE0 else 3 if first < 0xF0 else 4
    if i + size > end:
        return -1, 1
    code_point = first & (0x7F >> size)
    for j in range(i + 1, i + size):
        byte = np.int64(data[j])
        if byte & 0xC0 != 0x80:
            return -1, 1
        code_point = (code_point << 6) | (byte & 0x3F)
    shortest = 0x800 if size == 3 else 0x10000 if size == 4 else 0x80
    if code_point < shortest or code_point > 0x10FFFF or 0xD800 <= code_point < 0xE000:
        return -1, 1
    return code_point, size


@compiled
def _digits_end(data, i, end, kinds):
    while i < end:
        code_point, size = _decode(data, i, end)
        if code_point < 0 or kinds[code_point] != DIGIT:
            break
        i += size
    return i


@compiled
def _number_end(data, i, end, kinds, separators):
    """Where the number starting at digit data[i] ends: its digit run, then a separator and a
    second run if one follows (what the DIGITS regex matches, greedily)."""
    i = _digits_end(data, i, end, kinds)
    if i < end:
        code_point, size = _decode(data, i, end)
        if code_point >= 0 and separators[code_point] and i + size < end:
            after, _ = _decode(data, i + size, end)
            if after >= 0 and kinds[after] == DIGIT:
                i = _digits_end(data, i + size, end, kinds)
    return i


@compiled
def shingle_documents(data, offsets, valid, n, kinds, separators, word_offsets, word_bytes):
    """(shingle hashes, shingles per document, documents left to the Arrow path: no shingles)."""
    documents = len(offsets) - 1
    hashes = np.empty(max((offsets[-1] - offsets[0]) // 4, 64), np.uint64)
    counts = np.zeros(documents, np.int64)
    fallback = np.zeros(documents, np.bool_)
    tables = (kinds, separators, word_offsets, word_bytes, _letter_terms(kinds, word_offsets, word_bytes))
    window = np.zeros(n, np.uint64)
    position = 0
    for document in range(documents):
        begin, end = offsets[document], offsets[document + 1]
        # Room for the most shingles a document can have, one a word and a word two bytes with
        # the space after it; grown here, not per shingle, which would slow the loop by half.
        most = (end - begin + 1) // 2
        if position + most > len(hashes):
            hashes = np.concatenate((hashes, np.empty(len(hashes) + most, np.uint64)))
        if valid[document]:
            written = _shingle_document(data, begin, end, tables, window, hashes[position:])
            fallback[document] = written < 0
            counts[document] = max(written, 0)
            position += counts[document]
    return hashes[:position], counts, fallback


@compiled
def _letter_terms(kinds, word_offsets, word_bytes):
    """The term (byte + 1) an ASCII letter adds to its word's hash, 0 for any other byte."""
    terms = np.zeros(0x100, np.uint64)
    for code_point in range(0x80):
        if kinds[code_point] == WORD and word_offsets[code_point + 1] == word_offsets[code_point] + 1:
            terms[code_point] = word_bytes[word_offsets[code_point]] + _ONE
    return terms


@compiled
def _shingle_document(data, i, end, tables, window, out):
    """Write the shingles of data[i:end] to `out`: how many, or -1 if the document is left to
    the Arrow path (a FALLBACK code point, invalid UTF-8)."""
    kinds, separators, word_offsets, word_bytes, letter_terms = tables
    n, written, words = len(window), 0, 0
    word, power, length = _ZERO, _ONE, 0
    # The n-gram of the last n words (`window`, the oldest at `slot`), rolled: times the
    # multiplier, plus the new word, less the word leaving times multiplier^n (exact modulo 2^64).
    combined, slot, leaving = _ZERO, 0, _ONE
    for _ in range(n):
        leaving *= MULTIPLIER
    window[:] = 0
    while i <= end:
        size = 1
        if i < end:
            term = letter_terms[data[i]]
            if term:  # the common case, quickly
                power *= BYTE_BASE
                word += term * power
                length += 1
                i += 1
                continue
            code_point = np.int64(data[i])
            if code_point >= 0x80:
                code_point, size = _decode(data, i, end)
            kind = FALLBACK if code_point < 0 else kinds[code_point]
            if kind == FALLBACK:
                return -1
            if kind == WORD:
                for j in range(word_offsets[code_point], word_offsets[code_point + 1]):
                    power *= BYTE_BASE
                    word += (word_bytes[j] + _ONE) * power
                length += word_offsets[code_point + 1] - word_offsets[code_point]
                i += size
                continue
            if kind == DIGIT:
                power *= BYTE_BASE
                word += _FOLDED_DIGITS * power
                length += 1
                i = _number_end(data, i, end, kinds, separators)
                continue
        # A space or the document's end completes the word so far.
        if length:
            word = _fmix64(word ^ np.uint64(length))
            combined = combined * MULTIPLIER + word - window[slot] * leaving
            window[slot] = word
            slot = slot + 1 if slot + 1 < n else 0
            words += 1
            if words >= n:
                out[written] = _fmix64(combined)
                written += 1
            word, power, length = _ZERO, _ONE, 0
        i += size
    return written
