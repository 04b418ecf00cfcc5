"""The one job users run per dump: every asset of the `fineweb_edu` group, one run per partition.

The group's assets share the dump partitions and `BackfillPolicy.multi_run(1)`, so the job is
partitioned by dump and a backfill of N dumps is N runs, each holding the whole chain.
"""

import dagster as dg

dump_chain_job = dg.define_asset_job(
    "dump_chain",
    selection=dg.AssetSelection.groups("fineweb_edu"),
    description="Every stage of one dump: raw, sampled, bucketed and what follows them.",
)
