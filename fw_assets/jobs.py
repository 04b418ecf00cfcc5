"""The one job users run per dump: every stage of the chain, one run per partition."""

import dagster as dg

from fw_assets.partitions import dump_partitions

dump_chain_job = dg.define_asset_job(
    "dump_chain",
    selection=dg.AssetSelection.groups("fineweb_edu"),
    partitions_def=dump_partitions,
    description="Every stage of one dump: raw, sampled, bucketed and what follows them.",
)
