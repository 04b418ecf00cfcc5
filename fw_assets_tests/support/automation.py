"""The decisions' declarative automation evaluated tick by tick in process, as the
`decide_in_crawl_order` sensor evaluates it in the daemon, over the instance a test materializes in."""

import dagster as dg

from fw_assets.definitions import defs
from fw_assets.partitions import KEPT_GROUP


class CrawlOrderTicks:
    """Each `tick()` is one evaluation of group `fineweb_edu_kept`'s automation conditions; it
    returns what it requests: asset name -> sorted dumps."""

    def __init__(self, instance: dg.DagsterInstance):
        self.instance = instance
        self.cursor = None

    def tick(self) -> dict[str, list[str]]:
        result = dg.evaluate_automation_conditions(
            defs=defs, instance=self.instance, cursor=self.cursor, asset_selection=dg.AssetSelection.groups(KEPT_GROUP)
        )
        self.cursor = result.cursor
        requested = {key.to_user_string(): sorted(result.get_requested_partitions(key)) for key in _kept_keys()}
        return {name: dumps for name, dumps in requested.items() if dumps}


def _kept_keys() -> list[dg.AssetKey]:
    return sorted(dg.AssetSelection.groups(KEPT_GROUP).resolve(defs.resolve_asset_graph()))


def decided(*dumps: str) -> dict[str, list[str]]:
    """What a tick requests to decide and tokenize `dumps`."""
    return {"deduplicated": sorted(dumps), "tokenized": sorted(dumps)}
