"""The `stale_losses` sensor: probe losses follow new dumps.

A recipe whose sources say `reweight:` reads the losses of its probe for every dump it draws on, and
refuses losses scored on token files replaced since (fw_assets.formats.lineage). So once a dump is
tokenized, or tokenized again (a re-download through `new_dumps`, a re-decision after an earlier
dump was signed, a CLI run), each tick requests `probe_loss` of the dumps whose losses of the
configured probe are missing or stale, for the dumps a reweighting recipe draws on; meanwhile its
plan shows stale in the UI (`mixture_inputs` follows the token files and the losses).

Never beside a dump's own run (it waits for the chain to publish), never for token files that are
themselves stale (their dump is decided and tokenized again first), and once per token generation: the run
key holds it, so a failed run is not requested again until the dump is tokenized again. Recipes
reweighting by another probe than the configured one (`FW_PROBE_MODEL_DIR`) are named in the tick,
and so is each dump whose token or loss record cannot be trusted (fw_assets.formats.lineage.generation_state),
with the command that makes it again; the other dumps are scored as ever.
"""

import fnmatch

import dagster as dg

from fw_assets.automation.dump_runs import unfinished_runs
from fw_assets.automation.output_folder import refused_folder
from fw_assets.automation.skipped_dumps import skipped_note
from fw_assets.formats.lineage import generation_state
from fw_assets.jobs import probe_losses_job
from fw_assets.mixtures.partitions import current_recipe_files
from fw_assets.mixtures.recipe import RecipeError, load_recipe
from fw_assets.partitions import dump_partitions
from fw_assets.paths import publication_name
from fw_assets.probe.resources import ProbeResource
from fw_assets.resources import FineWebStorage


def reweighted_dumps(probes: dict[str, list[str]], dumps: list[str]) -> dict[str, set[str]]:
    """Probe -> the dumps of `dumps` some recipe's source reweighted by it draws on; `probes`
    collects, by probe, the recipes that name it."""
    wanted: dict[str, set[str]] = {}
    for name, path in current_recipe_files().items():
        try:
            recipe = load_recipe(path)
        except RecipeError:
            continue  # the plan says what is wrong with it
        for source in recipe.sources:
            if source.reweight is None:
                continue
            probes.setdefault(source.reweight.probe, []).append(name)
            globs = source.dumps or ("*",)
            wanted.setdefault(source.reweight.probe, set()).update(
                d for d in dumps if any(fnmatch.fnmatchcase(d, g) for g in globs))
    return wanted


def losses_to_score(root, probe: str, tokenizer: str, dumps: set[str]) -> tuple[dict[str, str], dict[str, str]]:
    """Dump -> run key, for each of `dumps` whose current token files have no losses of `probe`;
    and dump -> why not, for each whose token or loss record cannot be trusted."""
    requests, refused = {}, {}
    for dump in sorted(dumps):
        tokens = generation_state(root, publication_name("tokenized", tokenizer, dump), dump)
        losses = generation_state(root, publication_name("probe_loss", probe, dump), dump)
        if refusal := tokens.refusal or losses.refusal:
            refused[dump] = refusal
        elif tokens.record is None or tokens.changed:
            continue  # not tokenized, or to be tokenized again first
        elif losses.record is None or losses.changed:
            requests[dump] = f"{dump}@{probe}-tokens-{tokens.record['generation']}"
    return requests, refused


@dg.sensor(
    name="stale_losses",
    job=probe_losses_job,
    minimum_interval_seconds=60,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Runs probe_loss (the configured probe) of each dump a recipe reweights by it whose "
    "losses are missing or were scored on token files replaced since; one run per dump and token "
    "generation, never beside a run of the dump.",
)
def stale_losses(context: dg.SensorEvaluationContext, storage: FineWebStorage, probe: ProbeResource) -> dg.SensorResult:
    if refused := refused_folder(context, storage):
        return dg.SensorResult(skip_reason=refused)
    try:
        configured = probe.spec().name
    except ValueError as error:
        return dg.SensorResult(skip_reason=f"The configured probe cannot score: {error}")
    recipes: dict[str, list[str]] = {}
    wanted = reweighted_dumps(recipes, dump_partitions.get_partition_keys())
    others = "; ".join(
        f"probe {p} ({', '.join(sorted(set(r)))})" for p, r in sorted(recipes.items()) if p != configured
    )
    elsewhere = (
        f" Recipes reweighting by another probe than the configured {configured} score nothing here: {others}."
        if others
        else ""
    )
    if configured not in wanted:
        return dg.SensorResult(skip_reason=f"No recipe reweights by the configured probe {configured}.{elsewhere}")
    busy = unfinished_runs(context.instance)
    due, refused = losses_to_score(storage.output_root, configured, probe.tokenizer, wanted[configured] - set(busy))
    for dump, refusal in refused.items():
        context.log.warning(f"{dump}: skipped, {refusal}")
    for dump in due:
        context.log.info(f"{dump}: no losses of probe {configured} for its current token files; scoring them")
    if due:
        requests = [dg.RunRequest(run_key=key, partition_key=dump) for dump, key in due.items()]
        return dg.SensorResult(run_requests=requests)
    return dg.SensorResult(skip_reason=f"Every dump reweighted by probe {configured} has losses of its current "
                                       f"token files, or a run under way.{skipped_note(refused)}{elsewhere}")
