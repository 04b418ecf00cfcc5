"""Runs of the bucketing chain on a damaged copy of a good dump, and what a refusal or an acceptance
must look like."""

from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pyarrow.parquet as pq

from fw_assets.paths import bucketed_files
from fw_assets.sampling_policy import SEED_POLICY
from fw_assets_tests.support.contract_cases import DUMP
from fw_assets_tests.support.runs import materialize_dump
from fw_assets_tests.support.trees import published_tree


@dataclass
class Run:
    result: dg.ExecuteInProcessResult

    def failure(self, step: str) -> str:
        """The user-facing message of the step's failure."""
        return self.result.failure_data_for_node(step).user_failure_data.description

    def check(self, asset: str, name: str) -> dg.AssetCheckEvaluation:
        (evaluation,) = [
            e
            for e in self.result.get_asset_check_evaluations()
            if e.asset_key == dg.AssetKey(asset) and e.check_name == name
        ]
        return evaluation

    def materialized(self, asset: str) -> bool:
        return bool(self.result.asset_materializations_for_node(asset))


@dataclass
class Workspace:
    """A copy of the good dump and of its published output, for one test to damage."""

    source: Path
    output: Path
    published_before: dict[str, str]

    def file(self, name: str) -> Path:
        return self.source / "data" / DUMP / name

    def run(self, assets=None, dump: str = DUMP, instance=None) -> Run:
        kwargs = {"assets": assets} if assets else {}
        return Run(
            materialize_dump(
                self.source, self.output, dump, instance=instance, raise_on_error=False, **kwargs
            )
        )

    def bucket_rows(self) -> dict[str, set[tuple]]:
        """The published rows of the dump per bucket, as (id, text, score)."""
        return {
            bucket: {
                (r["id"], r["text"], r["score"])
                for f in files
                for r in pq.read_table(f).to_pylist()
            }
            for bucket, files in bucketed_files(self.output, DUMP, SEED_POLICY).items()
        }


def assert_refused(
    ws: Workspace, run: Run, asset: str, check: str, *phrases: str, published=lambda tree: tree
) -> None:
    """The run failed at `asset` with a message naming the dump and `phrases`; the failed check
    carries the same; the steps after it did not run; the `published` part of the published files
    (all of them unless told) is untouched."""
    assert not run.result.success
    message = run.failure(asset)
    for phrase in (DUMP, *phrases):
        assert phrase in message, f"{phrase!r} not in:\n{message}"
    assert "nothing was published" in message
    evaluation = run.check(asset, check)
    assert not evaluation.passed
    assert evaluation.severity == dg.AssetCheckSeverity.ERROR
    assert evaluation.partition == DUMP
    problems = " ".join(evaluation.metadata["problems"].value)
    for phrase in phrases:
        assert phrase in problems, f"{phrase!r} not in the check's metadata: {problems}"
    assert not run.materialized(asset)
    assert not run.materialized("bucketed")
    assert published(published_tree(ws.output)) == published(ws.published_before)


def assert_bucketed_refused(ws: Workspace, run: Run, check: str, *phrases: str) -> None:
    """Like assert_refused, for bucketed after raw and sampled published: the published buckets
    and bucketed's generation record are untouched (raw's and sampled's records moved on)."""
    assert_refused(ws, run, "bucketed", check, *phrases, published=bucketed_tree)


def bucketed_tree(tree: dict[str, str]) -> dict[str, str]:
    """The entries of a published tree that bucketed writes."""
    return {path: digest for path, digest in tree.items() if path.startswith("en/") or "bucketed" in path}


def rows_where(path: Path, kept: bool) -> list[int]:
    """The rows of a source file the seed policy keeps (or drops)."""
    table = pq.read_table(path, columns=["id", "score"])
    pairs = zip(table["id"].to_pylist(), table["score"].to_pylist())
    return [i for i, (doc_id, score) in enumerate(pairs) if SEED_POLICY.keeps(doc_id, score) == kept]


def assert_accepted(run: Run) -> None:
    """Every step was recorded and all eleven blocking checks passed (the bucketing contracts' ten
    and deduplicated.reconciliation)."""
    assert run.result.success
    assert all(run.materialized(asset) for asset in ("raw", "sampled", "bucketed"))
    evaluations = run.result.get_asset_check_evaluations()
    blocking = [e for e in evaluations if e.severity == dg.AssetCheckSeverity.ERROR]
    assert len(blocking) == 11 and all(e.passed for e in blocking)


def ids_at(path: Path, rows: list[int]) -> list[str]:
    ids = pq.read_table(path, columns=["id"]).column("id").to_pylist()
    return [ids[r] for r in rows]
