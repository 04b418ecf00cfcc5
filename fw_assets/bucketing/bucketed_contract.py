"""The bucketed output's contract, checked on the staged files before they are published, and
the source texts its scan decodes."""

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from fw_assets.bucketing import contract_rules as rules
from fw_assets.bucketing import sampled_contract as selection
from fw_assets.bucketing.contract_tallies import (
    TEXT_NOT_UTF8,
    duplicate_id_violations,
    fetch_tallies,
    file_name,
    rule_violations,
    text_null_violations,
    unreadable_file_violations,
)
from fw_assets.bucketing.sampled_contract import bucket_tallies, register_policy
from fw_assets.contracts.findings import CheckOutcome, ContractCheck, Violation, count_rows
from fw_assets.lib.markdown import table
from fw_assets.sampling_policy import SamplingPolicy

# It reads the selection's tallies to reconcile against them.
CONTRACT_SQL = ("contract_bucketed_rows", "contract_bucketed_membership", *selection.CONTRACT_SQL)
CONTRACT_MODULES = (__name__, *selection.CONTRACT_MODULES)

SOURCE_TEXTS = ContractCheck(
    "source_texts",
    "Every text the bucketing scan reads (every row of the dump's source files, kept or dropped: "
    "it decodes them before choosing the kept rows) is valid UTF-8, on a readable page. Checked "
    "by that scan as it decodes the texts, at no pass of its own; only when it fails are the "
    "files read again to name the file, row group and rows.",
)
BUCKETED_SCHEMA = ContractCheck(
    "schema",
    "Every bucket file has exactly id (string), text (string) and score (double), in that order, "
    "in a bucket of the policy; no row has a null id, text or score.",
)
SCORE_IN_BUCKET = ContractCheck(
    "score_in_bucket", "Every row's score lies inside its bucket's interval [low, high)."
)
UNIQUE_IDS = ContractCheck("unique_ids", "Every id occurs once across all buckets of the dump.")
BUCKETED_RECONCILIATION = ContractCheck(
    "reconciliation",
    "Per bucket, rows written = rows the sampled step kept, and the written ids are exactly "
    "the ids kept in that bucket.",
)
BUCKETED_CHECKS = (SOURCE_TEXTS, BUCKETED_SCHEMA, SCORE_IN_BUCKET, UNIQUE_IDS, BUCKETED_RECONCILIATION)

_NULL_RULES = (rules.ID_NULL, rules.SCORE_NULL)

T = TypeVar("T")


def scanning_sources(
    con: duckdb.DuckDBPyConnection, paths: Sequence[str], rows: int, scan: Callable[[], T]
) -> tuple[T | None, CheckOutcome]:
    """Run `scan` (a statement decoding the texts of `paths`: DuckDB checks each text is UTF-8 as
    it decodes it) and return its result with the source_texts outcome. If DuckDB fails on a
    source file, the outcome names the file and, for texts that are not UTF-8, the rows; errors
    no file explains (memory, disk) pass through."""
    try:
        return scan(), source_texts_outcome([], rows)
    except duckdb.Error:
        problems = unreadable_file_violations(con, paths)
        if not problems:
            raise
        return None, source_texts_outcome(problems, rows)


def source_texts_outcome(problems: Sequence[Violation], rows: int) -> CheckOutcome:
    """source_texts over the `rows` the scan read, failing with the source files' `problems`."""
    not_utf8 = sum(v.rows for v in problems if v.rule == TEXT_NOT_UTF8)
    figures = {
        "rows_read": rows,
        TEXT_NOT_UTF8: not_utf8,
        "files_unreadable": sum(v.rule != TEXT_NOT_UTF8 for v in problems),
    }
    return SOURCE_TEXTS.outcome(problems, figures)


