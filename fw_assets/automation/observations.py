"""The latest observation of each partition of an observed asset (its storage id and data version),
read the way the UI compares them: what the sensors record when a run did not (or cannot) observe."""

from dataclasses import dataclass

import dagster as dg

from fw_assets.lib.versions import DATA_VERSION_TAG

OBSERVATION = dg.DagsterEventType.ASSET_OBSERVATION


@dataclass(frozen=True)
class Observed:
    """A partition's latest observation: its storage id and data version."""

    storage_id: int
    version: str


def latest_observations(instance: dg.DagsterInstance, key: dg.AssetKey) -> dict[str, Observed]:
    """Partition -> its latest observation of `key`."""
    latest = instance.event_log_storage.get_latest_storage_id_by_partition(key, OBSERVATION)
    if not latest:
        return {}
    records = instance.fetch_observations(
        dg.AssetRecordsFilter(asset_key=key, storage_ids=list(latest.values())), limit=len(latest)
    ).records
    return {
        r.partition_key: Observed(r.storage_id, r.asset_observation.tags.get(DATA_VERSION_TAG, ""))
        for r in records
    }
