"""The built-in probe: an interpolated Kneser-Ney bigram model over a dump's own tokens.

Reference sample (deterministic, documented in the README): a document belongs to reference half
A when `xxh64(id, seed=REFERENCE_SEED) % REFERENCE_GROUPS == 0`, to half B when it is 1. Each half
is its documents' tokens, buckets in policy order, documents in id order, cut after
`REFERENCE_TOKENS` tokens. Model A is fitted on half A, model B on half B; a document of half A is
scored by model B, every other document by model A, so no document is scored by a model that saw
it. A dump's losses are relative to that dump's own text: gibberish and unusual registers stand out.

    P(w | v) = max(c(v,w) - D, 0) / c(v) + D * N1+(v,.) / c(v) * Pcont(w)      (c(v) > 0)
    P(w | v) = Pcont(w)                                                        (c(v) = 0)
    Pcont(w) = (N1+(.,w) + ALPHA) / (N1+(.,.) + ALPHA * V)

The first token of a document is predicted from the end-of-document token (the one before it).
Everything is vectorised numpy: one `searchsorted` per token.
"""

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import xxhash

from fw_assets.lib.compiled import pack_pairs

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


def reference_halves(ids: list[str]) -> np.ndarray:
    """Per id: 0 (half A), 1 (half B) or -1 (not in the reference sample)."""
    groups = np.fromiter(
        (xxhash.xxh64_intdigest(i.encode(), seed=REFERENCE_SEED) % REFERENCE_GROUPS for i in ids),
        np.int64, len(ids),
    )
    return np.where(groups < 2, groups, -1)


@dataclass(frozen=True)
class BigramModel:
    """Counts of one reference half, ready to score with."""

    pairs: np.ndarray  # sorted packed (v << 32 | w) bigrams seen
    pair_counts: np.ndarray  # c(v, w), float64
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
        previous, following = (pairs >> np.uint64(32)).astype(np.int64), (pairs & np.uint64(0xFFFFFFFF)).astype(np.int64)
        context_counts = np.bincount(previous, weights=counts, minlength=vocab_size)
        followers = np.bincount(previous, minlength=vocab_size).astype(np.float64)
        seen_after = np.bincount(following, minlength=vocab_size).astype(np.float64)
        continuation = (seen_after + ALPHA) / (len(pairs) + ALPHA * vocab_size)
        return cls(pairs, counts.astype(np.float64), context_counts, followers, continuation)

    def negative_log_likelihoods(self, tokens: np.ndarray, previous: np.ndarray) -> np.ndarray:
        """-ln P(token | previous) per token (nats)."""
        tokens, previous = tokens.astype(np.int64), previous.astype(np.int64)
        keys = pack_pairs(previous, tokens)
        at = np.minimum(np.searchsorted(self.pairs, keys), max(len(self.pairs) - 1, 0))
        seen = self.pairs[at] == keys if len(self.pairs) else np.zeros(len(keys), bool)
        pair = np.where(seen, self.pair_counts[at] if len(self.pairs) else 0.0, 0.0)
        context = self.context_counts[previous]
        continuation = self.continuation[tokens]
        with np.errstate(divide="ignore", invalid="ignore"):
            smoothed = (np.maximum(pair - DISCOUNT, 0.0) + DISCOUNT * self.followers[previous] * continuation) / context
        return -np.log(np.where(context > 0, smoothed, continuation))


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