def check_bucketed(
    con: duckdb.DuckDBPyConnection,
    dump: str,
    files_by_bucket: Mapping[str, Sequence[Path]],
    selection: Path,
    policy: SamplingPolicy,
) -> list[CheckOutcome]:
    """The output's outcomes; its rows are read only when every file's footer passed."""
    footer = footer_outcome(files_by_bucket, policy)
    if footer.blocks:
        return [footer]
    placed = {str(path): bucket for bucket, paths in files_by_bucket.items() for path in paths}
    kept = {b: t["kept"] for b, t in bucket_tallies(con, selection, policy).items() if b}
    if not placed:
        return [
            footer,
            SCORE_IN_BUCKET.outcome(figures={"rows_checked": 0}),
            UNIQUE_IDS.outcome(figures={"rows_checked": 0}),
            reconciliation_outcome({}, kept, [], policy),
        ]
    con.register("bucket_files", pa.table({"file": list(placed), "bucket": list(placed.values())}))
    register_policy(con, policy)
    tallies = fetch_tallies(con, "contract_bucketed_rows", {"files": list(placed)})
    rows = sum(t["rows"] for t in tallies)

    nulls, scores, written = [], [], {}
    for tally in tallies:
        where = f"{tally['bucket']}/{file_name(tally['file'])}"
        nulls += rule_violations(tally, _NULL_RULES, dump, where)
        scores += rule_violations(tally, [rules.SCORE_OUTSIDE_BUCKET], dump, where)
        written[tally["bucket"]] = written.get(tally["bucket"], 0) + tally["rows"]
    text_nulls, _ = text_null_violations(con, list(placed), dump)
    nulls += text_nulls
    duplicates = duplicate_id_violations(con, list(placed), dump)
    membership = fetch_tallies(
        con, "contract_bucketed_membership", {"files": list(placed), "selection": str(selection)}
    )
    null_counts = {r.name: 0 for r in (*_NULL_RULES, rules.TEXT_NULL)}
    for v in nulls:
        null_counts[v.rule] += v.rows
    return [
        BUCKETED_SCHEMA.outcome(
            [*footer.violations, *nulls], {**footer.figures, "rows_checked": rows, **null_counts}
        ),
        SCORE_IN_BUCKET.outcome(
            scores,
            {"rows_checked": rows, rules.SCORE_OUTSIDE_BUCKET.name: sum(v.rows for v in scores)},
        ),
        UNIQUE_IDS.outcome(
            duplicates,
            {"rows_checked": rows, rules.ID_DUPLICATE.name: sum(v.rows for v in duplicates)},
        ),
        reconciliation_outcome(written, kept, membership, policy),
    ]


def footer_outcome(
    files_by_bucket: Mapping[str, Sequence[Path]], policy: SamplingPolicy
) -> CheckOutcome:
    """Every file in a policy bucket, with exactly the output columns and types."""
    # pandera on demand, not at code-location load (fw_assets.bucketing.raw_contract says why)
    from fw_assets.bucketing.contract_frames import footer_frame, footer_violations
    from fw_assets.bucketing.contract_schemas import bucketed_schema

    buckets = {b.name: b for b in policy.buckets}
    violations = []
    for bucket, paths in sorted(files_by_bucket.items()):
        for path in paths:
            where = f"{bucket}/{path.name}"
            if bucket not in buckets:
                problem = f"is in bucket {bucket!r}, not one of the policy's"
                violations.append(Violation("unknown_bucket", None, 0, problem, where))
                continue
            rows = pq.read_metadata(path).num_rows
            schema = bucketed_schema(buckets[bucket])
            violations += footer_violations(schema, footer_frame(path), where, rows)
    files = sum(len(paths) for paths in files_by_bucket.values())
    return BUCKETED_SCHEMA.outcome(violations, {"files": files})


def reconciliation_outcome(
    written: Mapping[str, int],
    kept: Mapping[str, int],
    membership: Sequence[Mapping],
    policy: SamplingPolicy,
) -> CheckOutcome:
    """Rows per bucket against the selection's kept rows, then id by id."""
    violations, figures, lines = [], {}, []
    for bucket in [b.name for b in policy.buckets]:
        out, sel = written.get(bucket, 0), kept.get(bucket, 0)
        figures |= {f"rows_{bucket}": out, f"kept_{bucket}": sel}
        lines.append((bucket, sel, out))
        if out != sel:
            problem = f"bucket {bucket} holds {count_rows(out)}, the selection kept {sel:,}"
            violations.append(Violation("rows_per_bucket", None, abs(out - sel), problem))
    for tally in membership:
        bucket = tally["bucket"]
        for key, problem in (
            ("not_kept", f"in bucket {bucket} were not kept there by the selection"),
            ("missing", f"kept in bucket {bucket} by the selection are missing from it"),
        ):
            if tally[key]:
                violations.append(
                    Violation(
                        f"ids_{key}",
                        "id",
                        tally[key],
                        f"{count_rows(tally[key])} {problem}",
                        None,
                        tuple(tally[f"{key}_examples"]),
                    )
                )
    details = table(["bucket", "kept by sampled", "rows written"], lines)
    return BUCKETED_RECONCILIATION.outcome(violations, figures, details)
