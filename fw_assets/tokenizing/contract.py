"""The tokenizing step's contract, no Dagster. `tokenized.reconciliation`: per bucket, the token
files hold exactly the ids the dump's dedup decisions keep (no near-duplicate tokenized, no kept
document lost)."""

from collections.abc import Mapping
from pathlib import Path

import duckdb
import pyarrow.compute as pc
import pyarrow.parquet as pq

from fw_assets.contracts.findings import CheckOutcome, ContractCheck, Violation, count_rows
from fw_assets.lib.sql import load_sql

RECONCILIATION_SQL = ("tokenized_reconciliation",)

TOKENIZED_RECONCILIATION = ContractCheck(
    "reconciliation",
    "Per bucket, the documents of the token files (their docs sidecar) are exactly the ids the "
    "dump's dedup decisions keep.",
)
TOKENIZED_CHECKS = (TOKENIZED_RECONCILIATION,)

_PROBLEMS = {
    "kept_not_tokenized": "ids kept by the dedup decisions but missing from the token files "
    "(blank texts, dropped on purpose, aside)",
    "tokenized_not_kept": "ids in the token files that the dedup decisions drop or do not hold",
}


def kept_per_bucket(decisions: Path) -> dict[str, int]:
    """Documents the decision file keeps, per bucket."""
    table = pq.read_table(decisions, columns=["bucket", "keep"])
    counts = table.filter(pc.field("keep")).group_by("bucket").aggregate([("keep", "count")])
    return dict(zip(counts.column("bucket").to_pylist(), counts.column("keep_count").to_pylist()))


def check_tokenized(
    con: duckdb.DuckDBPyConnection,
    decisions: Path,
    sidecars: Mapping[str, Path | None],
    blank: Mapping[str, int],
) -> CheckOutcome:
    """Reconcile each bucket's staged docs sidecar (None: the bucket wrote no files) with the
    kept ids of that bucket; `blank` kept documents per bucket were dropped for a blank text."""
    kept = kept_per_bucket(decisions)
    violations, figures = [], {}
    for bucket, docs in sidecars.items():
        figures[f"kept_{bucket}"] = kept.get(bucket, 0)
        missing, extra, examples = kept.get(bucket, 0), 0, {}
        if docs is not None:
            rows = con.execute(
                load_sql("tokenized_reconciliation"),
                {"decisions": str(decisions), "bucket": bucket, "docs": str(docs)},
            ).fetchall()
            counts = {rule: n for rule, n, _ in rows}
            examples = {rule: tuple(ids or ()) for rule, _, ids in rows}
            missing, extra = counts["kept_not_tokenized"], counts["tokenized_not_kept"]
        unexplained = {"kept_not_tokenized": missing - blank.get(bucket, 0), "tokenized_not_kept": extra}
        for rule, n in unexplained.items():
            if n:
                problem = f"bucket {bucket}: {count_rows(n)}: {_PROBLEMS[rule]} ({rule})"
                where = docs.name if docs else None
                violations.append(Violation(rule, "id", n, problem, where, examples.get(rule, ())))
    return TOKENIZED_RECONCILIATION.outcome(violations, figures)
