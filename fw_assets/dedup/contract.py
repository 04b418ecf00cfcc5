"""The decisions' contract and what the UI shows of it, apart from Dagster: plain code, wrapped
as the asset checks of `deduplicated` (its check specs are beside the asset).

`reconciliation` (blocking): exactly one decision per bucketed id; every `duplicate_of` is a
document of the dump it names (this dump's minhash file or an earlier one's) and, within the
dump, a kept one. `drop_share` (a warning): a bucket dropping more than the policy's share is a
sign of a wrong input or a dump processed twice under two names.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from fw_assets.contracts.findings import CheckOutcome, ContractCheck, Violation, count_rows
from fw_assets.dedup.minhash_policy import MINHASH_POLICY, MinhashPolicy
from fw_assets.dedup.signature_files import rows_with_ids
from fw_assets.lib.markdown import literal, table
from fw_assets.lib.sql import load_sql

POINTED_IDS = pa.schema([("id", pa.string()), ("dump", pa.string())])
CONTRACT_SQL = (
    "dedup_reconciliation", "dedup_pointers", "dedup_bucket_summary", "dedup_similarity_histogram",
    "dedup_example_pairs",
)

DEDUP_RECONCILIATION = ContractCheck(
    "reconciliation",
    "Exactly one decision per bucketed id; every duplicate_of is a document of the dump it names "
    "(this dump's or an earlier dump's minhash) and, within this dump, a kept one.",
)
DROP_SHARE = ContractCheck(
    "drop_share",
    "Per bucket, the share of documents dropped as near-duplicates stays under the policy's "
    f"warning share ({MINHASH_POLICY.drop_share_warning:.0%}): more suggests a wrong input or a "
    "repeated dump.",
    blocking=False,
)
DEDUP_CHECKS = (DEDUP_RECONCILIATION, DROP_SHARE)

_PROBLEMS = {
    "decision_missing": "bucketed ids without a decision",
    "not_bucketed": "decisions about ids the dump's bucketed output does not hold",
    "decided_twice": "ids decided more than once",
    "pointer_unknown": "drops whose duplicate_of is not in the minhash file of duplicate_of_dump",
    "pointer_not_earlier": "drops pointing at a later dump",
    "pointer_dropped": "drops pointing at a document of this dump that is dropped as well",
}
EXAMPLE_PAIRS = 10


@dataclass(frozen=True)
class BucketDrops:
    documents: int
    dropped_within_dump: int
    dropped_against_earlier: int

    @property
    def dropped(self) -> int:
        return self.dropped_within_dump + self.dropped_against_earlier


def bucket_drops(con: duckdb.DuckDBPyConnection, decisions: Path, dump: str) -> dict[str, BucketDrops]:
    rows = con.execute(
        load_sql("dedup_bucket_summary"), {"decisions": str(decisions), "dump": dump}
    ).fetchall()
    return {bucket: BucketDrops(*counts) for bucket, *counts in rows}


def check_decisions(
    con: duckdb.DuckDBPyConnection,
    dump: str,
    decisions: Path,
    bucketed: Sequence[Path],
    minhash_files: Mapping[str, Path],
    policy: MinhashPolicy,
) -> list[CheckOutcome]:
    """Both checks of one dump's staged decision file; `minhash_files` (dump -> file) holds this
    dump's and every earlier one's."""
    return [
        _reconciliation(con, dump, decisions, bucketed, minhash_files),
        _drop_share(bucket_drops(con, decisions, dump), policy),
    ]


NO_IDS = pa.table({"id": pa.array([], pa.string())})


def _reconciliation(
    con: duckdb.DuckDBPyConnection,
    dump: str,
    decisions: Path,
    bucketed: Sequence[Path],
    minhash_files: Mapping[str, Path],
) -> CheckOutcome:
    pointers = con.sql(load_sql("dedup_pointers"), params={"decisions": str(decisions)}).to_arrow_table()
    named = set(pointers.column("duplicate_of_dump").to_pylist())
    pointed = {d: minhash_files[d] for d in sorted(named) if d in minhash_files}
    con.register("pointed_ids", _ids_among(pointed, pointers))
    # a dump with nothing bucketed (every score below the lowest bucket) has no file to read
    ids = con.read_parquet([str(p) for p in bucketed]).select("id") if bucketed else con.from_arrow(NO_IDS)
    ids.create_view("bucketed_ids")
    try:
        rows = con.execute(load_sql("dedup_reconciliation"), {"decisions": str(decisions), "dump": dump}).fetchall()
    finally:
        con.unregister("pointed_ids")
        con.execute("DROP VIEW bucketed_ids")
    violations = [
        Violation(rule, "id", n, f"{count_rows(n)}: {_PROBLEMS[rule]} ({rule})", examples=tuple(examples))
        for rule, n, examples in rows
    ]
    return DEDUP_RECONCILIATION.outcome(violations, {"decisions_checked": str(decisions.name)})


def _ids_among(files: Mapping[str, Path], pointers: pa.Table) -> pa.Table:
    """(id, dump) of the documents of the minhash files (dump -> file) that `pointers`
    (duplicate_of_dump, duplicate_of) point at, each file's ids looked up among the ids pointed
    into its dump only."""
    tables = [POINTED_IDS.empty_table()]
    for dump, path in files.items():
        wanted = pointers.filter(pc.equal(pointers.column("duplicate_of_dump"), dump)).column("duplicate_of")
        _, found = rows_with_ids(path, wanted.combine_chunks())
        tables.append(pa.table({"id": found, "dump": pa.array([dump] * len(found), pa.string())}))
    return pa.concat_tables(tables)


def _drop_share(buckets: Mapping[str, BucketDrops], policy: MinhashPolicy) -> CheckOutcome:
    limit = policy.drop_share_warning
    violations = [
        Violation(
            "drop_share", None, b.dropped,
            f"bucket {bucket}: {b.dropped:,} of {b.documents:,} documents dropped "
            f"({b.dropped / b.documents:.1%}, warning above {limit:.0%})",
        )
        for bucket, b in buckets.items()
        if b.documents and b.dropped / b.documents > limit
    ]
    figures = {
        f"drop_share_{bucket}": round(b.dropped / max(b.documents, 1), 4) for bucket, b in buckets.items()
    }
    return DROP_SHARE.outcome(violations, {**figures, "warning_share": limit})


def similarity_histogram(con: duckdb.DuckDBPyConnection, decisions: Path) -> str:
    """Drops per 0.05 of estimated Jaccard, as a markdown table."""
    rows = con.execute(load_sql("dedup_similarity_histogram"), {"decisions": str(decisions)}).fetchall()
    return table(["estimated Jaccard", "dropped"], [(f"{low:.2f}–{low + 0.05:.2f}", n) for low, n in rows])


def example_pairs(
    con: duckdb.DuckDBPyConnection,
    dump: str,
    decisions: Path,
    minhash_files: Mapping[str, Path],
) -> str:
    """A markdown table of example drops: ids, dumps, similarity, the start of both texts, read
    from the minhash files (`minhash_files`: dump -> file, this dump's and the earlier ones')."""
    pairs = con.execute(
        load_sql("dedup_example_pairs"), {"decisions": str(decisions), "dump": dump, "limit": EXAMPLE_PAIRS}
    ).fetchall()
    pairs.sort()  # shown by id
    wanted: dict[str, set[str]] = {dump: {doc for doc, *_ in pairs}}
    for _, other, other_dump, *_ in pairs:
        wanted.setdefault(other_dump, set()).add(other)
    starts = {
        (source_dump, doc): start
        for source_dump, ids in wanted.items()
        if source_dump in minhash_files
        for doc, start in _text_starts(minhash_files[source_dump], ids).items()
    }
    rows = [
        (
            _code(doc), dump, _code(other), other_dump, round(similarity, 3),
            _quote(starts.get((dump, doc))), _quote(starts.get((other_dump, other))),
            "within the dump" if within else "an earlier dump",
        )
        for doc, other, other_dump, similarity, within in pairs
    ]
    header = ["dropped id", "dump", "duplicate of", "its dump", "similarity", "dropped text", "its text", "match"]
    return table(header, rows)


def _text_starts(minhash_file: Path, ids: set[str]) -> dict[str, str]:
    """The text starts of `ids` in a minhash file: their rows found in the ids beside it (read in
    place), their text starts read from the row groups holding them only."""
    rows, found = rows_with_ids(minhash_file, pa.array(sorted(ids), pa.string()))
    parquet = pq.ParquetFile(minhash_file)
    group_starts = np.cumsum([0] + [
        parquet.metadata.row_group(g).num_rows for g in range(parquet.num_row_groups)
    ])
    group_of = np.searchsorted(group_starts, rows, side="right") - 1
    starts = {}
    for group in np.unique(group_of).tolist():
        in_group = group_of == group
        texts = parquet.read_row_group(group, ["text_start"]).column(0)
        texts = texts.take(rows[in_group] - group_starts[group])
        starts.update(zip(found.filter(in_group).to_pylist(), texts.to_pylist()))
    return starts


def _code(value: str) -> str:
    return f"`{value}`"


def _quote(text: str | None) -> str:
    """A text start for a markdown cell, shown as written."""
    return "(text not published)" if text is None else literal(text)
