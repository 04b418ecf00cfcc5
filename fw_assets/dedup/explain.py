"""Why a document was kept or dropped: its dump, its match, the bands they share, the similarity."""

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import duckdb

from fw_assets.lib.sql import load_sql


@dataclass(frozen=True)
class Explanation:
    id: str
    dump: str
    bucket: str
    keep: bool
    duplicate_of: str | None
    duplicate_of_dump: str | None
    similarity: float | None
    shared_bands: tuple[int, ...]  # empty when it was dropped only through its cluster

    def describe(self) -> str:
        if self.keep:
            return f"{self.id} ({self.dump}, bucket {self.bucket}) is kept."
        how = (
            f"they share band(s) {', '.join(map(str, self.shared_bands))}" if self.shared_bands
            else "they share no band: it was dropped with its cluster, which matched"
        )
        return (
            f"{self.id} ({self.dump}, bucket {self.bucket}) is dropped as a near-duplicate of "
            f"{self.duplicate_of} ({self.duplicate_of_dump}); {how}; "
            f"estimated Jaccard {self.similarity:.3f}."
        )


def explain(
    con: duckdb.DuckDBPyConnection,
    doc_id: str,
    decisions: Mapping[str, Path],
    minhash_of: Callable[[str], Path],
) -> Explanation | None:
    """The decision about `doc_id` from the dumps' decision files (dump -> path) and their minhash
    files (`minhash_of(dump)`); None if no decision file holds it."""
    dump_of = {str(path): dump for dump, path in decisions.items()}
    rows = con.execute(
        load_sql("dedup_explain_decision"), {"files": list(dump_of), "id": doc_id}
    ).fetchall()
    if not rows:
        return None
    filename, bucket, keep, duplicate_of, duplicate_of_dump, similarity = rows[0]
    dump = dump_of[filename]
    shared: tuple[int, ...] = ()
    if not keep:
        own = _band_keys(con, minhash_of(dump), doc_id)
        other = _band_keys(con, minhash_of(duplicate_of_dump), duplicate_of)
        shared = tuple(i for i, (a, b) in enumerate(zip(own, other)) if a == b)
    return Explanation(
        doc_id, dump, bucket, keep, duplicate_of, duplicate_of_dump, similarity, shared
    )


def _band_keys(con: duckdb.DuckDBPyConnection, path: Path, doc_id: str) -> list[int]:
    rows = con.execute(load_sql("dedup_band_keys"), {"path": str(path), "id": doc_id}).fetchall()
    return (rows[0][0] or []) if rows else []
