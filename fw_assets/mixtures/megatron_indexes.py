"""`megatron_indexes`: every file Megatron-Core's dataset builder would write for a recipe's
flags, under `mixtures/<recipe>/cache/` (`--data-cache-path`), one partition per recipe."""

from pathlib import Path

import dagster as dg

from fw_assets.contracts.asset_checks import ContractReport, Events, check_specs
from fw_assets.formats.lineage import checked_generation
from fw_assets.lib.cores import usable_cores
from fw_assets.lib.disk import SpaceNeed
from fw_assets.lib.publish import data_version, files_ending, input_entry, staged_publication
from fw_assets.lib.versions import code_version
from fw_assets.mixtures import megatron
from fw_assets.mixtures.contract import INDEX_CHECKS, blend_errors, check_blend_error
from fw_assets.mixtures.megatron.blended_megatron_dataset_builder import stage_caches, write_stage_cache
from fw_assets.mixtures.mixture_plan import mixture_plan
from fw_assets.mixtures.partitions import PER_RECIPE, recipe_partitions, refuse_an_edited_recipe
from fw_assets.mixtures.published import planned_stages, read_plan
from fw_assets.mixtures.report import blend_report, blend_table
from fw_assets.mixtures.stage_plan import StagePlan
from fw_assets.mixtures.tokenized_inputs import ALL_DUMPS_TOKENIZED, planned_dumps, tokenized_generations
from fw_assets.paths import blend_report_path, mixture_cache_dir, publication_name
from fw_assets.resources import FineWebStorage
from fw_assets.run_health import MIXTURES_POOL, asset_code_version, heavy_step, refusing_stale_inputs

SQL = ()
MODULES = (
    *(f"fw_assets.mixtures.{name}" for name in ("plan", "stage_plan", "published", "contract", "report")),
    *megatron.MODULES,
    "fw_assets.formats.indexed_dataset",
)


class MegatronIndexesConfig(dg.Config):
    workers: int = 0  # processes building the prefixes' indexes; 0 = one per usable core


MEGATRON_INDEXES_CHECK_SPECS = check_specs("megatron_indexes", INDEX_CHECKS, recipe_partitions)


@dg.asset(
    **PER_RECIPE,
    deps=[mixture_plan, ALL_DUMPS_TOKENIZED],
    code_version=code_version(sql=SQL, modules=MODULES),
    check_specs=MEGATRON_INDEXES_CHECK_SPECS,
    kinds={"numpy"},
    description="Megatron-Core's GPTDataset and BlendedDataset caches of every stage of the plan, "
    "byte for byte, in `mixtures/<recipe>/cache/`: pass `--data-cache-path` and rank 0 builds "
    "nothing. blend.md: each prefix's realized share against its target.",
)
def megatron_indexes(
    context: dg.AssetExecutionContext, config: MegatronIndexesConfig, storage: FineWebStorage
) -> Events:
    name, root, log = context.partition_key, storage.output_root, context.log.info
    with (
        refusing_stale_inputs(),
        # plan.json is read whole
        checked_generation(
            root, publication_name("mixture_plan", name), name, log, files_ending(".json")
        ) as plan_record,
    ):
        stages, tokenizer = _planned_stages(name, root, plan_record)
        refuse_an_edited_recipe(name, plan_record)
        workers = config.workers or usable_cores()
        with (
            heavy_step(context, root, MIXTURES_POOL, _space_needed(stages)),
            staged_publication(root, publication_name("megatron_indexes", name), name, log,
                               code_version=asset_code_version(context)) as staging,
            tokenized_generations(root, tokenizer, log, planned_dumps(plan_record, tokenizer)) as records,
        ):
            cache = staging.path / "cache"
            errors = {}
            for stage in stages:
                log(f"Building the indexes of stage {stage.name}: {len(stage.members)} prefixes, "
                    f"{stage.num_samples} samples, {min(workers, len(stage.members))} processes")
                write_stage_cache(stage, cache, min(workers, len(stage.members)))
                errors[stage.name] = blend_errors(stage, cache)
            report = ContractReport(name, "megatron_indexes",
                                    [check_blend_error([e for found in errors.values() for e in found])],
                                    kind="Recipe")
            yield from report.refuse_if_blocked()
            staged_report = staging.path / "blend.md"
            staged_report.write_text(blend_report(name, stages, errors))
            inputs = {
                publication_name("tokenized", tokenizer, dump): input_entry(record) for dump, record in records.items()
            }
            published = staging.publish(
                {mixture_cache_dir(root, name): cache, blend_report_path(root, name): staged_report},
                {"fingerprint": plan_record["contents"]["fingerprint"]},
                inputs={publication_name("mixture_plan", name): input_entry(plan_record), **inputs},
            )
    yield report.materialization(_metadata(stages, errors, published, workers, root, name), data_version(published))


def _planned_stages(name: str, root: Path, plan_record: dict | None) -> tuple[list[StagePlan], str]:
    if plan_record is None:
        raise dg.Failure(f"Recipe {name}: no published plan; materialize `mixture_plan` first "
                         f"(--select 'mixture_plan*' --partition {name}). Nothing was published.")
    plan = read_plan(root, name)
    return planned_stages(plan), plan["tokenizer"]


def _space_needed(stages: list[StagePlan]) -> SpaceNeed:
    """sample_index (8–16 bytes) and shuffle_index (4–8) per member sample, 10 per blend sample;
    document indexes are smaller than the sample indexes for documents longer than a sample."""
    total = 0
    for stage in stages:
        for cache in stage_caches(stage):
            total += 24 * sum(m["num_samples"] for m in cache.members) + 10 * cache.blend["size"]
    return SpaceNeed(total, "24 bytes per member sample and 10 per blend sample")


def _metadata(stages: list[StagePlan], errors: dict, published: dict, workers: int, root: Path, name: str) -> dict:
    metadata = {
        "cache": dg.MetadataValue.path(str(mixture_cache_dir(root, name))),
        "files": sum(1 for relative in published["files"] if "/cache/" in relative),
        "bytes": dg.MetadataValue.int(sum(entry["size"] for entry in published["files"].values())),
        "workers": workers,
        "usable_cores": usable_cores(),
    }
    for stage in stages:
        metadata[f"realized_shares_{stage.name}"] = dg.MetadataValue.md(blend_table(stage, errors[stage.name]))
        for e in errors[stage.name]:
            metadata[f"blend_samples_{stage.name}_{e.split}"] = e.size
    return metadata
