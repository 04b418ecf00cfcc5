"""The loaded definitions as the UI shows them: descriptions that survive markdown, and runs that
name their dump or recipe."""

import re

import dagster as dg

from fw_assets.definitions import defs
from fw_assets.mixtures.mixture_plan import mixture_plan
from fw_assets.mixtures.partitions import recipe_partitions
from fw_assets.run_health import DUMP_TAG, RECIPE_TAG
from fw_assets_tests.support.runs import resources

# `<dump>` outside a code span is an unknown HTML tag to the UI's markdown, and disappears.
PLACEHOLDER_OUTSIDE_CODE = re.compile(r"<[a-z_]+>")


def _outside_code(text: str) -> str:
    return re.sub(r"`[^`]*`", "", text)


def test_asset_and_check_descriptions_keep_their_placeholders_in_code_spans():
    graph = defs.resolve_asset_graph()
    texts = {str(key): graph.get(key).description or "" for key in graph.get_all_asset_keys()}
    for check_key in graph.asset_check_keys:
        texts[str(check_key)] = graph.get_check_spec(check_key).description or ""
    lost = {
        name: found for name, text in texts.items() if (found := PLACEHOLDER_OUTSIDE_CODE.findall(_outside_code(text)))
    }
    assert texts and not lost, f"markdown would drop these: {lost}"


def test_a_run_names_its_dump_in_its_tags(tokenized_sample):
    for dump, run in tokenized_sample.runs.items():
        assert run.tags[DUMP_TAG] == dump


def test_a_recipe_run_names_its_recipe_not_a_dump(sample_source, tmp_path):
    recipe = recipe_partitions.get_partition_keys()[0]
    with dg.DagsterInstance.ephemeral() as instance:
        # Nothing is tokenized under tmp_path, so the plan fails; the run still says whose it was.
        result = dg.materialize([mixture_plan], partition_key=recipe, instance=instance,
                                resources=resources(sample_source, tmp_path), raise_on_error=False)
        tags = instance.get_run_by_id(result.run_id).tags
    assert not result.success
    assert tags[RECIPE_TAG] == recipe and DUMP_TAG not in tags
