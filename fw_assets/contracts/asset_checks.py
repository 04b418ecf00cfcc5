"""A step's data contract as Dagster asset checks: one result per dump, on that dump's data.

Every asset with a contract follows one pattern:

    report = ContractReport(dump, "step", check_step(con, ...))  # plain contract code
    yield from report.refuse_if_blocked()   # a blocking check failed: report every result, fail
    staging.publish(...)                    # reached only when every blocking check passed
    yield report.materialization(metadata, data_version(record))  # the results attached to this materialization

Why this shape: Dagster gives a check result the step's partition (a run of one dump) and links it
to the latest materialization of that partition at the moment the result is evaluated. Results
attached to the `MaterializeResult` are evaluated just after it is stored, so each dump's checks
point at the very data they checked; a result yielded before it would point at the dump's previous
materialization, or at none. A refused step stores no materialization: its results still carry the
dump's partition, and the UI shows them against the dump's last published output, which stays as it
was. The specs are blocking too: should a failed blocking result ever reach Dagster without the step
raising, the dump's later steps still do not run.

Each publishing asset also has a `published_files` check, per partition: what `python -m
fw_assets.verify --partition KEY` does for that asset's outputs of the partition, each file re-read
against the checksum its generation record holds. It runs after its asset in every run that
materializes it (reading back, once, what the step published: a hard link to another publication's
file is that publication's to read), and when asked (the asset's Checks tab, per partition).
"""

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import dagster as dg

from fw_assets.contracts.findings import CheckOutcome, ContractCheck, rejection_message
from fw_assets.formats.lineage import ASSET_OF_STEP, unchanged_publication
from fw_assets.formats.published_files import verify_publications
from fw_assets.lib.checksums import ALGORITHM
from fw_assets.lib.fence import pass_fence
from fw_assets.lib.markdown import literal, table
from fw_assets.lib.publish import data_version
from fw_assets.partitions import dump_partitions
from fw_assets.resources import FineWebStorage
from fw_assets.run_health import asset_code_version

# What an asset with a contract yields: its check results (only when refused), or its materialization.
Events = Iterator[dg.AssetCheckResult | dg.MaterializeResult]


def check_specs(
    asset: str, checks: Sequence[ContractCheck], partitions_def: dg.PartitionsDefinition = dump_partitions
) -> list[dg.AssetCheckSpec]:
    """Per-partition (per-dump unless told) asset checks of `asset`, one per contract check."""
    return [
        dg.AssetCheckSpec(
            check.name,
            asset=asset,
            description=check.description,
            blocking=check.blocking,
            partitions_def=partitions_def,
        )
        for check in checks
    ]


@dataclass(frozen=True)
class ContractReport:
    """One step's contract outcomes for one dump, reported the one way that attributes them right."""

    dump: str  # the partition key: a dump, or a recipe for the mixture assets
    step: str
    outcomes: Sequence[CheckOutcome]
    kind: str = "Dump"  # what the partition key names, in messages

    def refuse_if_blocked(self) -> Iterator[dg.AssetCheckResult]:
        """If a blocking check failed: yield every result, then fail the step naming each
        violation, before anything is published. Otherwise yield nothing."""
        if any(outcome.blocks for outcome in self.outcomes):
            yield from (check_result(outcome) for outcome in self.outcomes)
            guard(self.dump, self.step, self.outcomes, self.kind)

    def materialization(self, metadata: Mapping[str, Any], version: str) -> dg.MaterializeResult:
        """The step's materialization with every check result attached (warnings included). Its
        data version is the published output's (fw_assets.lib.publish.data_version): what the UI
        compares to call an output stale is what readers compare to refuse it."""
        return dg.MaterializeResult(
            metadata=metadata,
            check_results=[check_result(outcome) for outcome in self.outcomes],
            data_version=dg.DataVersion(version),
        )


# A run tagged so makes every output again, even one unchanged since its published generation.
FORCE_TAG = "fw_assets/force"


def forced(context: dg.AssetExecutionContext) -> bool:
    """Whether the run makes every output again, unchanged or not (tag `fw_assets/force`=`true`)."""
    return context.run.tags.get(FORCE_TAG, "").strip().lower() == "true"


def unchanged_output(
    context: dg.AssetExecutionContext, output_root, name: str, inputs: Mapping[str, Mapping[str, Any]]
) -> dict | None:
    """The record of the step's published output `name` when this run would publish the same again
    (made by this code from these `inputs`: fw_assets.formats.lineage.unchanged_publication) and
    the run does not force the work; the log says which."""
    if forced(context):
        return None
    record = unchanged_publication(output_root, name, asset_code_version(context), inputs)
    if record is not None:
        pass_fence(f"reporting {name} unchanged")  # a materialization: only the live run records one
        context.log.info(
            f"{name}: unchanged since generation {record['generation']} ({record['published_at']}): the same "
            f"code from the same inputs; not redone (tag the run {FORCE_TAG}=true to redo it)"
        )
    return record


