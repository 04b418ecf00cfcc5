"""The floor of a Dagster run: a code location with one partitioned asset that does nothing.

    dagster asset materialize -m bench.cases.empty_asset --select empty --partition CC-MAIN-2013-20

Materialized by the CLI with the repo's dagster.yaml, as the `fw_dagster` case runs fw_assets: what
fw_assets' run costs beyond it is ours (imports, resources, checks, contracts, the SQL).
"""

import dagster as dg

from bench.data import BENCH_DUMPS


@dg.asset(partitions_def=dg.StaticPartitionsDefinition(list(BENCH_DUMPS)))
def empty() -> None:
    """Nothing: only Dagster's own cost of a run with one asset materialization."""


defs = dg.Definitions(assets=[empty], executor=dg.in_process_executor)
