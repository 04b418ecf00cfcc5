"""The built-in probe: an interpolated Kneser-Ney bigram model over a dump's own tokens.

Reference sample (deterministic, documented in docs/probe-losses.md): a document belongs to reference half
A when `xxh64(id, seed=REFERENCE_SEED) % REFERENCE_GROUPS == 0`, to half B when it is 1. Each half
is its documents' tokens, buckets in policy order, documents in id order, cut after
`REFERENCE_TOKENS` tokens. Model A is fitted on half A, model B on half B; a document of half A is
scored by model B, every other document by model A, so no document is scored by a model that saw
it. A dump's losses are relative to that dump's own text: gibberish and unusual registers stand out.

    P(w | v) = max(c(v,w) - D, 0) / c(v) + D * N1+(v,.) / c(v) * Pcont(w)      (c(v) > 0)
    P(w | v) = Pcont(w)                                                        (c(v) = 0)
    Pcont(w) = (N1+(.,w) + ALPHA) / (N1+(.,.) + ALPHA * V)

The first token of a document is predicted from the end-of-document token (the one before it).
The seen bigrams' counts sit in an open-addressing hash table; scoring is one compiled loop over
the tokens (fw_assets.lib.compiled), a table probe each: ~5x a numpy `searchsorted`.
"""

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from fw_assets.lib.compiled import compiled_lazily, pack_pairs
from fw_assets.lib.string_hashes import xxh64_strings

DISCOUNT = 0.75  # D: the usual absolute discount for bigrams
ALPHA = 0.5  # add-alpha on continuation counts, so a token unseen in the reference has a probability
REFERENCE_SEED = 20_240_611
REFERENCE_GROUPS = 16  # each half is 1/16 of the dump's documents
REFERENCE_TOKENS = 4_000_000  # per half: bounds the fit's memory (~16 bytes per distinct bigram)
PARAMETERS = {
    "kind": "kneser_ney_bigram",
    "discount": DISCOUNT,
    "alpha": ALPHA,
    "reference_seed": REFERENCE_SEED,
    "reference_groups": REFERENCE_GROUPS,
    "reference_tokens": REFERENCE_TOKENS,
}
_EMPTY = np.uint64(0xFFFFFFFFFFFFFFFF)  # no bigram packs to this: token ids are below 2^32 - 1
_SPREAD = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing: the product's top bits pick the slot


def reference_halves(ids: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Per id: 0 (half A), 1 (half B) or -1 (not in the reference sample); the ids hashed over
    their Arrow buffers (lib/string_hashes: xxhash's xxh64, bit for bit)."""
    groups = (xxh64_strings(ids, seed=REFERENCE_SEED) % np.uint64(REFERENCE_GROUPS)).astype(np.int64)
    return np.where(groups < 2, groups, -1)


@dataclass(frozen=True)
class BigramModel:
    """Counts of one reference half, ready to score with."""

    table_keys: np.ndarray  # packed (v << 32 | w) bigrams seen, hashed into 2^table_bits slots
    table_counts: np.ndarray  # c(v, w) in the same slots
    table_bits: int
    context_counts: np.ndarray  # c(v), per token id
    followers: np.ndarray  # N1+(v, .), per token id
    continuation: np.ndarray  # Pcont(w), per token id

    @classmethod
    def fit(cls, documents: Iterator[np.ndarray], vocab_size: int, eod_id: int) -> "BigramModel":
        """Fit on documents (each ending with the end-of-document token)."""
        keys = [np.zeros(0, np.uint64)]
        for tokens in documents:
            tokens = tokens.astype(np.int64)
            keys.append(pack_pairs(np.concatenate([[eod_id], tokens[:-1]]), tokens))
        pairs, counts = np.unique(np.concatenate(keys), return_counts=True)
        previous = (pairs >> np.uint64(32)).astype(np.int64)
        following = (pairs & np.uint64(0xFFFFFFFF)).astype(np.int64)
        context_counts = np.bincount(previous, weights=counts, minlength=vocab_size)
        followers = np.bincount(previous, minlength=vocab_size).astype(np.float64)
        seen_after = np.bincount(following, minlength=vocab_size).astype(np.float64)
        continuation = (seen_after + ALPHA) / (len(pairs) + ALPHA * vocab_size)
        bits = max(int(np.ceil(np.log2(2 * len(pairs) + 1))), 4)  # at most half full
        table_keys, table_counts = _hash_table(pairs, counts.astype(np.float64), bits)
        return cls(table_keys, table_counts, bits, context_counts, followers, continuation)

    def negative_log_likelihoods(self, tokens: np.ndarray, previous: np.ndarray) -> np.ndarray:
        """-ln P(token | previous) per token (nats)."""
        return _negative_log_likelihoods(
            np.ascontiguousarray(tokens, np.int64), np.ascontiguousarray(previous, np.int64),
            self.table_keys, self.table_counts, self.table_bits,
            self.context_counts, self.followers, self.continuation, DISCOUNT,
        )


@compiled_lazily
def _hash_table(pairs, counts, bits):
    keys = np.full(1 << bits, _EMPTY, np.uint64)
    values = np.zeros(1 << bits, np.float64)
    mask = (1 << bits) - 1
    for i in range(len(pairs)):
        slot = np.int64((pairs[i] * _SPREAD) >> np.uint64(64 - bits))
        while keys[slot] != _EMPTY:
            slot = (slot + 1) & mask
        keys[slot] = pairs[i]
        values[slot] = counts[i]
    return keys, values


@compiled_lazily
def _negative_log_likelihoods(tokens, previous, keys, values, bits, context_counts, followers, continuation, discount):
    nll = np.empty(len(tokens), np.float64)
    mask = (1 << bits) - 1
    for i in range(len(tokens)):
        v, w = previous[i], tokens[i]
        context = context_counts[v]
        if context == 0:
            nll[i] = -np.log(continuation[w])
            continue
        key = (np.uint64(v) << np.uint64(32)) | np.uint64(w)
        slot = np.int64((key * _SPREAD) >> np.uint64(64 - bits))
        pair = 0.0
        while keys[slot] != _EMPTY:
            if keys[slot] == key:
                pair = values[slot]
                break
            slot = (slot + 1) & mask
        probability = (max(pair - discount, 0.0) + discount * followers[v] * continuation[w]) / context
        nll[i] = -np.log(probability)
    return nll


def document_losses(
    model: BigramModel, tokens: np.ndarray, lengths: np.ndarray, eod_id: int
) -> np.ndarray:
    """Summed NLL (nats) of each of consecutive documents (`tokens` back to back, each ending with
    the end-of-document token, `lengths` > 0)."""
    if not len(lengths):
        return np.zeros(0)
    previous = np.concatenate([[eod_id], tokens[:-1]])
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    return np.add.reduceat(model.negative_log_likelihoods(tokens, previous), starts)
