"""Running the chain on generated dumps, as tests do: in process, or as a child killed mid-way."""

import os
import subprocess
import sys
import uuid
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pyarrow.parquet as pq
from dagster._core.remote_origin import InProcessCodeLocationOrigin, RemoteJobOrigin, RemoteRepositoryOrigin
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin

from fw_assets.automation.dump_runs import PARTITION_TAG
from fw_assets.bucketing.bucketed import bucketed
from fw_assets.bucketing.raw import raw
from fw_assets.bucketing.sampled import sampled
from fw_assets.contracts.asset_checks import FORCE_TAG
from fw_assets.dedup.band_key_index import band_key_index
from fw_assets.dedup.deduplicated import deduplicated
from fw_assets.dedup.minhash import minhash
from fw_assets.jobs import signing_job
from fw_assets.resources import FineWebStorage, Warehouse

# The generated dumps most tests run on, in crawl order.
SAMPLE_DUMPS = ("CC-MAIN-2013-20", "CC-MAIN-2013-48")
CHAIN = [raw, sampled, bucketed, minhash, band_key_index, deduplicated]


def resources(source_root: Path, output_root: Path) -> dict:
    return {
        "storage": FineWebStorage(source_dir=str(source_root), output_dir=str(output_root)),
        "warehouse": Warehouse(threads=2, memory_limit="2GiB"),
    }


def materialize_dump(
    source_root: Path,
    output_root: Path,
    dump: str,
    assets=CHAIN,
    instance=None,
    raise_on_error=True,
    extra_resources: dict | None = None,
    redo: bool = True,
) -> dg.ExecuteInProcessResult:
    """Materialize `assets` for one dump, in one run whose asset selection is theirs (as a CLI or UI
    run records it); `extra_resources` (e.g. `tokenizer`) join the defaults. The steps do their work
    even when their output is unchanged (tag fw_assets/force), unless `redo` is False."""
    definitions = dg.Definitions(
        assets=assets,
        resources={**resources(source_root, output_root), **(extra_resources or {})},
        executor=dg.in_process_executor,
    )
    job = definitions.resolve_implicit_global_asset_job_def()
    return job.execute_in_process(
        partition_key=dump,
        instance=instance,
        raise_on_error=raise_on_error,
        asset_selection=[key for asset in assets for key in asset.keys],
        tags={FORCE_TAG: "true"} if redo else None,
    )


def read_source(source_root: Path, dump: str) -> pa.Table:
    files = sorted((source_root / "data" / dump).glob("*.parquet"))
    return pa.concat_tables(pq.read_table(f) for f in files)


def unfinished_run(
    instance: dg.DagsterInstance, dump: str, status: dg.DagsterRunStatus, job: str = signing_job.name
) -> str:
    """A run signing the dump (or of another job) as the daemon queues it (from the code
    location) or the CLI starts it; returns its id."""
    origin = RemoteJobOrigin(
        RemoteRepositoryOrigin(
            InProcessCodeLocationOrigin(LoadableTargetOrigin(module_name="fw_assets.definitions")),
            "__repository__",
        ),
        job,
    )
    run = dg.DagsterRun(job_name=job, run_id=str(uuid.uuid4()), status=status,
                        tags={PARTITION_TAG: dump}, remote_job_origin=origin)
    instance.add_run(run)
    return run.run_id


# A child process materializes one asset of a dump and SIGKILLs itself right after moving the first
# old published file or folder aside (into `replaced/`): a publication killed half way.
_KILLED_MID_PUBLISH = """
import sys
from pathlib import Path
from fw_assets_tests.support.killing import die_after_rename
from fw_assets_tests.support.runs import materialize_dump
{imports}
die_after_rename(lambda done, source, destination: Path(destination).parent.name == "replaced")
materialize_dump(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], assets=[{asset}], extra_resources={resources})
"""


def run_waiting_for_its_retry(instance: dg.DagsterInstance, dump: str) -> str:
    """A run signing the dump that failed (its host was lost) and that run retries will launch
    again, as the daemon marks it before launching the retry; returns its id."""
    run_id = unfinished_run(instance, dump, dg.DagsterRunStatus.STARTED)
    instance.report_run_failed(instance.get_run_by_id(run_id), message="its host was lost")
    instance.add_run_tags(run_id, {"dagster/will_retry": "true"})
    return run_id


def killed_mid_publish(source: Path, output: Path, dump: str, imports: str, asset: str, resources: str = "None") -> int:
    """Run the child above (`imports`: the lines bringing `asset` and what `resources` names);
    its exit code, -9 when it was killed as planned."""
    script = _KILLED_MID_PUBLISH.format(imports=imports, asset=asset, resources=resources)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run([sys.executable, "-c", script, str(source), str(output), dump], env=env).returncode


def subprocess_env(source_root: Path, output_root: Path, dagster_home: Path) -> dict[str, str]:
    """This environment, with the folders a CLI process started by a test reads and writes."""
    return {
        **os.environ,
        "FW_SOURCE_DIR": str(source_root),
        "FW_OUTPUT_DIR": str(output_root),
        "DAGSTER_HOME": str(dagster_home),
    }
