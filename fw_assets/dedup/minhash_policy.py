"""The near-duplicate policy of record (docs/near-duplicates.md#the-policy): MinHash-LSH parameters, rule settings.

Like the sampling policy, every value that decides a dedup decision lives here. The signature
fingerprint covers what the `minhash` files depend on (and is stored in each file); the full
fingerprint adds the decision settings and is the code version of `deduplicated`.
"""

import hashlib
import json
from dataclasses import asdict, dataclass
from enum import StrEnum

import numpy as np

from fw_assets import settings


class Scope(StrEnum):
    ACROSS_DUMPS = "across_dumps"  # earlier dumps win, then one per cluster within the dump
    WITHIN_DUMP = "within_dump"  # FineWeb's choice: each dump deduplicated on its own
    OFF = "off"  # every document kept


# Version of the text normalisation and shingle hashing (fw_assets.dedup.shingling) and of the band
# hashing (fw_assets.dedup.signing); bump it when either changes, so files written before are
# refused as "another policy".
SHINGLING_VERSION = 1
# Version of the `minhash` file's columns (fw_assets.dedup.signature_files): with `text_start`, the
# signatures and sorted keys in Arrow files beside it with a digest per column, and the content
# version (fw_assets.dedup.content_versions) in the sorted keys file. Bump it when they change, so
# that files written before are refused by the same fingerprint check.
MINHASH_FILE_VERSION = 5


@dataclass(frozen=True)
class MinhashPolicy:
    ngram: int = 5  # words per shingle
    # 16 x 7 = 112 hashes, as datatrove's 14 x 8 but finer: a pair at Jaccard 0.8 is a candidate
    # with probability 0.977 (14 x 8: 0.924), at 0.7 0.747 (0.565); verification keeps precision.
    bands: int = 16
    rows: int = 7  # hashes per band; bands x rows permutations of 64 bits
    seed: int = 1  # draws the permutations
    signature_bits: int = 16  # low bits of each hash kept for verification (b-bit MinHash)
    verify_threshold: float = 0.65  # estimated Jaccard a candidate pair needs to count
    # Within a dump, the documents sharing a band key are verified against its least id, those
    # failing against the least id among them, and so on, for at most this many anchors a key: g
    # mutually unlike pages under one key (pages sharing a boilerplate paragraph) cost at most
    # g x anchor_rounds comparisons, not g^2 / 2. On 3 generated dumps of 20,000 pages (keys held by
    # up to 95 pages) 32 anchors find all but 4 of the decisions unbounded rounds change (59).
    anchor_rounds: int = 32
    scope: Scope = Scope.ACROSS_DUMPS
    drop_share_warning: float = 0.30  # per bucket, a larger dropped share warns

    def __post_init__(self):
        sizes_ok = min(self.ngram, self.bands, self.rows, self.anchor_rounds) >= 1
        if not sizes_ok or self.signature_bits not in (8, 16, 32):
            raise ValueError(f"bad MinHash policy: {self}")
        if not 0.0 < self.verify_threshold <= 1.0 or not 0.0 < self.drop_share_warning <= 1.0:
            raise ValueError(f"thresholds must be in (0, 1]: {self}")
        object.__setattr__(self, "scope", Scope(self.scope))

    @property
    def permutations(self) -> int:
        return self.bands * self.rows

    @property
    def signature_dtype(self) -> np.dtype:
        """One b-bit hash of a stored signature, as numpy reads it."""
        return np.dtype(f"<u{self.signature_bits // 8}")

    @property
    def signature_bytes(self) -> int:
        return self.permutations * self.signature_dtype.itemsize

    def candidate_probability(self, jaccard: float) -> float:
        """Chance that a pair at this Jaccard similarity shares at least one band key."""
        return 1.0 - (1.0 - jaccard**self.rows) ** self.bands

    def signature_fingerprint(self) -> str:
        """Hash of what a `minhash` file's contents depend on; stored in the file's metadata."""
        spec = {
            "ngram": self.ngram, "bands": self.bands, "rows": self.rows, "seed": self.seed,
            "signature_bits": self.signature_bits, "shingling": SHINGLING_VERSION,
            "file": MINHASH_FILE_VERSION,
        }
        return _short_hash(spec)

    def fingerprint(self) -> str:
        """Hash of every value of the policy: the code version of the dedup decisions."""
        spec = {**asdict(self), "scope": str(self.scope), "shingling": SHINGLING_VERSION}
        return _short_hash(spec)


def _short_hash(spec: dict) -> str:
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:12]


MINHASH_POLICY = MinhashPolicy(scope=Scope(settings.dedup_scope()))
