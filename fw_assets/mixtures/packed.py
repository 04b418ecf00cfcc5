"""`packed`: every stage's training samples as parquet rows under `mixtures/<recipe>/packed/`, for
trainers outside Megatron; only for recipes with `export: packed`, one partition per recipe."""

from pathlib import Path

import dagster as dg

from fw_assets.formats.lineage import checked_generation
from fw_assets.lib.disk import SpaceNeed
from fw_assets.lib.markdown import table
from fw_assets.lib.publish import Log, data_version, every_file, files_ending, input_entry, staged_publication
from fw_assets.lib.versions import code_version
from fw_assets.mixtures import megatron
from fw_assets.mixtures.megatron_indexes import megatron_indexes
from fw_assets.mixtures.packing import write_packed
from fw_assets.mixtures.partitions import PER_RECIPE, refuse_an_edited_recipe
from fw_assets.mixtures.published import planned_stages, read_plan
from fw_assets.mixtures.stage_plan import StagePlan
from fw_assets.mixtures.tokenized_inputs import ALL_DUMPS_TOKENIZED, planned_dumps, tokenized_generations
from fw_assets.paths import mixture_cache_dir, packed_dir, packed_root, publication_name
from fw_assets.resources import FineWebStorage
from fw_assets.run_health import MIXTURES_POOL, asset_code_version, heavy_step, refusing_stale_inputs, writing_step

SQL = ()
MODULES = (
    *(f"fw_assets.mixtures.{name}" for name in ("plan", "stage_plan", "published", "packing")),
    *megatron.MODULES,
    "fw_assets.formats.indexed_dataset",
)


@dg.asset(
    **PER_RECIPE,
    deps=[megatron_indexes, ALL_DUMPS_TOKENIZED],
    code_version=code_version(sql=SQL, modules=MODULES),
    output_required=False,  # a recipe without `export: packed` materializes nothing
    kinds={"parquet"},
    description="Only for recipes with `export: packed` (others: the step succeeds and "
    "materializes nothing): per stage `mixtures/<recipe>/packed/<stage>/part-*.parquet`, one row "
    "per training sample, `input_ids` and `labels` exactly as Megatron's blend gives them, and "
    "`documents` (where each document starts).",
)
def packed(context: dg.AssetExecutionContext, storage: FineWebStorage):
    name, root, log = context.partition_key, storage.output_root, context.log.info
    with (
        refusing_stale_inputs(),
        # plan.json is read whole
        checked_generation(
            root, publication_name("mixture_plan", name), name, log, files_ending(".json")
        ) as plan_record,
        # the samples' indexes are read whole
        checked_generation(root, publication_name("megatron_indexes", name), name, log, every_file) as indexes_record,
    ):
        plan, stages = _built_plan(name, root, plan_record, indexes_record)
        refuse_an_edited_recipe(name, plan_record)
        if "packed" not in plan.get("export", ()):  # plans written before exports existed have none
            with writing_step(context, root, SpaceNeed(0, "nothing: an earlier export is removed")):
                _remove_an_earlier_export(name, root, log, asset_code_version(context))
            log(f"Recipe {name} does not ask for `export: packed`: nothing to write, nothing materialized.")
            return
        with (
            heavy_step(context, root, MIXTURES_POOL, _space_needed(stages)),
            staged_publication(root, publication_name("packed", name), name, log,
                               code_version=asset_code_version(context)) as staging,
            # every sample's tokens are read: the token files' tokens, nearly whole
            tokenized_generations(
                root, plan["tokenizer"], log, planned_dumps(plan_record, plan["tokenizer"]), files_ending(".bin")
            ) as records,
        ):
            rows = {}
            published_root = packed_root(root, name)
            staged_root = staging.path / published_root.name
            for stage in stages:
                log(f"Packing stage {stage.name}: {stage.num_samples[0]:,} samples of {stage.seq_length} tokens")
                stage_dir = packed_dir(root, name, stage.name).relative_to(published_root)
                files = write_packed(stage, mixture_cache_dir(root, name), staged_root / stage_dir)
                rows[stage.name] = (stage.num_samples[0], len(files))
            inputs = {publication_name("tokenized", plan["tokenizer"], dump): input_entry(record)
                      for dump, record in records.items()}
            published = staging.publish(
                {published_root: staged_root}, {"rows": sum(r for r, _ in rows.values())},
                inputs={publication_name("mixture_plan", name): input_entry(plan_record),
                        publication_name("megatron_indexes", name): input_entry(indexes_record), **inputs},
            )
    yield dg.MaterializeResult(data_version=dg.DataVersion(data_version(published)), metadata={
        "packed": dg.MetadataValue.path(str(packed_root(root, name))),
        "bytes": dg.MetadataValue.int(sum(entry["size"] for entry in published["files"].values())),
        "stages": dg.MetadataValue.md(table(["stage", "rows", "files"], [(s, *r) for s, r in rows.items()])),
        "rows": sum(count for count, _ in rows.values()),
    })


def _built_plan(name: str, root: Path, plan_record: dict | None, indexes_record: dict | None
                ) -> tuple[dict, list[StagePlan]]:
    """plan.json and its stages (the indexes' record names the plan they were built from: an
    earlier plan's is refused as stale)."""
    if plan_record is None or indexes_record is None:
        raise dg.Failure(f"Recipe {name}: no published plan or indexes; materialize `mixture_plan*` "
                         f"first (--partition {name}). Nothing was published.")
    plan = read_plan(root, name)
    return plan, planned_stages(plan)


def _remove_an_earlier_export(name: str, root: Path, log: Log, code_version: str) -> None:
    """A recipe that no longer asks for the export keeps no packed samples of an older plan."""
    if packed_root(root, name).exists():
        with staged_publication(root, publication_name("packed", name), name, log,
                                code_version=code_version) as staging:
            staging.publish({packed_root(root, name): None},
                            {"removed": "the recipe no longer asks for export: packed"}, inputs={})
        log(f"Removed {packed_root(root, name)}: written for an earlier plan of the recipe.")


def _space_needed(stages: list[StagePlan]) -> SpaceNeed:
    total = sum(8 * stage.num_samples[0] * stage.seq_length for stage in stages)
    return SpaceNeed(total, "8 bytes per training token (input_ids and labels, int32, before compression)")
