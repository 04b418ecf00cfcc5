"""A recipe resolved against the token files present: which prefixes each stage blends, with what
weights, how many samples training will ask for, and the flags that make it ask for exactly those.

`plan_mixture` reads only the token files' indexes (`.idx`, and with fresh documents the
`.docs.parquet` ids that order them) and takes every path explicitly, so the Dagster asset, the
tests and the benchmark call it the same way; with fresh documents or reweighted sources it also
chooses each stage's views, which `views.write_views` writes before the stages' caches are built. The
classes a plan is made of are in `stage_plan`, below every module that reads them.
A reweighted source's probe losses come from `read_losses` (see `reweighted`).
"""

import fnmatch
import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from fw_assets import paths, settings
from fw_assets.formats.indexed_dataset import IndexedDatasetReader
from fw_assets.mixtures.megatron.blended_dataset import MAX_DATASETS
from fw_assets.mixtures.megatron.blended_megatron_dataset_builder import (
    DATASET_SURPLUS,
    samples_per_dataset,
    split_documents,
)
from fw_assets.mixtures.megatron.blended_megatron_dataset_config import CacheSettings, split_matrix
from fw_assets.mixtures.megatron.utils import SPLITS, normalize
from fw_assets.mixtures.recipe import Phase, Recipe, RecipeError, Source, Stage
from fw_assets.mixtures.reweighted import (
    HeldOutDropped,
    LossReader,
    SourceReweighting,
    reweight_sources,
    whole_file_documents,
)
from fw_assets.mixtures.stage_plan import Member, StagePlan, TokenFile
from fw_assets.mixtures.views import DocumentPools, ViewSelection


@dataclass(frozen=True)
class MixturePlan:
    recipe: Recipe
    stages: tuple[StagePlan, ...]
    cache_dir: str  # as training sees it
    fingerprint: str
    views: tuple[ViewSelection, ...] = ()  # with fresh documents: each stage's view of each file
    reweighted: tuple[SourceReweighting, ...] = ()  # the sources with `reweight:`

    def stage(self, name: str) -> StagePlan:
        for stage in self.stages:
            if stage.name == name:
                return stage
        raise KeyError(f"recipe {self.recipe.name} has no stage {name!r} (stages: {[s.name for s in self.stages]})")

    def to_json(self) -> dict:
        """plan.json: the recipe's name, fingerprint, cache folder and Megatron settings, then each
        phase's stages with their weights, sample counts and flags, and each stage's members (for
        reports and `explain`)."""
        phases = []
        for phase in self.recipe.phases:
            stages = [_stage_json(stage) for stage in self.stages if stage.phase == phase.name]
            phases.append({"name": phase.name, "seq_length": phase.seq_length, "stages": stages})
        megatron = self.recipe.megatron
        return {
            "recipe": self.recipe.name,
            "fingerprint": self.fingerprint,
            "cache_dir": self.cache_dir,
            "seed": megatron.seed,
            "split": megatron.split,
            "tokenizer": self.recipe.tokenizer,
            "training_tokenizer": megatron.tokenizer_identity,
            "export": list(self.recipe.export),
            "phases": phases,
        }


def _stage_json(stage: StagePlan) -> dict:
    return {
        "name": stage.name,
        "tokens": stage.tokens,
        "temperature": stage.temperature,
        "weights": stage.shares,
        "num_samples": list(stage.num_samples),
        "data_args": stage.data_args_path,
        "megatron_args": list(stage.megatron_args),
        "members": [{"weight": m.weight, **asdict(m.file)} for m in stage.members],
    }


