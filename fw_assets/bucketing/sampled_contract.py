"""The sampled selection's contract: its schema, the sampling ratio per bucket, reconciliation.

The selection is compact (no text), so every row of it is read; it is checked in staging,
before it is published.
"""

import math
from pathlib import Path

import duckdb
import pyarrow as pa

from fw_assets.bucketing import contract_rules as rules
from fw_assets.bucketing.contract_tallies import TALLY_MODULES, TALLY_SQL, fetch_tallies, file_name
from fw_assets.contracts.findings import CheckOutcome, ContractCheck, Violation, count_rows, short
from fw_assets.lib.markdown import table
from fw_assets.sampling_policy import SamplingPolicy

CONTRACT_SQL = ("contract_selection", *TALLY_SQL)
CONTRACT_MODULES = (__name__, *TALLY_MODULES)

SELECTION_SCHEMA = ContractCheck(
    "schema",
    "The selection has exactly source_file, source_row, id, score, bucket and keep with their "
    "types, and every row sits in the bucket the policy gives its score.",
)
SAMPLING_RATIO = ContractCheck(
    "sampling_ratio",
    "Per bucket, kept rows are within the binomial tolerance of rows in × rate: "
    "|kept − n·rate| ≤ 4·√(n·rate·(1−rate)) + 1.",
)
SELECTION_RECONCILIATION = ContractCheck(
    "reconciliation",
    "Per bucket, rows in = kept + dropped (every row has a decision); no row scoring below every "
    "bucket is kept; the selection holds exactly the source's rows.",
)
SELECTION_CHECKS = (SELECTION_SCHEMA, SAMPLING_RATIO, SELECTION_RECONCILIATION)

BELOW_BUCKETS = "below every bucket"


def binomial_tolerance(rows: int, rate: float) -> float:
    """How far kept rows may stray from rows × rate: four standard deviations, plus one."""
    return 4 * math.sqrt(rows * rate * (1 - rate)) + 1


def register_policy(con: duckdb.DuckDBPyConnection, policy: SamplingPolicy) -> None:
    """The `policy` relation the contract statements join on."""
    con.register("policy", pa.Table.from_pylist(policy.rows()))


def bucket_tallies(
    con: duckdb.DuckDBPyConnection, selection: Path, policy: SamplingPolicy
) -> dict[str | None, dict]:
    """Rows in, kept, dropped and misplaced rows of the selection, per bucket (None: below)."""
    register_policy(con, policy)
    tallies = fetch_tallies(con, "contract_selection", {"selection": str(selection)})
    return {t["bucket"]: t for t in tallies}


def check_selection(
    con: duckdb.DuckDBPyConnection,
    selection: Path,
    policy: SamplingPolicy,
    source_rows: int,
) -> list[CheckOutcome]:
    """The selection's outcomes; its rows are read only when its footer has the right columns."""
    # pandera on demand, not at code-location load (fw_assets.bucketing.raw_contract says why)
    from fw_assets.bucketing.contract_frames import footer_frame, footer_violations
    from fw_assets.bucketing.contract_schemas import selection_schema

    footer = footer_violations(
        selection_schema(policy), footer_frame(selection), file_name(str(selection)), source_rows
    )
    if footer:
        return [SELECTION_SCHEMA.outcome(footer)]
    tallies = bucket_tallies(con, selection, policy)
    return [
        schema_outcome(tallies, file_name(str(selection))),
        ratio_outcome(tallies, policy),
        reconciliation_outcome(tallies, source_rows),
    ]


def schema_outcome(tallies: dict[str | None, dict], file: str) -> CheckOutcome:
    violations = []
    for bucket, tally in tallies.items():
        if tally["bucket_mismatch"]:
            examples = tuple(
                f"{e['id']} (row {e['row']}): score={e['score']} in {short(e['bucket'])}, "
                f"policy gives {short(e['expected'])}"
                for e in tally["bucket_mismatch_examples"]
            )
            problem = (
                f"{count_rows(tally['bucket_mismatch'])} in {_label(bucket)} "
                f"{rules.BUCKET_MISMATCH.problem}"
            )
            violations.append(
                Violation(
                    rules.BUCKET_MISMATCH.name, "bucket", tally["bucket_mismatch"], problem, file, examples
                )
            )
    figures = {
        "rows_checked": sum(t["rows_in"] for t in tallies.values()),
        rules.BUCKET_MISMATCH.name: sum(v.rows for v in violations),
    }
    return SELECTION_SCHEMA.outcome(violations, figures)


def ratio_outcome(tallies: dict[str | None, dict], policy: SamplingPolicy) -> CheckOutcome:
    violations, figures, lines = [], {}, []
    for bucket in policy.buckets:
        tally = tallies.get(bucket.name, {"rows_in": 0, "kept": 0})
        rows_in, kept = tally["rows_in"], tally["kept"]
        expected = rows_in * bucket.rate
        tolerance = binomial_tolerance(rows_in, bucket.rate)
        deviation = kept - expected
        figures |= {
            f"rows_in_{bucket.name}": rows_in,
            f"kept_{bucket.name}": kept,
            f"expected_{bucket.name}": round(expected, 1),
            f"tolerance_{bucket.name}": round(tolerance, 1),
        }
        lines.append((bucket.name, bucket.rate, rows_in, kept, expected, tolerance, deviation))
        if abs(deviation) > tolerance:
            problem = (
                f"bucket {bucket.name} kept {kept:,} of {rows_in:,} rows, expected "
                f"{expected:,.1f} ± {tolerance:,.1f} at rate {bucket.rate}"
            )
            violations.append(Violation("sampling_ratio", None, kept, problem))
    details = table(
        ["bucket", "rate", "rows in", "kept", "expected", "tolerance", "kept − expected"], lines
    )
    return SAMPLING_RATIO.outcome(violations, figures, details)


def reconciliation_outcome(tallies: dict[str | None, dict], source_rows: int) -> CheckOutcome:
    violations = []
    for bucket, tally in tallies.items():
        undecided = tally[rules.KEEP_NULL.name]
        if undecided:
            problem = f"{count_rows(undecided)} in {_label(bucket)} {rules.KEEP_NULL.problem}"
            violations.append(Violation(rules.KEEP_NULL.name, "keep", undecided, problem))
    below = sum(t[rules.KEPT_BELOW_BUCKETS.name] for t in tallies.values())
    if below:
        problem = f"{count_rows(below)} {rules.KEPT_BELOW_BUCKETS.problem}"
        violations.append(Violation(rules.KEPT_BELOW_BUCKETS.name, "keep", below, problem))
    selected = sum(t["rows_in"] for t in tallies.values())
    if selected != source_rows:
        problem = f"the selection holds {selected:,} rows, the source {source_rows:,}"
        violations.append(Violation("rows_reconciled", None, abs(selected - source_rows), problem))
    figures = {
        "source_rows": source_rows,
        "rows_in": selected,
        "kept": sum(t["kept"] for t in tallies.values()),
        "dropped": sum(t["dropped"] for t in tallies.values()),
    }
    return SELECTION_RECONCILIATION.outcome(violations, figures)


def _label(bucket: str | None) -> str:
    return f"bucket {bucket}" if bucket is not None else BELOW_BUCKETS
