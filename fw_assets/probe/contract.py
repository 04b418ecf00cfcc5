"""The probe step's contract: every kept document of the dump's token files has a loss, and every
loss is a finite number."""

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from fw_assets.contracts.findings import CheckOutcome, ContractCheck, Violation, count_rows
from fw_assets.formats.doc_index import read_document_index

PROBE_COVERAGE = ContractCheck(
    "coverage",
    "Per bucket, the loss file has one row per document of the bucket's token files, in their "
    "order (every kept document of the dump is scored).",
)
PROBE_FINITE = ContractCheck(
    "finite_losses",
    "Every loss and bits-per-byte is a finite number (no NaN, no infinity).",
)
PROBE_CHECKS = (PROBE_COVERAGE, PROBE_FINITE)


def check_probe(losses: Mapping[str, tuple[Path, Path]]) -> list[CheckOutcome]:
    """Check each bucket's staged loss file against its token files: bucket -> (token prefix,
    loss file)."""
    uncovered, non_finite, figures = [], [], {}
    for bucket, (prefix, path) in losses.items():
        expected = read_document_index(prefix).column("id")
        table = pq.read_table(path)
        figures[f"documents_{bucket}"] = table.num_rows
        if table.num_rows != len(expected) or not table.column("id").equals(expected):
            have = set(table.column("id").to_pylist())
            missing = [i for i in expected.to_pylist() if i not in have]
            n = max(len(missing), abs(len(expected) - table.num_rows), 1)
            problem = (f"bucket {bucket}: {count_rows(n)} of the token files' {len(expected):,} documents "
                       f"have no loss or are out of order (the loss file has {table.num_rows:,} rows)")
            uncovered.append(Violation("missing_losses", "id", n, problem, path.name, tuple(missing[:5])))
        values = np.stack([table.column(c).to_numpy(zero_copy_only=False) for c in ("loss", "bits_per_byte")])
        bad = ~np.isfinite(values).all(axis=0)
        if bad.any():
            ids = table.column("id").filter(bad).to_pylist()
            problem = f"bucket {bucket}: {count_rows(len(ids))} with a NaN or infinite loss"
            non_finite.append(Violation("non_finite_loss", "loss", len(ids), problem, path.name, tuple(ids[:5])))
    return [PROBE_COVERAGE.outcome(uncovered, figures), PROBE_FINITE.outcome(non_finite)]