def plan_mixture(recipe: Recipe, output_root: Path, dumps: Sequence[str],
                 read_losses: LossReader | None = None) -> MixturePlan:
    """Plan `recipe` over the token files of `dumps` under `output_root` (and the probe losses
    `read_losses` gives, for reweighted sources)."""
    # the paths training will write (and Megatron hashes): under data_root, else this absolute path
    data_root = Path(recipe.megatron.data_root or os.path.abspath(output_root))
    files = find_token_files(recipe, output_root, data_root, sorted(dumps))
    sample_counts = _stage_train_samples(recipe)
    valid_test = _eval_samples(recipe, sum(sample_counts))
    transitions = _phase_transitions(recipe, sample_counts)
    cache_dir = str(paths.mixture_cache_dir(data_root, recipe.name))
    stages, views = [], []
    pools = DocumentPools(recipe.megatron.seed, split_matrix(recipe.megatron.split))
    reweighted = reweight_sources(recipe, files, read_losses)
    limits = SizeLimits(recipe, *settings.mixture_limits())
    limits.check_reweighted(reweighted.values())
    for weighting in reweighted.values():
        for file in weighting.files:
            pools.reweight(file.path, weighting.repetitions(file))
    for (phase, stage), train_samples in zip(recipe.phase_stages(), sample_counts):
        cache = CacheSettings(recipe.megatron.seed, phase.seq_length, recipe.megatron.split,
                              recipe.megatron.tokenizer_identity)
        if recipe.fresh_documents:
            available = {name: [pools.eligible(f, phase.min_doc_tokens) for f in found]
                         for name, found in files.items()}
            shares = source_shares(recipe.sources, available, stage.temperature)
            members = _members(recipe, shares, available)
            limits.check(phase, stage, members, train_samples + sum(valid_test))
            selections = _stage_views(recipe, output_root, data_root, pools, phase, stage, members, train_samples)
            members = tuple(Member(s.view, m.weight) for s, m in zip(selections, members))
            views += selections
        else:
            selections = _whole_file_views(recipe, output_root, data_root, stage, reweighted)
            view_of = {s.file.path: s.view for s in selections}
            read = {name: [view_of.get(f.path, f) for f in found] for name, found in files.items()}
            shares = source_shares(recipe.sources, read, stage.temperature)
            members = _members(recipe, shares, read)
            limits.check(phase, stage, members, train_samples + sum(valid_test))
            views += selections
        _check_splits_have_documents(recipe, members, cache)
        data_args = str(paths.data_args_path(data_root, recipe.name, stage.name))
        args = _megatron_args(recipe, phase, sum(sample_counts), transitions, data_args, cache_dir)
        stages.append(StagePlan(phase.name, stage.name, stage.tokens, phase.seq_length,
                                stage.temperature, shares, members, (train_samples, *valid_test),
                                cache, data_args, args))
    fingerprint = _fingerprint(recipe, stages)
    return MixturePlan(recipe, tuple(stages), cache_dir, fingerprint, tuple(views), tuple(reweighted.values()))


def _whole_file_views(recipe: Recipe, output_root: Path, data_root: Path, stage: Stage,
                      reweighted: dict[str, SourceReweighting]) -> list[ViewSelection]:
    """Without fresh documents: the stage's view of each reweighted file (the whole file, each
    document listed its repetitions times; see `reweighted.whole_file_documents`)."""
    splits = split_matrix(recipe.megatron.split)
    selections = []
    for weighting in reweighted.values():
        for file in weighting.files:
            repetitions = weighting.repetitions(file)
            try:
                documents, train = whole_file_documents(file.documents, repetitions, splits)
            except HeldOutDropped as error:
                raise _drop_refused(recipe, file, error) from error
            except ValueError as error:
                raise RecipeError(recipe.path, "megatron.split", f"{file.path}: {error}") from error
            lengths = IndexedDatasetReader(Path(file.path)).sequence_lengths
            prefix = str(paths.view_prefix(data_root, recipe.name, stage.name, file.bucket, file.dump))
            path = str(paths.view_prefix(output_root, recipe.name, stage.name, file.bucket, file.dump))
            view = TokenFile(file.source, file.bucket, file.dump, path, prefix,
                             len(documents), int(lengths[documents].sum(dtype=np.int64)))
            listed = np.unique(documents[:train])
            selections.append(ViewSelection(stage.name, file, view, documents, train, 0, train > len(listed),
                                            len(listed), int(lengths[listed].sum(dtype=np.int64)), 0))
    return selections


def _drop_refused(recipe: Recipe, file: TokenFile, error: HeldOutDropped) -> RecipeError:
    """The drop, not the split, is what emptied a held-out split of a reweighted file's view."""
    share = next(s.reweight.drop_top_share for s in recipe.sources if s.name == file.source)
    return RecipeError(recipe.path, f"sources.{file.source}.reweight.drop_top_share", (
        f"{file.path}: the drop of the top {share:.0%} by loss {error}: lower drop_top_share, or hold "
        "more documents out (megatron.split)"))


