"""MinHash the algorithm: signatures, LSH band keys and similarity estimates of shingled documents.

Named for what it does, signing, so that "minhash" means one thing in the package: the asset
(`minhash.py`, in the UI). The files it writes are signature_files.py's.

Permutation p maps a shingle hash x to `a[p] * x + b[p]` modulo 2^64 (a odd, so a bijection);
a document's hash p is the least image of its shingles. The loop is compiled: it is the classic
k-permutation MinHash at the speed of the shingling (bench/minhash_candidates.py).
"""

import numpy as np

from fw_assets.dedup.minhash_policy import MinhashPolicy
from fw_assets.dedup.shingling import Shingles, fmix64
from fw_assets.lib.compiled import compiled_lazily

EMPTY = np.uint64(2**64 - 1)  # hash of a document without shingles (fewer words than the n-gram)
_BAND_MULTIPLIER = np.uint64(0xC2B2AE3D27D4EB4F)


def permutations(policy: MinhashPolicy) -> tuple[np.ndarray, np.ndarray]:
    """The (a, b) of every permutation; numpy's legacy RandomState keeps the stream stable."""
    state = np.random.RandomState(policy.seed)
    a = state.randint(0, 2**63, policy.permutations, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    b = state.randint(0, 2**63, policy.permutations, dtype=np.uint64)
    return a, b


@compiled_lazily
def _least_images(hashes, offsets, a, b):  # pragma: no cover - compiled
    """(documents, permutations): each document's least image of its shingle `hashes`
    (`hashes[offsets[i]:offsets[i + 1]]` are document i's) under every permutation (a, b)."""
    out = np.full((len(offsets) - 1, len(a)), np.uint64(2**64 - 1), np.uint64)
    for doc in range(len(offsets) - 1):
        row = out[doc]
        for i in range(offsets[doc], offsets[doc + 1]):
            x = hashes[i]
            for p in range(len(a)):
                image = x * a[p] + b[p]
                if image < row[p]:
                    row[p] = image
    return out


def signatures_of(shingles: Shingles, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(documents, permutations) uint64; rows of documents without shingles are all EMPTY."""
    return _least_images(shingles.hashes, shingles.offsets, a, b)


def band_keys(signatures: np.ndarray, policy: MinhashPolicy) -> np.ndarray:
    """(documents, bands) uint64: each band's rows hashed with the band's number, so that keys of
    different bands never meet in a join on the key alone."""
    bands = signatures.reshape(len(signatures), policy.bands, policy.rows)
    keys = np.broadcast_to(np.arange(policy.bands, dtype=np.uint64), bands.shape[:2]).copy()
    for r in range(policy.rows):
        keys = fmix64(keys * _BAND_MULTIPLIER + bands[:, :, r])
    return keys


def compact(signatures: np.ndarray, bits: int) -> np.ndarray:
    """The low `bits` of every hash (b-bit MinHash), as stored for verification."""
    return signatures.astype(np.dtype(f"<u{bits // 8}"))


def estimated_jaccard(left: np.ndarray, right: np.ndarray, bits: int) -> np.ndarray:
    """Jaccard estimate of row pairs of b-bit signatures: the share of equal hashes, less the
    chance 2^-bits that two different least images agree in their low bits."""
    equal = np.mean(left == right, axis=-1)
    chance = 2.0**-bits
    return np.clip((equal - chance) / (1.0 - chance), 0.0, 1.0)
