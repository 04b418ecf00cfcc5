"""Sources with `reweight:` (seed 003 §11.6): each document of the source's reweighted buckets is
listed in a stage's view as many times as its probe loss says (fw_assets.mixtures.reweighting: the
top `drop_top_share` dropped, the others repeated up to `max_multiplier` times), so that Megatron
reads the reweighting as data and `explain` names every repetition.

Without fresh documents a stage's view of a reweighted file is the whole file as Megatron would
split it by position: its train documents, in file order, each listed its repetitions times, then
its held-out (validation and test) documents once each, a dropped document in no split. With fresh
documents the reweighting applies within each stage's fresh subset (see views.DocumentPools).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from fw_assets.paths import bucket_dump_dir
from fw_assets.formats.doc_index import read_document_index
from fw_assets.formats.indexed_dataset import IndexedDatasetReader
from fw_assets.lib.parquet_damage import READ_ERRORS, damage_explaining
from fw_assets.mixtures.megatron.blended_megatron_dataset_builder import split_documents
from fw_assets.mixtures.megatron.utils import SPLITS
from fw_assets.mixtures.recipe import Recipe, RecipeError, Reweight
from fw_assets.mixtures.reweighting import Reweighting, aligned_losses, reweight

# (probe, dump) -> that probe's published losses of the dump (columns id and loss at least); a
# probe with no losses of the dump, or damaged files, raise a ValueError saying so
LossReader = Callable[[str, str], pa.Table]

# TokenFile and ViewSelection are fw_assets.mixtures.plan's and views' (plan imports this module).


class HeldOutDropped(ValueError):
    """The drop of the highest losses left a held-out split of a view without a document."""


@dataclass(frozen=True)
class SourceReweighting:
    """One reweighted source: its documents (every file's, in file order) and what the rule made of them."""

    source: str
    reweight: Reweight
    files: tuple[TokenFile, ...]
    starts: tuple[int, ...]  # where each file's documents begin in the arrays below
    ids: tuple[str, ...]
    losses: np.ndarray
    lengths: np.ndarray
    weighting: Reweighting

    def repetitions(self, file: TokenFile) -> np.ndarray:
        """How often each document of `file` is listed (0: dropped)."""
        i = [f.path for f in self.files].index(file.path)
        return self.weighting.repetitions[self.starts[i]: self.starts[i] + self.files[i].documents]

    def covers(self, file: TokenFile) -> bool:
        return any(f.path == file.path for f in self.files)


def reweight_sources(recipe: Recipe, files: dict[str, list[TokenFile]], read_losses: LossReader | None
                     ) -> dict[str, SourceReweighting]:
    """Each reweighted source's documents and repetitions, keyed by source name; refusals (a
    probe without losses of a dump, uncovered documents, NaN losses) name the source's key."""
    reweighted = {}
    for source in recipe.sources:
        if source.reweight is None:
            continue
        key = f"sources.{source.name}.reweight"
        mine = [f for f in files[source.name] if f.bucket in source.reweight.buckets]
        try:
            reweighted[source.name] = _reweight_source(recipe, source.name, source.reweight, mine, read_losses)
        except ValueError as error:
            raise RecipeError(recipe.path, key, str(error).rstrip(".")) from error
    return reweighted


def _reweight_source(recipe: Recipe, name: str, rule: Reweight, files: list[TokenFile],
                     read_losses: LossReader | None) -> SourceReweighting:
    ids, losses, lengths, starts = [], [], [], []
    for file in files:
        if read_losses is None:
            raise ValueError(f"Dump {file.dump}: no probe losses were given to plan with")
        scored = read_losses(rule.probe, file.dump)
        mine = read_document_index(Path(file.path))["id"].combine_chunks()
        starts.append(len(ids))
        losses.append(aligned_losses(file.dump, mine, scored.column("id").combine_chunks(), scored.column("loss").to_numpy()))
        lengths.append(IndexedDatasetReader(Path(file.path)).sequence_lengths)
        ids += mine.to_pylist()
    all_losses = np.concatenate(losses) if losses else np.zeros(0)
    weighting = reweight(ids, all_losses, rule.max_multiplier, rule.drop_top_share, recipe.megatron.seed)
    return SourceReweighting(name, rule, tuple(files), tuple(starts), tuple(ids), all_losses,
                             np.concatenate(lengths) if lengths else np.zeros(0, np.int32), weighting)


def tie_warning(weighting: SourceReweighting) -> str | None:
    """What to tell when the drop's cut fell among equal losses (None otherwise): which of those
    documents were dropped is the order of their ids, not anything the probe said."""
    result = weighting.weighting
    if not result.tied_at_cut:
        return None
    loss = float(weighting.losses[result.by_loss[int(result.dropped.sum()) - 1]])  # the last one dropped
    return (f"{result.tied_at_cut:,} documents share the loss {loss:.4g} at the cut of the top "
            f"{weighting.reweight.drop_top_share:.1%}: {result.tied_dropped:,} of them were dropped by the order of "
            f"their ids, not by their loss (the probe cannot tell them apart)")


def whole_file_documents(documents: int, repetitions: np.ndarray,
                         splits: Sequence[tuple[float, float] | None]) -> tuple[np.ndarray, int]:
    """A reweighted file's view without fresh documents: (the documents it lists, how many are its
    train split). Train documents are the file's own train split (by position, as Megatron splits
    the file), each repeated; the view is sized so that Megatron's split of it ends the train split
    exactly there, and each held-out split takes the file's held-out documents of that split, in
    order, cycled or cut to the size Megatron's split of the view gives it."""
    if splits[0] is None:
        raise ValueError("the train split is empty: there is nothing to reweight")
    own = [None if bounds is None else np.arange(*split_documents(bounds, documents)) for bounds in splits]
    train = np.repeat(own[0], repetitions[own[0]])
    count = _count_with_train(len(train), splits[0][1])
    parts = [train]
    for split, bounds, plain in zip(SPLITS[1:], splits[1:], own[1:]):
        if bounds is None:
            continue
        kept = plain[repetitions[plain] > 0]
        begin, end = split_documents(bounds, count)
        if end > begin and not len(kept):
            raise HeldOutDropped(f"left no held-out document for the {split} split of its view "
                                 f"({len(plain)} held out, all among the dropped)")
        parts.append(kept[np.arange(end - begin) % max(len(kept), 1)])
    return np.concatenate(parts), len(train)


def _count_with_train(train: int, share: float) -> int:
    """The largest document count whose train split (`round(share x count)`, rising by at most one a
    document, so every value is reached) holds exactly `train` documents."""
    if share >= 1:
        return train
    count = int(train / share)
    while round(share * float(count + 1)) <= train:
        count += 1
    while round(share * float(count)) > train:
        count -= 1
    return count


def highest_losses(weighting: SourceReweighting, count: int = 10) -> list[tuple[str, str, str, float, bool]]:
    """The `count` documents of highest loss: (id, bucket, dump, loss, dropped), highest first."""
    order = weighting.weighting.by_loss[:count]
    file_of = np.searchsorted(np.asarray(weighting.starts), order, side="right") - 1
    return [(weighting.ids[i], weighting.files[f].bucket, weighting.files[f].dump, float(weighting.losses[i]),
             bool(weighting.weighting.dropped[i])) for i, f in zip(order.tolist(), file_of.tolist())]


def text_starts(output_root: Path, documents: Sequence[tuple[str, str, str]], characters: int = 200) -> dict[str, str]:
    """The first `characters` of each (id, bucket, dump)'s text, read from its published bucketed
    files; where those are damaged, which file and row group instead (the plan needs no text)."""
    wanted: dict[tuple[str, str], list[str]] = {}
    for doc_id, bucket, dump in documents:
        wanted.setdefault((bucket, dump), []).append(doc_id)
    starts = {}
    for (bucket, dump), ids in wanted.items():
        files = sorted(bucket_dump_dir(output_root, bucket, dump).glob("*.parquet"))
        if not files:
            continue
        try:
            found = pq.read_table(files, columns=["id", "text"], filters=[("id", "in", ids)])
        except READ_ERRORS as error:
            damage = damage_explaining(error, files, ("id", "text"), "bucketed file")
            if damage is None:
                raise
            starts.update(dict.fromkeys(ids, f"(text unreadable: {damage})"))
            continue
        starts.update(zip(found.column("id").to_pylist(), (t[:characters] for t in found.column("text").to_pylist())))
    return starts
