"""A stage's Megatron cache: the files Megatron-Core 0.16's `BlendedMegatronDatasetBuilder`
(`blended_megatron_dataset_builder.py`) writes for the stage's flags, with the same names and bytes,
so `--data-cache-path` finds them all and training builds nothing.

Per split (train, valid, test; an empty split has none): one GPTDataset per member prefix, built
with the blend's 0.5 % surplus of samples (`_build_blended_dataset_splits`,
`_get_size_per_split_per_dataset`), each over its split's documents (`_build_megatron_dataset_splits`),
and the BlendedDataset over them.

Ours differs in form only: it takes a planned stage instead of a config and a blend, computes every
description before building anything (`stage_caches`, for the plan's checks and reports), and builds
the members in processes while one thread draws the blends (Megatron builds them on rank 0 in turn).
"""

from __future__ import annotations

import math
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fw_assets.formats.indexed_dataset import IndexedDatasetReader
from fw_assets.mixtures.megatron.blended_dataset import BLEND_FILES, blend_description, build_blend_indexes
from fw_assets.mixtures.megatron.blended_megatron_dataset_config import split_matrix
from fw_assets.mixtures.megatron.gpt_dataset import GPT_FILES, build_gpt_indexes, gpt_description
from fw_assets.mixtures.megatron.megatron_dataset import cache_file_stem, description_text
from fw_assets.mixtures.megatron.utils import SPLITS, normalize
from fw_assets.mixtures.stage_plan import StagePlan

# `mid_level_dataset_surplus`: each member dataset is built this much larger than the blend needs
DATASET_SURPLUS = 0.005


def split_documents(bounds: tuple[float, float], document_count: int) -> tuple[int, int]:
    """The [begin, end) sequence numbers of one split of a dataset of `document_count` sequences.

    Python's round (half to even) of float products, as `_build_megatron_dataset_splits` does."""
    lo, hi = bounds
    return int(round(lo * float(document_count))), int(round(hi * float(document_count)))


def samples_per_dataset(weights: list[float], split_size: int, surplus: float = 0.0) -> list[int]:
    """Samples each dataset contributes to (surplus 0) or builds for (the surplus) a blend split,
    as `_get_size_per_split_per_dataset`: two ceilings of Python floats, in this order."""
    return [int(math.ceil(math.ceil(split_size * w) * (1 + surplus))) for w in weights]


@dataclass(frozen=True)
class SplitCache:
    """The descriptions of one split's datasets, and the samples the blend takes from each."""

    split: str
    members: tuple[dict, ...]  # GPTDataset descriptions, in blend order
    documents: tuple[tuple[int, int], ...]  # each member's [begin, end) sequence numbers
    blend: dict  # the BlendedDataset description
    drawn: tuple[int, ...]  # samples the blend is planned to draw from each member

    @property
    def blend_stem(self) -> str:
        return cache_file_stem(self.blend)

    def member_stem(self, i: int) -> str:
        return cache_file_stem(self.members[i])

    def file_names(self) -> list[str]:
        names = [f"{self.blend_stem}-{kind}" for kind in BLEND_FILES]
        for i in range(len(self.members)):
            names += [f"{self.member_stem(i)}-{kind}" for kind in GPT_FILES]
        return names


def stage_caches(stage: StagePlan) -> list[SplitCache]:
    """What Megatron will look for, computed without building anything."""
    weights = normalize([float(member.weight) for member in stage.members])  # once, by the builder
    blend_weights = normalize(weights)  # again, by BlendedDataset
    caches = []
    for bounds, split, size in zip(split_matrix(stage.cache.split), SPLITS, stage.num_samples):
        if bounds is None:
            continue
        built = samples_per_dataset(weights, size, DATASET_SURPLUS)
        drawn = samples_per_dataset(weights, size)
        members = tuple(
            gpt_description(member.file.prefix, samples, split, stage.cache)
            for member, samples in zip(stage.members, built)
        )
        documents = tuple(split_documents(bounds, m.file.documents) for m in stage.members)
        blend = blend_description(list(members), split, blend_weights, sum(drawn))
        caches.append(SplitCache(split, members, documents, blend, tuple(drawn)))
    return caches


