"""The sampling policy of record (docs/sampling.md): score buckets, keep rates and the hash seed.

Every value that decides which rows are kept lives here, and its fingerprint is the code version
of the assets that apply it, so changing the policy marks their materializations stale.
"""

import hashlib
import json
import math
from dataclasses import dataclass


@dataclass(frozen=True)
class ScoreBucket:
    """A left-closed score interval [low, high) kept at `rate`."""

    low: float
    high: float
    rate: float

    @property
    def name(self) -> str:
        """Folder name of the bucket, as the seed writes it: `2.8`, `3.0`, `3.5`, `4.0`."""
        return str(self.low)

    def contains(self, score: float | None) -> bool:
        return score is not None and self.low <= score < self.high


@dataclass(frozen=True)
class SamplingPolicy:
    """Buckets in ascending order; rows scoring below the first bucket are dropped."""

    seed: int
    buckets: tuple[ScoreBucket, ...]

    def bucket_for(self, score: float | None) -> ScoreBucket | None:
        return next((bucket for bucket in self.buckets if bucket.contains(score)), None)

    def hash_key(self, doc_id: str, bucket: ScoreBucket) -> str:
        """The md5 input of the seed's sampler: Python's float spelling (`2.8`, `3.0`, `inf`)."""
        return f"{self.seed}_{doc_id}_{bucket.low}_{bucket.high}"

    def keeps(self, doc_id: str, score: float | None) -> bool:
        """Plain-Python reference of the sampler of record; the SQL must agree with it row for row."""
        bucket = self.bucket_for(score)
        if bucket is None:
            return False
        draw = int(hashlib.md5(self.hash_key(doc_id, bucket).encode()).hexdigest(), 16)
        return (draw % 10000) / 10000.0 < bucket.rate

    def rows(self) -> list[dict]:
        """The policy as rows for DuckDB: bucket name, bounds, rate and the bounds' hash spelling."""
        return [
            {
                "bucket": b.name,
                "low": b.low,
                "high": b.high,
                "rate": b.rate,
                "hash_prefix": f"{self.seed}_",
                "hash_suffix": f"_{b.low}_{b.high}",
            }
            for b in self.buckets
        ]

    def fingerprint(self) -> str:
        """Short stable hash of every value of the policy, used as the assets' code version."""
        spec = {"seed": self.seed, "buckets": [(b.low, b.high, b.rate) for b in self.buckets]}
        return hashlib.sha256(json.dumps(spec).encode()).hexdigest()[:12]


SEED_POLICY = SamplingPolicy(
    seed=42,
    buckets=(
        ScoreBucket(2.8, 3.0, 0.30),
        ScoreBucket(3.0, 3.5, 0.60),
        ScoreBucket(3.5, 4.0, 0.80),
        ScoreBucket(4.0, math.inf, 1.0),
    ),
)
