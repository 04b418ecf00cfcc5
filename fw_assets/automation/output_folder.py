"""The sensors' side of one instance per output folder (fw_assets.resources.claim_output_folder):
a tick on an instance that holds another folder's history does nothing and says why."""

import dagster as dg

from fw_assets.resources import AnotherOutputFolder, FineWebStorage


def refused_folder(context: dg.SensorEvaluationContext, storage: FineWebStorage) -> str | None:
    """None when the instance's output folder is the storage's (claimed if it had none); else the
    refusal, logged as an error, for the tick's skip reason."""
    try:
        storage.claim(context.instance)
    except AnotherOutputFolder as refused:
        context.log.error(str(refused))
        return str(refused)
    return None
