"""The job that signs one dump, which the `new_dumps` sensor runs, and the one the `stale_losses`
sensor runs: a dump's probe losses.

`dump_signing` holds every asset of group `fineweb_edu` (raw to band_key_index). They share the dump
partitions and Dagster's default backfill policy (partitions.py), so a run of it is one dump tagged
`dagster/partition`, and a UI backfill of the group is one run per dump. The dump's decisions and
token files (group `fineweb_edu_kept`) follow by declarative automation (fw_assets.crawl_order).
"""

import dagster as dg

from fw_assets import settings
from fw_assets.partitions import SIGNING_GROUP

# The tag that sends a run to a Celery queue (dagster-celery's, read by fw_assets.deploy.celery_launcher).
CELERY_QUEUE_TAG = "dagster-celery/queue"

signing_job = dg.define_asset_job(
    "dump_signing",
    selection=dg.AssetSelection.groups(SIGNING_GROUP),
    description="Signs one dump: raw, sampled, bucketed, minhash and band_key_index. Its decisions "
    "and token files follow once every earlier dump in flight is signed too.",
)

probe_losses_job = dg.define_asset_job(
    "probe_losses",
    selection=dg.AssetSelection.groups("probe"),
    # every run of it, the stale_losses sensor's too, on the GPU host's queue when there is one
    tags={CELERY_QUEUE_TAG: settings.probe_queue()} if settings.probe_queue() else None,
    description="probe_loss of one dump: run by the stale_losses sensor for each dump whose losses a "
    "recipe reweights by are missing or were scored on token files replaced since.",
)
