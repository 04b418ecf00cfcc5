"""The `recipe_inputs` sensor: observes `mixture_inputs` once a minute, so that the UI shows a plan
stale as soon as its recipe is edited, a dump it reads is re-tokenized, or losses it reweights by
are re-scored, without anyone pressing "Observe sources".

It launches no run: each tick computes every recipe's inputs version (fw_assets.mixtures.recipe_version)
and records an observation, without a run, only for the recipes whose version differs from their
latest observation. `megatron_indexes` and `packed` refuse a stale plan whether observed or not.
"""

import dagster as dg

from fw_assets.automation.observations import latest_observations
from fw_assets.automation.output_folder import refused_folder
from fw_assets.lib.versions import DATA_VERSION_TAG
from fw_assets.mixtures.mixture_inputs import mixture_inputs
from fw_assets.mixtures.partitions import current_recipe_files
from fw_assets.mixtures.recipe_version import inputs_version
from fw_assets.resources import FineWebStorage


def record_changed_inputs(instance: dg.DagsterInstance, storage: FineWebStorage) -> list[str]:
    """Observe every recipe whose inputs version changed since its latest observation; returns
    their names."""
    observed = latest_observations(instance, mixture_inputs.key)
    changed = []
    for name, path in current_recipe_files().items():
        version = inputs_version(storage.output_root, path)
        if name not in observed or observed[name] != version:
            instance.report_runless_asset_event(
                dg.AssetObservation(mixture_inputs.key, partition=name, tags={DATA_VERSION_TAG: version})
            )
            changed.append(name)
    return changed


@dg.sensor(
    name="recipe_inputs",
    minimum_interval_seconds=60,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Observes mixture_inputs (each recipe's bytes, token generations and probe losses) "
    "once a minute, so that a plan shows stale in the UI once what it was made from changed.",
)
def recipe_inputs(context: dg.SensorEvaluationContext, storage: FineWebStorage) -> dg.SkipReason:
    if refused := refused_folder(context, storage):
        return dg.SkipReason(refused)
    changed = record_changed_inputs(context.instance, storage)
    if changed:
        return dg.SkipReason(f"Recorded new inputs of {', '.join(changed)}; launches no run.")
    return dg.SkipReason("Every recipe's inputs are as last observed.")
