"""Sources with `reweight:` (docs/probe-losses.md#the-rule): each document of the source's reweighted buckets is
listed in a stage's view as many times as its probe loss says (fw_assets.mixtures.reweighting: the
top `drop_top_share` dropped, the others repeated up to `max_multiplier` times), so that Megatron
reads the reweighting as data and `explain` names every repetition.

Without fresh documents a stage's view of a reweighted file is the whole file as Megatron would
split it by position: its train documents, in file order, each listed its repetitions times, then
its held-out (validation and test) documents once each, a dropped document in no split. With fresh
documents the reweighting applies within each stage's fresh subset (see views.DocumentPools).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from fw_assets.formats.doc_index import document_ids, ids_at, read_document_index
from fw_assets.lib.parquet_damage import READ_ERRORS, damage_explaining
from fw_assets.mixtures.megatron.blended_megatron_dataset_builder import split_documents
from fw_assets.mixtures.megatron.utils import SPLITS
from fw_assets.mixtures.recipe import Recipe, RecipeError, Reweight
from fw_assets.mixtures.reweighting import Reweighting, aligned_losses, repetition_hashes, reweight
from fw_assets.mixtures.stage_plan import TokenFile
from fw_assets.paths import bucket_dump_dir, docs_path

# (probe, dump, bucket) -> that probe's published losses of the bucket's documents of the dump
# (columns id and loss at least), in batches, in the order of the bucket's token file as published
# (losses in another order are looked up by id); a probe with no losses of the dump, or damaged
# files, raise a ValueError saying so. Called again to read the losses again.
LossReader = Callable[[str, str, str], Iterable[pa.RecordBatch]]


class HeldOutDropped(ValueError):
    """The drop of the highest losses left a held-out split of a view without a document."""


@dataclass(frozen=True)
class SourceReweighting:
    """One reweighted source: its documents' losses (every file's, in file order) and what the rule
    made of them. A few bytes a document: no id is kept (the highest losses' aside)."""

    source: str
    reweight: Reweight
    files: tuple[TokenFile, ...]
    starts: tuple[int, ...]  # where each file's documents begin in the arrays below
    losses: np.ndarray
    weighting: Reweighting

    @property
    def documents(self) -> int:
        return len(self.losses)

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
    starts = tuple(np.cumsum([0] + [f.documents for f in files[:-1]]).tolist()) if files else ()
    total = sum(f.documents for f in files)
    losses, hashes = np.empty(total, np.float64), np.empty(total, np.uint64)
    for file, start in zip(files, starts):
        if read_losses is None:
            raise ValueError(f"Dump {file.dump}: no probe losses were given to plan with")
        mine = slice(start, start + file.documents)
        _read_file(file, lambda f=file: read_losses(rule.probe, f.dump, f.bucket), losses[mine], hashes[mine],
                   recipe.megatron.seed)
    ids = _FileIds(files, starts)
    weighting = reweight(losses, hashes, rule.max_multiplier, rule.drop_top_share, ids)
    return SourceReweighting(name, rule, tuple(files), starts, losses, weighting)


def _read_file(file: TokenFile, read: Callable[[], Iterable[pa.RecordBatch]], losses: np.ndarray,
               hashes: np.ndarray, seed: int) -> None:
    """Fill `losses` and `hashes` (the file's documents', in file order) from its ids, read a batch
    at a time beside the probe's losses in the same order; losses in another order, or missing,
    are looked up by id in all of them once the ids are read (`aligned_losses`, which refuses
    missing ones by name)."""
    path, scored, in_order, at = docs_path(Path(file.path)), _Rows(read()), True, 0
    for ids in document_ids(Path(file.path)):
        if at + len(ids) > len(losses):
            raise ValueError(f"{path} lists more documents than its index's {len(losses):,}")
        hashes[at: at + len(ids)] = repetition_hashes(ids, seed)
        if in_order:
            found = scored.next(len(ids))
            in_order = found is not None and ids.equals(found.column("id"))
            if in_order:
                losses[at: at + len(ids)] = found.column("loss").to_numpy(zero_copy_only=False)
        at += len(ids)
    if at != len(losses):
        raise ValueError(f"{path} lists {at:,} documents, its index {len(losses):,}")
    if not in_order:
        losses[:] = _losses_by_id(file, read())


def _losses_by_id(file: TokenFile, batches: Iterable[pa.RecordBatch]) -> np.ndarray:
    found = list(batches)
    scored_ids = pa.concat_arrays([b.column("id") for b in found]) if found else pa.array([], pa.string())
    scored = np.concatenate([b.column("loss").to_numpy(zero_copy_only=False) for b in found]) if found else np.zeros(0)
    ids = read_document_index(Path(file.path))["id"].combine_chunks()
    return aligned_losses(file.dump, ids, scored_ids, scored)


class _Rows:
    """The rows of a stream of record batches, taken a given number at a time."""

    def __init__(self, batches: Iterable[pa.RecordBatch]) -> None:
        self._batches, self._pending = iter(batches), None

    def next(self, count: int) -> pa.RecordBatch | None:
        """The next `count` rows as one batch (fewer at the end; None when none are left)."""
        parts = []
        while count:
            if self._pending is None or not len(self._pending):
                self._pending = next(self._batches, None)
                if self._pending is None:
                    break
            part = self._pending.slice(0, count)
            self._pending, count = self._pending.slice(len(part)), count - len(part)
            parts.append(part)
        if not parts:
            return None
        return parts[0] if len(parts) == 1 else pa.Table.from_batches(parts).combine_chunks().to_batches()[0]


class _FileIds:
    """The ids of documents by their position among a source's files (an IdReader): only the row
    groups holding the documents asked for are read."""

    def __init__(self, files: list[TokenFile], starts: tuple[int, ...]) -> None:
        self.files, self.starts = files, np.asarray(starts, dtype=np.int64)

    def __call__(self, positions: np.ndarray) -> list[str]:
        positions = np.asarray(positions, dtype=np.int64)
        file_of = np.searchsorted(self.starts, positions, side="right") - 1
        found = np.empty(len(positions), dtype=object)
        for i in np.unique(file_of).tolist():
            mine = np.flatnonzero(file_of == i)
            found[mine] = ids_at(Path(self.files[i].path), positions[mine] - self.starts[i]).to_pylist()
        return found.tolist()


def tie_warning(weighting: SourceReweighting) -> str | None:
    """What to tell when the drop's cut fell among equal losses (None otherwise): which of those
    documents were dropped is the order of their ids, not anything the probe said."""
    result = weighting.weighting
    if not result.tied_at_cut:
        return None
    return (f"{result.tied_at_cut:,} documents share the loss {result.cut.loss:.4g} at the cut of the top "
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


def highest_losses(weighting: SourceReweighting) -> list[tuple[str, str, str, float, bool]]:
    """The documents of highest loss (reweighting.HIGHEST): (id, bucket, dump, loss, dropped),
    highest first."""
    order = weighting.weighting.highest
    file_of = np.searchsorted(np.asarray(weighting.starts), order, side="right") - 1
    return [(doc_id, weighting.files[f].bucket, weighting.files[f].dump, float(weighting.losses[i]),
             bool(weighting.weighting.repetitions[i] == 0))
            for doc_id, i, f in zip(weighting.weighting.highest_ids, order.tolist(), file_of.tolist())]


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
            starts.update(_texts_of(files, pa.array(ids, pa.string()), characters))
        except READ_ERRORS as error:
            damage = damage_explaining(error, files, ("id", "text"), "bucketed file")
            if damage is None:
                raise
            starts.update(dict.fromkeys(ids, f"(text unreadable: {damage})"))
    return starts


def _texts_of(files: list[Path], ids: pa.Array, characters: int) -> Iterator[tuple[str, str]]:
    """(id, its text's first `characters`) of the documents of `ids` in `files`, in file order, a
    row group at a time: the ids of each, the texts only of the row groups holding one (a dump's
    texts are gigabytes)."""
    for path in files:
        parquet = pq.ParquetFile(path)
        for group in range(parquet.metadata.num_row_groups):
            found = pc.is_in(parquet.read_row_group(group, columns=["id"]).column("id"), value_set=ids)
            rows = np.flatnonzero(found.to_numpy(zero_copy_only=False))
            if len(rows):
                texts = parquet.read_row_group(group, columns=["id", "text"]).take(pa.array(rows))
                starts = (t[:characters] for t in texts.column("text").to_pylist())
                yield from zip(texts.column("id").to_pylist(), starts)
