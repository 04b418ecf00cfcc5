"""Fixtures of the mixture tests. The expensive ones (assets materialized on the tokenized sample
dumps, caches built for Megatron to compare) are built once for the whole folder; a test that
changes what they published works on a copy."""

from types import SimpleNamespace

import dagster as dg
import pytest

from fw_assets.mixtures.megatron.blended_megatron_dataset_builder import write_stage_cache
from fw_assets.mixtures.published import read_plan, stage_from_plan_json
from fw_assets.mixtures.views import write_views
from fw_assets.settings import MIXTURES_DIR_ENV
from fw_assets_tests.support import curriculum, one_phase
from fw_assets_tests.support.materialized_mixtures import RECIPE, RECIPE_NAME, build, build_curriculum, write_recipe
from fw_assets_tests.support.megatron_oracle import BLEND_CASE, INT32_CASE, REWEIGHTED_CASE, write_case
from fw_assets_tests.support.trees import writable_copy


@pytest.fixture(scope="module")
def output_root(tmp_path_factory):
    """The one-phase recipe's token files."""
    return one_phase.write_tree(tmp_path_factory.mktemp("out"))


@pytest.fixture(scope="module")
def plenty(tmp_path_factory):
    """Enough documents in every file for every stage of the curriculum to read fresh ones."""
    return curriculum.write_tree(tmp_path_factory.mktemp("plenty"), {"4.0": 1_500, "3.5": 1_500, "3.0": 1_500})


@pytest.fixture(scope="module")
def scarce(tmp_path_factory):
    """`top` far too small: its documents must be reused, as evenly as possible."""
    return curriculum.write_tree(tmp_path_factory.mktemp("scarce"), {"4.0": 60, "3.5": 1_500, "3.0": 1_500})


@pytest.fixture(scope="module")
def process_group(tmp_path_factory):
    """Megatron builds a blend only under torch.distributed: a one-process gloo group (for the
    tests marked needs_extra("megatron"))."""
    import torch.distributed as dist

    store = tmp_path_factory.mktemp("gloo") / "store"
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


@pytest.fixture(scope="package", params=["blend", "int32", "reweighted"])
def case(request, tmp_path_factory):
    """A one-phase stage planned over one of the three cases, its cache built in `ours`."""
    spec = {"blend": BLEND_CASE, "int32": INT32_CASE, "reweighted": REWEIGHTED_CASE}[request.param]
    root = tmp_path_factory.mktemp(request.param)
    stage, ours = write_case(root, spec)
    return SimpleNamespace(spec=spec, stage=stage, ours=ours, root=root)


@pytest.fixture(scope="package")
def curriculum_cache(tmp_path_factory):
    """The curriculum planned over a small tree, its views written and every stage's cache built:
    (plan, cache folder, root)."""
    root = tmp_path_factory.mktemp("curriculum")
    output = curriculum.write_tree(root / "out", {"4.0": 400, "3.5": 1_000, "3.0": 1_500})
    mixture = curriculum.plan(root, output, curriculum.CURRICULUM)
    write_views(mixture.views)
    cache = root / "ours"
    for stage in mixture.stages:
        write_stage_cache(stage, cache)
    return mixture, cache, root


@pytest.fixture(scope="package")
def tokenized_output(tokenized_sample, tmp_path_factory):
    """Both sample dumps through the chain and `tokenized` (cl100k): a copy of the session's run
    that the recipes build in."""
    return writable_copy(tokenized_sample.output, tmp_path_factory.mktemp("fineweb") / "output")


@pytest.fixture(scope="package")
def recipe_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("recipes")
    write_recipe(folder, RECIPE)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(MIXTURES_DIR_ENV, str(folder))
        yield folder


@pytest.fixture(scope="package")
def demo_built(sample_source, tokenized_output, recipe_dir):
    """mixture_plan and megatron_indexes of the test recipe: (output root, run result, stage)."""
    with dg.DagsterInstance.ephemeral() as instance:
        result = build(sample_source, tokenized_output, instance=instance)
    assert result.success
    return tokenized_output, result, stage_from_plan_json(read_plan(tokenized_output, RECIPE_NAME), "main")


@pytest.fixture(scope="package")
def curriculum_built(sample_source, tokenized_output):
    """mixture_plan, megatron_indexes and packed of the shipped curriculum: (output root, run result)."""
    result = build_curriculum(sample_source, tokenized_output)
    assert result.success
    return tokenized_output, result
