"""Dedup decisions of one dump, from its minhash file and the minhash files of earlier dumps.

The rule, decided from signatures only, so that it does not depend on the order dumps are
processed in nor on the thread count:
1. A candidate pair (a shared band key) counts only if its estimated Jaccard reaches the policy's
   verify_threshold. Verified pairs within the dump join documents into clusters (union-find).
2. A cluster is dropped whole if any member matches a document of an earlier dump. A member with
   its own earlier match points at its best (highest similarity; ties: earliest dump, then least
   id); the others point at the best match of their cluster.
3. Otherwise the cluster keeps its highest-scoring document (ties: least id); the others point
   at it.
"""

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa

from fw_assets.dedup.minhash_file import MinhashFileError, check_minhash_file
from fw_assets.dedup.policy import MinhashPolicy, Scope
from fw_assets.dedup.row_groups import write_in_row_groups
from fw_assets.dedup.signatures import estimated_jaccard
from fw_assets.lib.sql import load_sql

DECISION_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("bucket", pa.string()),
        ("keep", pa.bool_()),
        ("duplicate_of", pa.string()),
        ("duplicate_of_dump", pa.string()),
        ("similarity", pa.float64()),
    ]
)
DROP_SCHEMA = pa.schema(
    [DECISION_SCHEMA.field(c) for c in ("id", "duplicate_of", "duplicate_of_dump", "similarity")]
)
POLICY_KEY = b"fw_assets.dedup.fingerprint"
DUMP_KEY = b"fw_assets.dedup.dump"
ROW_GROUP_ROWS = 65_536


@dataclass(frozen=True)
class Match:
    """A verified earlier document: `other` of `dump` (`rank` in crawl order), its similarity."""

    other: str
    dump: str
    rank: int
    similarity: float
    signature: bytes

    def order(self) -> tuple:
        """Best first: highest similarity, then earliest dump, then least id."""
        return (-self.similarity, self.rank, self.other)


@dataclass(frozen=True)
class DecisionSummary:
    documents: int
    dropped_within_dump: int
    dropped_against_earlier: int


def decide_dump(
    con: duckdb.DuckDBPyConnection,
    dump: str,
    minhash_path: Path,
    earlier: Sequence[tuple[str, Path]],
    output: Path,
    policy: MinhashPolicy,
) -> DecisionSummary:
    """Write one decision per document of `dump` to `output`; `earlier` is (dump, minhash file)
    of every earlier dump that has one, in any order."""
    check_minhash_file(minhash_path, policy, dump)
    earlier = sorted(earlier) if policy.scope is Scope.ACROSS_DUMPS else []
    for earlier_dump, path in earlier:
        if earlier_dump >= dump:
            raise ValueError(f"{path}: dump {earlier_dump} is not earlier than {dump}")
        check_minhash_file(path, policy, earlier_dump)
    con.execute(load_sql("dedup_current_documents"), {"path": str(minhash_path)})
    con.execute(load_sql("dedup_current_keys"))
    edges = []
    if policy.scope is not Scope.OFF:
        edges = list(_verified(con.sql(load_sql("dedup_within_candidates")), policy))
    best = _best_earlier_matches(con, earlier, policy)
    drops = _drops(con, dump, edges, best, policy)
    con.register("drops", pa.Table.from_pylist(drops, DROP_SCHEMA))
    _write_decisions(con.sql(load_sql("dedup_decisions")), output, dump, policy)
    con.unregister("drops")
    against_earlier = sum(1 for d in drops if d["duplicate_of_dump"] != dump)
    documents = con.execute("SELECT count(*) FROM current_documents").fetchone()[0]
    return DecisionSummary(documents, len(drops) - against_earlier, against_earlier)


