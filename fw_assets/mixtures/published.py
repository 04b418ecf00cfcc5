"""The one reader of what the mixture assets published, for everything that runs after the plan
(`megatron_indexes`, `packed`, `explain`, the demo): plan.json's stages by name, and in a built
cache the walk from a blend sample to the pieces of documents it covers, read the way Megatron's
`BlendedDataset` and `GPTDataset` read them."""

import json
from functools import cache
from pathlib import Path

from fw_assets.formats.indexed_dataset import IndexedDatasetReader
from fw_assets.mixtures.megatron.blended_dataset import CachedBlend
from fw_assets.mixtures.megatron.blended_megatron_dataset_builder import SplitCache, stage_caches
from fw_assets.mixtures.megatron.blended_megatron_dataset_config import CacheSettings
from fw_assets.mixtures.megatron.gpt_dataset import CachedGPTDataset
from fw_assets.mixtures.stage_plan import Member, StagePlan, TokenFile
from fw_assets.paths import plan_path


def read_plan(root: Path, recipe: str) -> dict:
    """The published plan.json of `recipe` under the output root."""
    return json.loads(plan_path(root, recipe).read_text())


def stage_names(plan: dict) -> list[str]:
    """The names of a plan.json's stages, in training order."""
    return [stage["name"] for phase in plan["phases"] for stage in phase["stages"]]


def planned_stages(plan: dict) -> list[StagePlan]:
    """Every stage of a plan.json, in training order."""
    return [stage_from_plan_json(plan, name) for name in stage_names(plan)]


def stage_from_plan_json(plan: dict, name: str) -> StagePlan:
    """Stage `name` of a plan.json, as `plan_mixture` planned it."""
    for phase in plan["phases"]:
        for stage in phase["stages"]:
            if stage["name"] != name:
                continue
            members = tuple(
                Member(TokenFile(**{k: v for k, v in m.items() if k != "weight"}), m["weight"])
                for m in stage["members"]
            )
            settings = CacheSettings(plan["seed"], phase["seq_length"], plan["split"], plan["training_tokenizer"])
            return StagePlan(phase["name"], name, stage["tokens"], phase["seq_length"], stage["temperature"],
                             stage["weights"], members, tuple(stage["num_samples"]), settings,
                             stage["data_args"], tuple(stage["megatron_args"]))
    raise KeyError(f"plan of recipe {plan['recipe']} has no stage {name!r} (stages: {stage_names(plan)})")


def split_cache(stage: StagePlan, split: str) -> SplitCache:
    """The cache files of one split of `stage`; a KeyError for a split the stage leaves empty."""
    for found in stage_caches(stage):
        if found.split == split:
            return found
    raise KeyError(f"stage {stage.name} has no {split} split (split {stage.cache.split!r})")


class BlendSamples:
    """The built blend of one split of a stage, in `cache_dir`: which member and which of its
    samples each blend sample is, and the pieces of documents it covers (memory-mapped, nothing
    built or read whole)."""

    def __init__(self, stage: StagePlan, cache_dir: Path, split: str) -> None:
        self.stage, self.split = stage, split
        self._cache, self._dir = split_cache(stage, split), Path(cache_dir)
        self.blend = CachedBlend(self._dir / self._cache.blend_stem)
        self.token_reader = cache(lambda member: IndexedDatasetReader(Path(stage.members[member].file.path)))
        self._member = cache(lambda member: CachedGPTDataset(
            self._dir / self._cache.member_stem(member), self.token_reader(member).sequence_lengths))

    def __len__(self) -> int:
        return len(self.blend)

    def pieces(self, sample: int) -> tuple[int, int, list[tuple[int, int, int]]]:
        """(member, its sample, [(document, offset, length)]) of blend sample `sample`; the lengths
        add up to seq_length + 1 (the tokens and the last label)."""
        member, member_sample = self.blend[sample]
        return member, member_sample, self._member(member).pieces(member_sample)
