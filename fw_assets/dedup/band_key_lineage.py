"""How the external asset `band_key_index` links `minhash` and `deduplicated` across dumps: the
observation `minhash` records once it publishes a dump's files, and the partition mapping through
which `deduplicated` of a dump depends on it for every strictly earlier dump. A plain module, so
that both assets import what they share from neither's module (band_key_index.py defines the asset
and says why it is external)."""

import dagster as dg

from fw_assets.partitions import dump_partitions

BAND_KEY_INDEX = dg.AssetKey("band_key_index")
# Set on the observation it is Dagster's data version; the tag is not exported by `dagster`.
DATA_VERSION_TAG = "dagster/data_version"


def later_dumps() -> dg.StaticPartitionMapping:
    """Each dump's index feeds the decisions of every strictly later dump (crawl order = key order)."""
    keys = dump_partitions.get_partition_keys()
    return dg.StaticPartitionMapping({key: keys[i + 1:] for i, key in enumerate(keys[:-1])})


def published(dump: str, generation: str) -> dg.AssetObservation:
    """The observation of `band_key_index` that `minhash` records once a dump's files are
    published: its data version is that publication's generation."""
    return dg.AssetObservation(
        asset_key=BAND_KEY_INDEX,
        partition=dump,
        tags={DATA_VERSION_TAG: generation},
        metadata={"generation": generation},
    )
