"""How `band_key_index` links `minhash` and `deduplicated` across dumps: the partition mapping
through which `deduplicated` of a dump depends on it for every strictly earlier dump, and the
content version a later decision reads, verified against the earlier dump's generation record. A
plain module, so that both assets import what they share from neither's module."""

from pathlib import Path

import dagster as dg

from fw_assets.dedup.signature_files import content_version
from fw_assets.partitions import dump_partitions
from fw_assets.paths import minhash_path

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


class ReplacedMinhashFiles(ValueError):
    """A dump's minhash files whose content is not what their generation record says."""


def verified_content_version(root: Path, dump: str, record: dict) -> str:
    """The content version of `dump`'s published minhash files, refused (ReplacedMinhashFiles,
    MinhashFileError) unless it is the one their generation record holds."""
    path = minhash_path(root, dump)
    version = content_version(path)
    recorded = record["contents"].get("content_version", version)
    if version != recorded:
        raise ReplacedMinhashFiles(
            f"the minhash files of {dump} ({path} and the files beside it) hold content {version}, not "
            f"the {recorded} of their generation record {record['generation']}: they were replaced "
            f"outside the pipeline"
        )
    return version

