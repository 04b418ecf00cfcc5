"""The one job users run per dump: every asset of the `fineweb_edu` group, one run per partition;
and the one the `stale_losses` sensor runs: a dump's probe losses.

The group's assets share the dump partitions and Dagster's default backfill policy (partitions.py),
so the job is partitioned by dump, a run of it (the `new_dumps` sensor's, or the launchpad's) is one
dump tagged `dagster/partition`, and a UI backfill of N dumps is N runs, each holding the whole chain.
"""

import dagster as dg

dump_chain_job = dg.define_asset_job(
    "dump_chain",
    selection=dg.AssetSelection.groups("fineweb_edu"),
    description="Every stage of one dump: raw, sampled, bucketed and what follows them.",
)

probe_losses_job = dg.define_asset_job(
    "probe_losses",
    selection=dg.AssetSelection.groups("probe"),
    description="probe_loss of one dump: run by the stale_losses sensor for each dump whose losses a "
    "recipe reweights by are missing or were scored on token files replaced since.",
)