def write_stage_cache(stage: StagePlan, cache_dir: Path, workers: int = 1) -> list[Path]:
    """Build and write every cache file of `stage` into `cache_dir`; returns the paths written.

    With `workers` > 1, that many processes build the member prefixes side by side while a
    thread draws the blends (the compiled greedy loop runs without the GIL): the blend of a
    long run takes as long as all its members, and needs nothing from them.
    """
    cache_dir = Path(cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    caches = stage_caches(stage)
    members = range(len(stage.members))
    if workers > 1:
        # spawned, not forked: the parent runs a thread
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(workers, context, _start_worker, (stage, caches, cache_dir)) as pool, \
                ThreadPoolExecutor(1) as thread:
            blends = [thread.submit(_draw_blend, cache, cache_dir) for cache in caches]
            member_samples = list(pool.map(_write_member, members))
            drawn = [blend.result() for blend in blends]
    else:
        _start_worker(stage, caches, cache_dir)
        member_samples = [_write_member(i) for i in members]
        drawn = [_draw_blend(cache, cache_dir) for cache in caches]
    written = [path for paths, _ in member_samples for path in paths]
    for k, (cache, (paths, counts)) in enumerate(zip(caches, drawn)):
        available = [samples[k] for _, samples in member_samples]
        written += _finish_blend(cache, paths, counts, available, cache_dir)
    return written


_WORK: dict = {}  # what every member task of a worker needs, sent once per worker


def _start_worker(stage: StagePlan, caches: list[SplitCache], cache_dir: Path) -> None:
    _WORK.update(stage=stage, caches=caches, cache_dir=cache_dir)


def _write_member(i: int) -> tuple[list[Path], list[int]]:
    """Member i's GPTDataset files for every split; returns them and each split's sample count."""
    stage, caches, cache_dir = _WORK["stage"], _WORK["caches"], _WORK["cache_dir"]
    lengths = IndexedDatasetReader(Path(stage.members[i].file.path)).sequence_lengths
    written, samples = [], []
    for cache in caches:
        description = cache.members[i]
        indexes = build_gpt_indexes(lengths, cache.documents[i], description["num_samples"],
                                    stage.seq_length, stage.cache.seed)
        stem = cache_dir / cache.member_stem(i)
        written += _save(stem, description, {
            "document_index.npy": indexes.document_index,
            "sample_index.npy": indexes.sample_index,
            "shuffle_index.npy": indexes.shuffle_index,
        })
        samples.append(len(indexes.sample_index) - 1)
    return written, samples


def _draw_blend(cache: SplitCache, cache_dir: Path) -> tuple[list[Path], np.ndarray]:
    """The blend's indexes, drawn straight into their `.npy` files (a 1T-token blend's 2.4 GB
    never has to fit in memory; open_memmap writes np.save's header and bytes); returns them
    and the samples drawn from each member."""
    stem = cache_dir / cache.blend_stem
    paths = [Path(f"{stem}-{kind}") for kind in ("dataset_index.npy", "dataset_sample_index.npy")]
    size = cache.blend["size"]
    dataset_index = np.lib.format.open_memmap(paths[0], mode="w+", dtype=np.int16, shape=(size,))
    dataset_sample_index = np.lib.format.open_memmap(paths[1], mode="w+", dtype=np.int64, shape=(size,))
    for path in paths:
        with open(path, "r+b") as file:
            _claim_space(file, path, path.stat().st_size)
    build_blend_indexes(cache.blend["weights"], dataset_index, dataset_sample_index)
    drawn = np.bincount(dataset_index, minlength=len(cache.members))
    del dataset_index, dataset_sample_index  # flushes and unmaps
    return paths, drawn


def _finish_blend(cache: SplitCache, paths: list[Path], drawn: np.ndarray, available: list[int],
                  cache_dir: Path) -> list[Path]:
    """Refuse a blend that draws more samples from a member than it has, as Megatron does;
    else write its description (last: Megatron finds a cache by its files, never its contents)."""
    short = [(i, int(n), a) for i, (n, a) in enumerate(zip(drawn, available)) if n > a]
    if short:
        for path in paths:
            path.unlink()
        i, n, a = short[0]
        raise ValueError(f"the {cache.split} blend draws {n} samples from {cache.members[i]['dataset_path']}, "
                         f"which has {a} (Megatron would refuse it too)")
    return _save(cache_dir / cache.blend_stem, cache.blend, {}) + paths


def _save(stem: Path, description: dict, arrays: dict[str, np.ndarray]) -> list[Path]:
    paths = [Path(f"{stem}-description.txt")]
    paths[0].write_text(description_text(description))
    for kind, array in arrays.items():
        path = Path(f"{stem}-{kind}")
        with open(path, "wb") as file:
            _claim_space(file, path, array.nbytes)
            np.save(file, array, allow_pickle=True)
            file.truncate()  # to np.save's own length: the bytes are np.save(path)'s
        paths.append(path)
    return paths


def _claim_space(file, path: Path, size: int) -> None:
    """Allocate the file's bytes before writing them: a full disk is then an ENOSPC naming the
    file, not numpy's short write without an errno, nor a SIGBUS in a memory map."""
    try:
        os.posix_fallocate(file.fileno(), 0, max(size, 1))
    except OSError as error:
        raise OSError(error.errno, error.strerror, str(path)) from None
