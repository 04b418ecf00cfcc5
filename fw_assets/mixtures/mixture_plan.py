"""`mixture_plan`: a recipe resolved against the published token files, one partition per recipe:
plan.json, one `<stage>.data-args.txt` per stage, report.md, shares.png and, with fresh documents,
every stage's views under `mixtures/<recipe>/` and, per reweighted source, `losses-<source>.png`,
published together."""

import base64
import json
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import dagster as dg

from fw_assets.contracts.asset_checks import ContractReport, Events, check_specs
from fw_assets.lib import checksums
from fw_assets.lib.checksums import ALGORITHM
from fw_assets.lib.disk import SpaceNeed
from fw_assets.lib.memory import freed_memory_returned
from fw_assets.lib.publish import data_version, input_entry, staged_publication, trusted_record
from fw_assets.lib.versions import code_version
from fw_assets.mixtures import megatron
from fw_assets.mixtures.contract import (
    CURRICULUM_CHECKS,
    PLAN_CHECKS,
    REWEIGHT_CHECKS,
    check_epochs,
    check_sample_counts,
    check_token_files,
    curriculum_outcomes,
    member_figures,
    reweight_outcomes,
    source_stages,
)
from fw_assets.mixtures.loss_inputs import ALL_DUMPS_PROBED, HeldLosses
from fw_assets.mixtures.mixture_inputs import mixture_inputs
from fw_assets.mixtures.partitions import PER_RECIPE, recipe_file, recipe_partitions
from fw_assets.mixtures.plan import MixturePlan, plan_mixture
from fw_assets.mixtures.recipe import DEFAULT_EPOCH_WARNING, Recipe, RecipeError, load_recipe
from fw_assets.mixtures.report import (
    freshness_markdown,
    megatron_args_block,
    plan_report,
    plot_losses,
    plot_shares,
    prefix_table,
    reweighting_markdown,
    source_table,
    stage_table,
)
from fw_assets.mixtures.reweighted import highest_losses, text_starts, tie_warning
from fw_assets.mixtures.tokenized_inputs import ALL_DUMPS_TOKENIZED, tokenized_generations
from fw_assets.mixtures.views import view_lengths, write_views
from fw_assets.paths import (
    bin_path,
    data_args_path,
    loss_picture_path,
    plan_path,
    publication_name,
    report_path,
    shares_picture_path,
    views_dir,
)
from fw_assets.resources import FineWebStorage
from fw_assets.run_health import asset_code_version, writing_step

SQL = ()
MODULES = (
    *(f"fw_assets.mixtures.{name}"
      for name in ("recipe", "plan", "stage_plan", "contract", "report", "views", "reweighted")),
    "fw_assets.mixtures.reweighting",
    *megatron.MODULES,
    "fw_assets.formats.indexed_dataset",
    "fw_assets.lib.string_hashes",  # the repetition hashes and the fresh documents' seeded order
    "fw_assets.lib.hash_kernels",
    "fw_assets.formats.doc_index",  # the views' ids
)


PLAN_SPACE = SpaceNeed(2**20, "a few hundred kB of plan, data-args, report and picture; with fresh "
                       "documents also about 40 bytes per document a view lists")


class MixturePlanConfig(dg.Config):
    max_epochs: float = DEFAULT_EPOCH_WARNING  # the `epochs` check warns above this many passes


MIXTURE_PLAN_CHECK_SPECS = check_specs(
    "mixture_plan", PLAN_CHECKS + CURRICULUM_CHECKS + REWEIGHT_CHECKS, recipe_partitions
)