def _signatures(column: pa.Array, policy: MinhashPolicy) -> np.ndarray:
    """b-bit signatures (DuckDB hands them over as BLOBs) as a (rows, permutations) matrix."""
    column = column.cast(pa.binary(policy.permutations * policy.signature_bits // 8))
    values = np.frombuffer(column.buffers()[1], np.dtype(f"<u{policy.signature_bits // 8}"))
    return values.reshape(-1, policy.permutations)[column.offset : column.offset + len(column)]


def _similarity(a: bytes, b: bytes, policy: MinhashPolicy) -> float:
    dtype = np.dtype(f"<u{policy.signature_bits // 8}")
    pair = np.frombuffer(a, dtype), np.frombuffer(b, dtype)
    return float(estimated_jaccard(*pair, policy.signature_bits))


def _verified(candidates: duckdb.DuckDBPyRelation, policy: MinhashPolicy) -> Iterator[tuple]:
    """(id, other, similarity, other's signature) of each candidate pair passing verification."""
    for batch in candidates.to_arrow_reader(ROW_GROUP_ROWS):
        own = _signatures(batch.column("signature"), policy)
        other = _signatures(batch.column("other_signature"), policy)
        similarity = estimated_jaccard(own, other, policy.signature_bits)
        passed = np.flatnonzero(similarity >= policy.verify_threshold)
        ids, others, signatures = (
            batch.column(c).take(passed).to_pylist() for c in ("id", "other", "other_signature")
        )
        yield from zip(ids, others, similarity[passed].tolist(), signatures)


def _best_earlier_matches(
    con: duckdb.DuckDBPyConnection, earlier: Sequence[tuple[str, Path]], policy: MinhashPolicy
) -> dict[str, Match]:
    """Each document's best verified match in the earlier dumps, one earlier file at a time."""
    best: dict[str, Match] = {}
    for rank, (earlier_dump, path) in enumerate(earlier):
        candidates = con.sql(load_sql("dedup_earlier_candidates"), params={"path": str(path)})
        try:
            pairs = list(_verified(candidates, policy))
        except duckdb.Error as error:
            message = f"{path}: unreadable minhash file of {earlier_dump} ({error})"
            raise MinhashFileError(message) from error
        for doc, other, similarity, signature in pairs:
            match = Match(other, earlier_dump, rank, similarity, signature)
            if doc not in best or match.order() < best[doc].order():
                best[doc] = match
    return best


def _clusters(edges: Sequence[tuple]) -> list[list[str]]:
    """Connected components of the verified pairs (union-find with path halving)."""
    parent: dict[str, str] = {}

    def root(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b, *_ in edges:
        ra, rb = root(a), root(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    components: dict[str, list[str]] = {}
    for x in parent:
        components.setdefault(root(x), []).append(x)
    return list(components.values())


def _involved_documents(con: duckdb.DuckDBPyConnection, ids: set[str]) -> dict[str, tuple]:
    """(score, signature) of the documents with a verified duplicate."""
    con.register("involved", pa.table({"id": pa.array(sorted(ids), pa.string())}))
    rows = con.sql(load_sql("dedup_involved_documents")).fetchall()
    con.unregister("involved")
    return {doc: (score, signature) for doc, score, signature in rows}


def _drops(
    con: duckdb.DuckDBPyConnection,
    dump: str,
    edges: Sequence[tuple],
    best: dict[str, Match],
    policy: MinhashPolicy,
) -> list[dict]:
    """A row (id, duplicate_of, duplicate_of_dump, similarity) per dropped document."""
    clusters = _clusters(edges)
    clustered = {x for members in clusters for x in members}
    clusters += [[x] for x in sorted(best) if x not in clustered]
    documents = _involved_documents(con, clustered | set(best))
    drops = []
    for members in clusters:
        matched = [best[x] for x in members if x in best]
        if matched:  # the earliest crawl wins: the whole cluster goes
            cluster_best = min(matched, key=Match.order)
            for x in members:
                match = best.get(x, cluster_best)
                value = _similarity(documents[x][1], match.signature, policy)
                drops.append(_drop(x, match.other, match.dump, value))
        else:
            kept = min(members, key=lambda x: (-documents[x][0], x))
            for x in members:
                if x != kept:
                    value = _similarity(documents[x][1], documents[kept][1], policy)
                    drops.append(_drop(x, kept, dump, value))
    return drops


def _drop(doc: str, duplicate_of: str, duplicate_of_dump: str, similarity: float) -> dict:
    return {
        "id": doc, "duplicate_of": duplicate_of, "duplicate_of_dump": duplicate_of_dump,
        "similarity": similarity,
    }


def _write_decisions(
    decisions: duckdb.DuckDBPyRelation, output: Path, dump: str, policy: MinhashPolicy
) -> None:
    metadata = {POLICY_KEY: policy.fingerprint().encode(), DUMP_KEY: dump.encode()}
    batches = decisions.to_arrow_reader(ROW_GROUP_ROWS)
    write_in_row_groups(output, DECISION_SCHEMA.with_metadata(metadata), batches, ROW_GROUP_ROWS)