def unchanged_materialization(
    record: dict, checks: Sequence[ContractCheck], metadata: Mapping[str, Any] | None = None
) -> dg.MaterializeResult:
    """The step's output materialized as it is published (`record`), not made again: its data
    version is the publication's (nothing downstream changes), and its checks pass as they did when
    it was published (a publication is made only when its blocking checks pass)."""
    since = {"unchanged_since_generation": record["generation"], "published_at": record["published_at"]}
    return rechecked_nothing(data_version(record), since, checks, metadata)


def rechecked_nothing(
    version: str, since: Mapping[str, Any], checks: Sequence[ContractCheck], metadata: Mapping[str, Any] | None = None
) -> dg.MaterializeResult:
    """A materialization of what the step made before (`since` says when), with data version
    `version` and each of `checks` passed as it passed then."""
    return dg.MaterializeResult(
        metadata={**since, "not_redone": True, **(metadata or {})},
        check_results=[
            dg.AssetCheckResult(check_name=check.name, passed=True, metadata=dict(since),
                                severity=dg.AssetCheckSeverity.ERROR if check.blocking else dg.AssetCheckSeverity.WARN)
            for check in checks
        ],
        data_version=dg.DataVersion(version),
    )


def check_result(outcome: CheckOutcome) -> dg.AssetCheckResult:
    """The outcome as Dagster shows it: pass/fail, severity, figures and violations."""
    metadata: dict[str, dg.RawMetadataValue] = dict(outcome.figures)
    metadata["failing_rows"] = sum(v.rows for v in outcome.violations)
    if outcome.details:
        metadata["details"] = dg.MetadataValue.md(outcome.details)
    if outcome.violations:
        metadata["violations"] = dg.MetadataValue.md(outcome.violations_table())
        metadata["problems"] = dg.MetadataValue.json([v.describe() for v in outcome.violations])
    return dg.AssetCheckResult(
        check_name=outcome.check.name,
        passed=outcome.passed,
        severity=dg.AssetCheckSeverity.ERROR if outcome.check.blocking else dg.AssetCheckSeverity.WARN,
        metadata=metadata,
    )


def guard(dump: str, step: str, outcomes: Sequence[CheckOutcome], kind: str = "Dump") -> None:
    """Raise a `dg.Failure` naming every blocking violation; do nothing if none. On its own (no
    check results) where a step re-checks another step's contract before relying on it."""
    blocking = [o for o in outcomes if o.blocks]
    if blocking:
        raise dg.Failure(
            description=rejection_message(dump, step, blocking, kind),
            metadata={
                kind.lower(): dump,
                "failed_checks": ", ".join(o.check.name for o in blocking),
                "failing_rows": sum(v.rows for o in blocking for v in o.violations),
                "problems": dg.MetadataValue.json(
                    [f"{o.check.name}: {v.describe()}" for o in blocking for v in o.violations]
                ),
            },
        )


PUBLISHED_FILES = "published_files"


def published_files_check(asset: dg.AssetsDefinition) -> dg.AssetChecksDefinition:
    """The `published_files` check of a publishing asset, per partition: every file the asset
    published for it re-read against its generation record (fw_assets.formats.published_files).
    Not blocking: a file that differs is its asset's to make again, which the check names."""
    name = asset.key.to_user_string()
    step = next(s for s, a in ASSET_OF_STEP.items() if a == name)

    @dg.asset_check(
        asset=asset,
        name=PUBLISHED_FILES,
        partitions_def=asset.partitions_def,
        # requested with its asset when automation runs the asset (a run started by automation holds
        # the checks it requests, no other)
        automation_condition=(dg.AutomationCondition.any_deps_match(dg.AutomationCondition.will_be_requested())
                              if asset.automation_conditions_by_key.get(asset.key) else None),
        description=f"Every file {name} published for the partition, re-read: there, of its recorded size "
        f"and {ALGORITHM} checksum, its generation record whole (`python -m fw_assets.verify --partition KEY`).",
    )
    def published_files(context: dg.AssetCheckExecutionContext, storage: FineWebStorage) -> dg.AssetCheckResult:
        found = verify_publications(storage.output_root, context.partition_key, step)
        metadata: dict[str, dg.RawMetadataValue] = {"publications": found.publications, "files": found.files}
        if found.problems:
            rows = [(publication, literal(line))
                    for publication, problem in found.problems.items() for line in problem.differs]
            metadata["differs"] = dg.MetadataValue.md(table(["publication", "what differs"], rows))
            metadata["make_again"] = dg.MetadataValue.md(
                "\n".join(f"- `{problem.command}`" for problem in found.problems.values()))
        return dg.AssetCheckResult(passed=found.passed, severity=dg.AssetCheckSeverity.ERROR, metadata=metadata)

    return published_files