@dg.asset(
    **PER_RECIPE,
    deps=[ALL_DUMPS_TOKENIZED, ALL_DUMPS_PROBED, mixture_inputs],
    code_version=code_version(sql=SQL, modules=MODULES),
    check_specs=MIXTURE_PLAN_CHECK_SPECS,
    kinds={"json", "yaml"},
    description="A mixture recipe (`fw_assets/mixtures/<recipe>.yaml` or `$FW_MIXTURES_DIR`) "
    "planned over the published token files: `mixtures/<recipe>/plan.json` (stages, weights, "
    "sample counts, Megatron-LM flags), `<stage>.data-args.txt` for `--data-args-path`, report.md, "
    "shares.png (each source's share over training tokens) and, with `fresh_documents`, each "
    "stage's views of the token files (`views/<stage>/<bucket>/<dump>`; also without fresh documents "
    "for a source with `reweight:`, with `losses-<source>.png`).",
)
def mixture_plan(context: dg.AssetExecutionContext, config: MixturePlanConfig, storage: FineWebStorage) -> Events:
    name, root, log = context.partition_key, storage.output_root, context.log.info
    with (
        writing_step(context, root, PLAN_SPACE),
        freed_memory_returned(),  # its peak is per-document arrays of one phase, not of every phase
        staged_publication(root, publication_name("mixture_plan", name), name, log,
                           code_version=asset_code_version(context)) as staging,
    ):
        with _recipe_mistakes(name):
            recipe = load_recipe(recipe_file(name))
        # the token files stay the generations the plan reads until its views link them
        with tokenized_generations(root, recipe.tokenizer, log) as records, ExitStack() as held:
            losses = HeldLosses(root, log, held)  # a reweighted source's losses, held still like the token files
            with _recipe_mistakes(name):
                plan, figures = _plan(recipe, root, records, losses)
            rows = source_stages(plan)
            curriculum = curriculum_outcomes(plan, rows)
            report = ContractReport(name, "mixture_plan", [
                check_token_files(plan, records, root),
                check_sample_counts(plan),
                check_epochs(plan, figures, config.max_epochs),
                *curriculum,
                *reweight_outcomes(plan),
            ], kind="Recipe")
            _log_warnings(context, report)
            for weighting in plan.reweighted:
                if warning := tie_warning(weighting):
                    context.log.warning(f"Recipe {name}: source {weighting.source}: {warning}")
            yield from report.refuse_if_blocked()
            freshness = freshness_markdown(rows, curriculum)
            text = _report_text(plan, figures, rows, freshness, root)
            used = sorted({m.file.dump for stage in plan.stages for m in stage.members})
            contents = {
                "recipe": str(plan.recipe.path), "recipe_sha256": plan.recipe.sha256, "fingerprint": plan.fingerprint
            }
            inputs = {publication_name("tokenized", recipe.tokenizer, dump):
                      input_entry(records[dump], tokenizer=records[dump]["contents"]["tokenizer"]) for dump in used}
            published = staging.publish(_moves(root, name, plan, text, staging.path, records), contents,
                                        inputs={**inputs, **losses.inputs()})
    yield report.materialization(_metadata(plan, figures, text, freshness, root), data_version(published))


def _plan(recipe: Recipe, root: Path, records: dict, losses: HeldLosses) -> tuple[MixturePlan, dict]:
    """The plan of `recipe` over the token files of `records`, and each stage's figures."""
    plan = plan_mixture(recipe, root, sorted(records), losses)
    return plan, {stage.name: member_figures(stage, view_lengths(plan.views, stage.name)) for stage in plan.stages}


def _report_text(plan: MixturePlan, figures: dict, rows: list, freshness: str, root: Path) -> str:
    """report.md: the plan, its sources over training and, per reweighted source, what the
    reweighting did (with the text starts of its highest-loss documents)."""
    text = f"{plan_report(plan, figures)}\n## Sources over training\n\n{freshness}"
    if plan.reweighted:
        starts = text_starts(root, [(i, b, d) for w in plan.reweighted for i, b, d, *_ in highest_losses(w)])
        pictures = {w.source: loss_picture_path(root, plan.recipe.name, w.source).name for w in plan.reweighted}
        text += f"\n## Reweighted sources\n\n{reweighting_markdown(plan, rows, starts, pictures)}"
    return text


@contextmanager
def _recipe_mistakes(name: str) -> Iterator[None]:
    """A mistake in the recipe fails the step with the recipe's own message first, and only it:
    its trace would bury the message under Dagster's."""
    try:
        yield
    except RecipeError as error:
        raise dg.Failure(f"{error}. Nothing was published for recipe {name}: its previous plan and "
                         "indexes are unchanged.") from None


def _log_warnings(context: dg.AssetExecutionContext, report: ContractReport) -> None:
    """A failed non-blocking check, also in the run's log at WARNING: Dagster logs check results at
    DEBUG, which the CLI and the run's default log view leave out."""
    for outcome in report.outcomes:
        if not outcome.passed and not outcome.blocks:
            problems = "; ".join(v.describe() for v in outcome.violations)
            context.log.warning(f"Recipe {report.dump}: check {outcome.check.name} warns: {problems}")


