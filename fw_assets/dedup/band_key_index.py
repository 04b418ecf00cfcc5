"""`band_key_index`: the sorted band keys and the signatures of each signed dump,
`minhash/<dump>.keys.arrow` and `minhash/<dump>.signatures.arrow`, as the dumps decided later see them.

An external asset, observed by `minhash` when it publishes a dump's files (data version: that
publication's generation). `deduplicated` of a dump depends on it for every strictly earlier dump,
so the lineage shows what a decision read and Dagster marks a dump's decisions stale when an earlier
dump is signed after them. Being neither materializable nor in the `fineweb_edu` group, it is
outside every per-dump selection: a backfill of some dumps does not follow it to the later dumps.
"""

import dagster as dg

from fw_assets.partitions import dump_partitions

# Set on the observation it is Dagster's data version; the tag is not exported by `dagster`.
DATA_VERSION_TAG = "dagster/data_version"

band_key_index = dg.AssetSpec(
    "band_key_index",
    partitions_def=dump_partitions,
    group_name="dedup_index",
    deps=[dg.AssetKey("minhash")],
    description="The band keys of a dump's documents sorted by key and their signatures, "
    "`minhash/<dump>.keys.arrow` and `minhash/<dump>.signatures.arrow`, written by `minhash` and "
    "read by `deduplicated` of every later dump. Observed, not "
    "materialized: its data version is the generation of the dump's minhash publication.",
)


def later_dumps() -> dg.StaticPartitionMapping:
    """Each dump's index feeds the decisions of every strictly later dump (crawl order = key order)."""
    keys = dump_partitions.get_partition_keys()
    return dg.StaticPartitionMapping({key: keys[i + 1:] for i, key in enumerate(keys[:-1])})


def published(dump: str, generation: str) -> dg.AssetObservation:
    """The observation `minhash` records once a dump's files are published."""
    return dg.AssetObservation(
        asset_key=band_key_index.key,
        partition=dump,
        tags={DATA_VERSION_TAG: generation},
        metadata={"generation": generation},
    )
