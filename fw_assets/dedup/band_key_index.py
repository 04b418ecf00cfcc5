"""`band_key_index`: the sorted band keys and the signatures of each signed dump,
`minhash/<dump>.keys.arrow` and `minhash/<dump>.signatures.arrow`, as the dumps decided later see them.

An external asset, observed by `minhash` when it publishes a dump's files (data version: a digest
of their content, the same for an identical re-sign). `deduplicated` of a dump depends on it for
every strictly earlier dump (both through fw_assets.dedup.band_key_lineage), so the lineage shows
what a decision read and Dagster marks a dump's decisions stale when an earlier dump's content
changes after them. Being neither materializable nor in the `fineweb_edu` group, it is outside
every per-dump selection: a backfill of some dumps does not follow it to the later dumps.
"""

import dagster as dg

from fw_assets.dedup.band_key_lineage import BAND_KEY_INDEX
from fw_assets.partitions import dump_partitions

band_key_index = dg.AssetSpec(
    BAND_KEY_INDEX,
    partitions_def=dump_partitions,
    group_name="dedup_index",
    deps=[dg.AssetKey("minhash")],
    description="The band keys of a dump's documents sorted by key and their signatures, "
    "`minhash/<dump>.keys.arrow` and `minhash/<dump>.signatures.arrow`, written by `minhash` and "
    "read by `deduplicated` of every later dump. Observed, not "
    "materialized: its data version is a digest of their content.",
)

