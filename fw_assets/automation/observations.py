"""The data version of each partition's latest observation of an observed asset, read the way the
UI compares them: what the sensors record when a run did not (or cannot) observe."""

import dagster as dg

from fw_assets.lib.versions import DATA_VERSION_TAG

OBSERVATION = dg.DagsterEventType.ASSET_OBSERVATION


def latest_observations(instance: dg.DagsterInstance, key: dg.AssetKey) -> dict[str, str]:
    """Partition -> the data version of its latest observation of `key`."""
    latest = instance.event_log_storage.get_latest_storage_id_by_partition(key, OBSERVATION)
    if not latest:
        return {}
    records = instance.fetch_observations(
        dg.AssetRecordsFilter(asset_key=key, storage_ids=list(latest.values())), limit=len(latest)
    ).records
    return {
        r.partition_key: r.asset_observation.tags.get(DATA_VERSION_TAG, "")
        for r in records
    }
