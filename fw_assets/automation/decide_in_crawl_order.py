"""`decide_in_crawl_order`: the sensor that evaluates the automation conditions of group
`fineweb_edu_kept` (`deduplicated`, `tokenized`; fw_assets.crawl_order).

Dagster's own automation sensor, not a hand-written one: the rule is Dagster's (a dump's decisions
wait while a signing run they read is queued, in progress or still to be launched by a backfill, and
run once after it), and so is its record: each tick's evaluation, shown per dump in the UI under
Automation, says which sub-condition holds a dump back. One run per dump (not one backfill per
tick), tagged with the dump like every other run of it.
"""

import dagster as dg

from fw_assets import settings
from fw_assets.partitions import KEPT_GROUP

decide_in_crawl_order = dg.AutomationConditionSensorDefinition(
    "decide_in_crawl_order",
    target=dg.AssetSelection.groups(KEPT_GROUP),
    default_status=dg.DefaultSensorStatus.RUNNING,
    minimum_interval_seconds=settings.automation_interval_seconds(),
    emit_backfills=False,
    description="Decides and tokenizes each dump once it and every earlier dump it reads are signed "
    "(none queued, in progress or in an open backfill), and once more after each later change of "
    "them. Interval: $FW_AUTOMATION_INTERVAL_SECONDS (30).",
)
