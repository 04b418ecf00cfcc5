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
        where = f"{self.id} ({self.dump}, bucket {self.bucket})"
        if self.keep:
            return f"{where} is kept."
        return (
            f"{where} is dropped as a near-duplicate of {self.duplicate_of} ({self.duplicate_of_dump}); "
            f"{self._how()}; estimated Jaccard {self.similarity:.3f}."
        )

    def _how(self) -> str:
        if self.shared_bands:
            return f"they share band(s) {', '.join(map(str, self.shared_bands))}"
        if self.duplicate_of_dump == self.dump:
            return (
                "they share no band themselves: other documents of this dump link them into one "
                "near-duplicate cluster, which keeps that one"
            )
        return (
            "they share no band themselves: another document of its cluster in this dump matched "
            "that earlier document (its cluster's best match), and the earliest crawl wins, so the "
            "whole cluster is dropped"
        )


def explain(
    con: duckdb.DuckDBPyConnection,
    doc_id: str,
    decisions: Mapping[str, Path],
    minhash_of: Callable[[str], Path],
) -> list[Explanation]:
    """Every decision about `doc_id` in the dumps' decision files (dump -> path), in crawl order,
    with the bands shared with its match read from the minhash files (`minhash_of(dump)`); empty
    if no decision file holds it."""
    dump_of = {str(path): dump for dump, path in decisions.items()}
    rows = con.execute(
        load_sql("dedup_explain_decision"), {"files": list(dump_of), "id": doc_id}
    ).fetchall()
    explanations = []
    for filename, bucket, keep, duplicate_of, duplicate_of_dump, similarity in rows:
        dump = dump_of[filename]
        shared: tuple[int, ...] = ()
        if not keep:
            own = _band_keys(con, minhash_of(dump), doc_id)
            other = _band_keys(con, minhash_of(duplicate_of_dump), duplicate_of)
            shared = tuple(i for i, (a, b) in enumerate(zip(own, other)) if a == b)
        explanations.append(Explanation(
            doc_id, dump, bucket, keep, duplicate_of, duplicate_of_dump, similarity, shared
        ))
    return sorted(explanations, key=lambda e: e.dump)  # dump keys sort in crawl order


def _band_keys(con: duckdb.DuckDBPyConnection, path: Path, doc_id: str) -> list[int]:
    rows = con.execute(load_sql("dedup_band_keys"), {"path": str(path), "id": doc_id}).fetchall()
    return (rows[0][0] or []) if rows else []