def _moves(
    root: Path, name: str, plan: MixturePlan, report: str, staging: Path, records: dict[str, dict]
) -> dict[Path, Path | None]:
    """plan.json, each stage's data-args, report.md, shares.png and the views folder (whole: a
    plan without fresh documents removes it); files of the previous plan not written again (a
    stage no longer in the recipe) are removed."""
    files = {plan_path(root, name): json.dumps(plan.to_json(), indent=1),
             report_path(root, name): report}
    files |= {data_args_path(root, name, stage.name): stage.data_args for stage in plan.stages}
    moves: dict[Path, Path | None] = {}
    for target, text in files.items():
        staged = staging / target.name
        staged.write_text(text)
        moves[target] = staged
    moves[shares_picture_path(root, name)] = plot_shares(plan, staging / "shares.png")
    for weighting in plan.reweighted:
        picture = loss_picture_path(root, name, weighting.source)
        moves[picture] = plot_losses(weighting, staging / picture.name)
    views = views_dir(root, name)
    moves[views] = None
    if plan.views:
        write_views(plan.views, staging / "views")
        _remember_linked_tokens(root, plan, records, staging / "views")
        moves[views] = staging / "views"
    # a previous record that cannot be trusted names no file: its files not written again stay
    previous = trusted_record(root, publication_name("mixture_plan", name))
    for relative in previous["files"] if previous else ():
        if not (root / relative).is_relative_to(views):
            moves.setdefault(root / relative, None)
    return moves


def _remember_linked_tokens(root: Path, plan: MixturePlan, records: dict[str, dict], views: Path) -> None:
    """Each staged view's `.bin` is a hard link to its token file: its checksum is the token file's,
    as the token file's generation record holds it, and its record says which file it links (not
    read back, nor by the plan's readers: the tokens of every view). A copy (a link cannot cross
    filesystems) is read back when published."""
    for selection in plan.views:
        file = selection.file
        staged, original = bin_path(views / selection.stage / file.bucket / file.dump), bin_path(Path(file.path))
        if checksums.same_file(staged, original):
            entry = records[file.dump]["files"][str(original.relative_to(root))]
            checksums.remember(staged, entry[ALGORITHM], original)


def _metadata(plan: MixturePlan, figures: dict, report: str, freshness: str, root: Path) -> dict:
    picture = shares_picture_path(root, plan.recipe.name)
    encoded = base64.b64encode(picture.read_bytes()).decode()
    metadata = {
        "recipe": dg.MetadataValue.path(str(plan.recipe.path)),
        "plan": dg.MetadataValue.path(str(plan_path(root, plan.recipe.name))),
        "fingerprint": plan.fingerprint,
        "cache_dir": plan.cache_dir,
        "prefixes": len({m.file.prefix for stage in plan.stages for m in stage.members}),
        "stages": dg.MetadataValue.md(stage_table(plan.stages)),
        "report": dg.MetadataValue.md(report),
        # Dagster's UI renders markdown images from data URIs; the path is for reading it elsewhere.
        "shares": dg.MetadataValue.md(f"![each source's share over training tokens](data:image/png;base64,{encoded})"),
        "shares_png": dg.MetadataValue.path(str(picture)),
        "sources_over_training": dg.MetadataValue.md(freshness),
        "views": sum(1 for _ in plan.views),
    }
    for weighting in plan.reweighted:
        picture = loss_picture_path(root, plan.recipe.name, weighting.source)
        encoded = base64.b64encode(picture.read_bytes()).decode()
        metadata[f"losses_{weighting.source}"] = dg.MetadataValue.md(
            f"![probe losses of source {weighting.source}](data:image/png;base64,{encoded})")
        metadata[f"repeated_documents_{weighting.source}"] = int((weighting.weighting.repetitions > 1).sum())
        metadata[f"dropped_documents_{weighting.source}"] = int(weighting.weighting.dropped.sum())
        metadata[f"dropped_by_id_among_equal_losses_{weighting.source}"] = weighting.weighting.tied_dropped
    for stage in plan.stages:
        metadata[f"megatron_args_{stage.name}"] = dg.MetadataValue.md(megatron_args_block(stage))
        metadata[f"sources_{stage.name}"] = dg.MetadataValue.md(source_table(stage, figures[stage.name]))
        metadata[f"prefixes_{stage.name}"] = dg.MetadataValue.md(prefix_table(figures[stage.name]))
        metadata[f"train_samples_{stage.name}"] = stage.num_samples[0]
    return metadata
