"""How the external asset `band_key_index` links `minhash` and `deduplicated` across dumps: the
observation `minhash` records once it publishes a dump's files, and the partition mapping through
which `deduplicated` of a dump depends on it for every strictly earlier dump. A plain module, so
that both assets import what they share from neither's module (band_key_index.py defines the asset
and says why it is external)."""

import dagster as dg

from fw_assets.lib.versions import DATA_VERSION_TAG
from fw_assets.partitions import dump_partitions

BAND_KEY_INDEX = dg.AssetKey("band_key_index")
# The metadata of `deduplicated`: {earlier dump: its content version when the dump was decided}.
DECIDED_AGAINST = "decided_against"


def later_dumps() -> dg.StaticPartitionMapping:
    """Each dump's index feeds the decisions of every strictly later dump (crawl order = key order)."""
    keys = dump_partitions.get_partition_keys()
    return dg.StaticPartitionMapping({key: keys[i + 1:] for i, key in enumerate(keys[:-1])})


def read_by_decisions(dump: str, across_dumps: bool) -> list[str]:
    """The dumps whose minhash files the decisions of `dump` read: its own, and with the scope across
    dumps every earlier dump (signed or not: one signed later makes them stale)."""
    return [d for d in dump_partitions.get_partition_keys() if d == dump or (across_dumps and d < dump)]


def published(dump: str, content_version: str, generation: str) -> dg.AssetObservation:
    """The observation of `band_key_index` recorded once a dump's minhash files are published: its
    data version is the content version of what later decisions read of them
    (fw_assets.dedup.signature_files.content_version), so an identical re-sign changes nothing."""
    return dg.AssetObservation(
        asset_key=BAND_KEY_INDEX,
        partition=dump,
        tags={DATA_VERSION_TAG: content_version},
        metadata={"content_version": content_version, "generation": generation},
    )