class SizeLimits:
    """What a recipe implies, figured from its sample counts and the token files' counts before
    anything is allocated: the memory of one stage's index build (the largest part of which is also
    its cache on disk) and the disk of every stage's cache and views, each against its limit."""

    def __init__(self, recipe: Recipe, memory_gib: float, disk_gib: float) -> None:
        self.recipe, self.memory_gib, self.disk_gib = recipe, memory_gib, disk_gib
        self.disk = 0

    def check_reweighted(self, reweighted) -> None:
        """The views of reweighted sources, before any is listed: each lists a document its
        repetitions times (memory: its positions and lengths, ~16 bytes an entry, for every stage;
        disk: ~48 bytes an entry of a whole-file view, written for every stage)."""
        stages, memory = len(self.recipe.phase_stages()), 0
        for weighting in reweighted:
            listed = int(weighting.weighting.repetitions.sum(dtype=np.int64)) * stages
            memory += 16 * listed
            self.disk += 0 if self.recipe.fresh_documents else 48 * listed  # fresh views: counted by `check`
            for what, needed, limit, env in (("memory", memory, self.memory_gib, settings.MAX_MEMORY_ENV),
                                             ("disk", self.disk, self.disk_gib, settings.MAX_DISK_ENV)):
                if needed > limit * 2**30:
                    raise RecipeError(self.recipe.path, f"sources.{weighting.source}.reweight", (
                        f"{listed:,} document entries over {stages} stage(s) need about {needed / 2**30:,.2f} GiB of "
                        f"{what} for the views listing its documents as often as the reweighting says, over the limit "
                        f"of {limit:g} GiB ({env}): lower max_multiplier, or raise the limit if this host has it"))

    def check(self, phase: Phase, stage: Stage, members: tuple[Member, ...], samples: int) -> None:
        """`samples`: the stage's train, valid and test samples together."""
        built = samples_per_dataset(normalize([float(m.weight) for m in members]), samples, DATASET_SURPLUS)
        # per member: document_index (4 bytes a document per epoch), sample_index (16) and
        # shuffle_index (8) per sample; per blend sample 10 bytes (dataset and sample index)
        slots = sum(m.file.documents * -(-(count * phase.seq_length + 1) // max(m.file.tokens, 1))
                    for m, count in zip(members, built))
        memory = 4 * slots + 24 * sum(built) + 10 * samples
        self.disk += memory + (48 * slots if self.recipe.fresh_documents else 0)  # a view lists each document slot
        key = f"phases[{self.recipe.phases.index(phase)}].tokens"
        for what, needed, limit, env in (("memory", memory, self.memory_gib, settings.MAX_MEMORY_ENV),
                                         ("disk", self.disk, self.disk_gib, settings.MAX_DISK_ENV)):
            if needed > limit * 2**30:
                raise RecipeError(self.recipe.path, key, (
                    f"stage {stage.name}: {samples:,} samples of {phase.seq_length} tokens need about "
                    f"{needed / 2**30:,.1f} GiB of {what} for Megatron's indexes"
                    f"{' and views' if what == 'disk' and self.recipe.fresh_documents else ''}, over the limit of "
                    f"{limit:g} GiB ({env}): lower the tokens, or raise the limit if this host has it"))


def _stage_views(recipe: Recipe, output_root: Path, data_root: Path, pools: DocumentPools, phase: Phase,
                 stage: Stage, members: tuple[Member, ...], train_samples: int) -> list[ViewSelection]:
    """Each member's view for this stage, sized for the samples Megatron will build from it
    (the blend's surplus included) in one epoch of the view's train split."""
    built = samples_per_dataset(normalize([float(m.weight) for m in members]), train_samples, DATASET_SURPLUS)
    selections = []
    for member, samples in zip(members, built):
        file = member.file
        path, prefix = (paths.view_prefix(root, recipe.name, stage.name, file.bucket, file.dump)
                        for root in (output_root, data_root))
        view = TokenFile(file.source, file.bucket, file.dump, str(path), str(prefix), 0, 0)
        try:
            selections.append(pools.select(stage.name, file, view, phase.min_doc_tokens, samples, phase.seq_length))
        except HeldOutDropped as error:
            raise _drop_refused(recipe, file, error) from error
        except ValueError as error:
            key = f"phases[{recipe.phases.index(phase)}].min_doc_tokens" if phase.min_doc_tokens else "megatron.split"
            raise RecipeError(recipe.path, key, str(error)) from error
    return selections


def find_token_files(
    recipe: Recipe, output_root: Path, data_root: Path, dumps: list[str]
) -> dict[str, list[TokenFile]]:
    """Each source's token files, in recipe order: buckets as listed, dumps in key order."""
    present = {}
    for source in recipe.sources:
        chosen = _matching_dumps(recipe, source, dumps)
        present[source.name] = [
            (bucket, dump) for bucket in source.buckets for dump in chosen
            if not _bucket_is_empty(recipe, source.name, output_root, bucket, dump)
        ]
    _check_disjoint(recipe, present)
    count = sum(map(len, present.values()))
    if count > MAX_DATASETS:  # checked before any file is read
        raise RecipeError(recipe.path, "sources", f"{count} token files; a Megatron blend takes at most {MAX_DATASETS}")
    files = {}
    for source in recipe.sources:
        files[source.name] = [_token_file(recipe, source.name, output_root, data_root, bucket, dump)
                              for bucket, dump in present[source.name]]
        if not sum(f.tokens for f in files[source.name]):
            raise RecipeError(recipe.path, f"sources.{source.name}",
                              f"no tokens in buckets {list(source.buckets)} of the dumps it names")
    return files


def _check_disjoint(recipe: Recipe, present: dict[str, list[tuple[str, str]]]) -> None:
    """A token file belongs to one source: its weight is that source's."""
    owner = {}
    for source, pairs in present.items():
        for pair in pairs:
            if pair in owner:
                raise RecipeError(recipe.path, f"sources.{source}",
                                  f"bucket {pair[0]} of {pair[1]} is already in source {owner[pair]}")
            owner[pair] = source


def _token_file(recipe: Recipe, source: str, output_root: Path, data_root: Path, bucket: str, dump: str) -> TokenFile:
    path = paths.token_prefix(output_root, recipe.tokenizer, bucket, dump)
    reader = IndexedDatasetReader(path)
    prefix = str(paths.token_prefix(data_root, recipe.tokenizer, bucket, dump))
    return TokenFile(source, bucket, dump, str(path), prefix, reader.document_count, reader.token_count)


def _matching_dumps(recipe: Recipe, source: Source, dumps: list[str]) -> list[str]:
    if source.dumps is None:
        return dumps
    chosen = []
    for i, pattern in enumerate(source.dumps):
        matched = [dump for dump in dumps if fnmatch.fnmatchcase(dump, pattern)]
        if not matched:
            raise RecipeError(recipe.path, f"sources.{source.name}.dumps[{i}]",
                              f"{pattern!r} matches none of the dumps present ({len(dumps)}: {dumps[:5]}…)")
        chosen += [dump for dump in matched if dump not in chosen]
    return sorted(chosen)


def _bucket_is_empty(recipe: Recipe, source: str, output_root: Path, bucket: str, dump: str) -> bool:
    """True when the dump is tokenized but this bucket had no documents (it then has no files);
    a dump never tokenized, or a file missing from a set, is an error."""
    files = paths.token_files(paths.token_prefix(output_root, recipe.tokenizer, bucket, dump))
    present = [file.exists() for file in files]
    if all(present):
        return False
    key = f"sources.{source}"
    if any(present):
        missing = [str(f) for f, here in zip(files, present) if not here]
        raise RecipeError(recipe.path, key, f"incomplete tokenized files, missing {missing}")
    root = paths.tokenizer_dir(output_root, recipe.tokenizer)
    if not any(root.glob(f"*/{dump}.idx")):
        raise RecipeError(recipe.path, key, f"missing tokenized files: dump {dump} has none under {root} "
                                            "(materialize `tokenized` for it)")
    return True


def source_shares(sources: Sequence[Source], files: dict[str, list[TokenFile]], temperature: float) -> dict[str, float]:
    """P_s ∝ w_s^(1/T) over sources; a weight left out is the source's share of all tokens."""
    tokens = {name: sum(f.tokens for f in found) for name, found in files.items()}
    total = sum(tokens.values())
    weights = {s.name: tokens[s.name] / total if s.weight is None else s.weight for s in sources}
    scaled = {name: w ** (1.0 / temperature) if w > 0 else 0.0 for name, w in weights.items()}
    norm = sum(scaled.values())
    return {name: value / norm for name, value in scaled.items()}


def _members(recipe: Recipe, shares: dict[str, float], files: dict[str, list[TokenFile]]) -> tuple[Member, ...]:
    """A source's share split among its files by tokens (parts of one source keep one weight)."""
    members = []
    for source in recipe.sources:
        source_tokens = sum(f.tokens for f in files[source.name])
        for file in files[source.name]:
            weight = shares[source.name] * file.tokens / source_tokens
            if weight > 0:
                members.append(Member(file, repr(weight)))
    return tuple(members)


def _stage_train_samples(recipe: Recipe) -> list[int]:
    """Each stage's train samples, in training order."""
    return [stage.tokens // phase.seq_length for phase, stage in recipe.phase_stages()]


def _eval_samples(recipe: Recipe, total_train_samples: int) -> tuple[int, int]:
    """(valid, test) as Megatron-LM asks: (train_iters // eval_interval + 1) · eval_iters · gbs and
    eval_iters · gbs, with train_iters = the whole run's train samples // gbs."""
    m = recipe.megatron
    train_iters = total_train_samples // m.global_batch_size
    valid = (train_iters // m.eval_interval + 1) * m.eval_iters * m.global_batch_size
    return valid, m.eval_iters * m.global_batch_size


def _phase_transitions(recipe: Recipe, sample_counts: list[int]) -> list[int]:
    """Iterations where `--phase-transition-iterations` switches to the next stage's blend.

    Megatron switches at whole iterations and gives each stage the samples between two switches,
    so every stage but the last must be a whole number of global batches.
    """
    gbs = recipe.megatron.global_batch_size
    transitions, done = [], 0
    stages = recipe.phase_stages()
    for i, ((phase, stage), samples) in enumerate(zip(stages[:-1], sample_counts)):
        if samples % gbs:
            index = recipe.phases.index(phase)
            raise RecipeError(recipe.path, f"phases[{index}].tokens",
                              f"stage {stage.name} has {samples} samples, not a multiple of global_batch_size {gbs}")
        done += samples // gbs
        transitions.append(done)
    return transitions


def _check_splits_have_documents(recipe: Recipe, members: tuple[Member, ...], cache: CacheSettings) -> None:
    for bounds, split in zip(split_matrix(cache.split), SPLITS):
        if bounds is None:
            continue
        for member in members:
            begin, end = split_documents(bounds, member.file.documents)
            if end <= begin:
                raise RecipeError(
                    recipe.path, "megatron.split",
                    f"{member.file.path} has {member.file.documents} documents, none for the {split} split")


def _megatron_args(recipe: Recipe, phase: Phase, total_train_samples: int, transitions: list[int],
                   data_args: str, cache_dir: str) -> tuple[str, ...]:
    m = recipe.megatron
    args = [
        "--data-args-path", data_args,
        "--split", m.split,
        "--seq-length", str(phase.seq_length),
        "--seed", str(m.seed),
        "--train-samples", str(total_train_samples),
        "--global-batch-size", str(m.global_batch_size),
        "--eval-interval", str(m.eval_interval),
        "--eval-iters", str(m.eval_iters),
        "--data-cache-path", cache_dir,
        *m.tokenizer_args,
    ]
    if transitions:
        args += ["--phase-transition-iterations", ",".join(map(str, transitions))]
    return tuple(args)


def _fingerprint(recipe: Recipe, stages: list[StagePlan]) -> str:
    """Changes whenever a cache file's name or bytes could: the stages' blends and settings."""
    spec = [[_stage_json(stage), asdict(stage.cache)] for stage in stages]
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]
