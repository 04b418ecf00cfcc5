"""Fresh documents: each stage reads its own subset (a view) of every token file, so that a later
stage does not re-read what an earlier one used while unread documents remain.

Per token file, documents are ranked once by a hash of their id and the recipe's seed. A stage
takes, in the order (times already used, rank), just enough documents for its blend to need one
epoch of the view's train split; while a file has unused documents, stages get disjoint ones;
after that every document is reused in turn, so uses never differ by more than one between two
documents and none is used more than ⌈demand / supply⌉ times. Validation and test documents are
held out of every train split: a file's documents are split once, in their ranked order, by the
run's `--split` shares, and each view ends with the held-out documents its own split sizes ask
for (Megatron splits a prefix by position). In a reweighted file (a source with `reweight:`) the
reweighting applies within each stage's fresh subset: a dropped document is in no split, and each
chosen train document is listed its repetitions times, one after the other (each repetition is a
use). A view is an `.idx` in Megatron's
format listing the chosen documents, its `.bin` a hard link to the file's (the planned tokens, kept), and a
`.docs.parquet` sidecar with their source ids (`explain` reads it as for any prefix).
"""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from fw_assets import paths
from fw_assets.formats.doc_index import DocumentIndexWriter, document_count, document_ids, ids_at
from fw_assets.formats.indexed_dataset import IndexedDatasetReader, write_view_index
from fw_assets.lib.string_hashes import blake2b_64_strings
from fw_assets.mixtures.megatron.blended_megatron_dataset_builder import split_documents
from fw_assets.mixtures.megatron.gpt_dataset import EXTRA_TOKEN
from fw_assets.mixtures.megatron.utils import SPLITS
from fw_assets.mixtures.reweighted import HeldOutDropped
from fw_assets.mixtures.stage_plan import TokenFile


@dataclass(frozen=True)
class ViewSelection:
    """The documents one stage reads of one token file (sequence numbers of the file, in the
    view's order: its train split's, then its held-out validation and test documents)."""

    stage: str
    file: TokenFile  # the original token file (its tokens: those the stage may train on)
    view: TokenFile  # the view, as the stage's blend names it
    documents: np.ndarray
    train_documents: int  # the first ones: the view's train split
    seen_before: int  # of those, how many earlier stages listed
    repeats: bool  # the train split lists documents earlier stages listed, or one twice
    eligible_documents: int  # the file's train documents long enough for the stage
    eligible_tokens: int
    unread_after: int  # of those, how many no stage has listed yet, after this one


class DocumentPools:
    """The documents of every token file of a recipe, and how often stages have used each.

    Each file's documents are split once, in their seeded order, by the run's `--split` shares:
    a view's train split takes only train documents, its validation and test splits only held-out
    ones, always the same, so no stage trains on a document another evaluates on."""

    def __init__(self, seed: int, splits: list[tuple[float, float] | None]) -> None:
        self.seed, self.splits = seed, splits
        self._lengths: dict[str, np.ndarray] = {}
        self._order: dict[str, np.ndarray] = {}  # the file's documents in seeded order (int32)
        self._split_of: dict[str, np.ndarray] = {}
        self._uses: dict[str, np.ndarray] = {}
        self._repetitions: dict[str, np.ndarray] = {}

    def reweight(self, path: str, repetitions: np.ndarray) -> None:
        """List each document of the file at `path` `repetitions` times (0: in no split)."""
        self._repetitions[path] = repetitions

    def _load(self, path: str) -> None:
        if path in self._lengths:
            return
        self._lengths[path] = IndexedDatasetReader(Path(path)).sequence_lengths
        order = seeded_order(Path(path), self.seed)
        split_of = np.zeros(len(order), dtype=np.int8)
        for split, bounds in enumerate(self.splits):
            if bounds is not None:
                begin, end = split_documents(bounds, len(order))
                split_of[order[begin:end]] = split
        self._order[path], self._split_of[path] = order, split_of
        self._uses[path] = np.zeros(len(order), dtype=np.int32)

    def _documents(self, path: str, split: int, min_doc_tokens: int, dropped_too: bool = False) -> np.ndarray:
        """The file's documents of `split` at least `min_doc_tokens` long, in seeded order (int32;
        without those a reweighting dropped, unless `dropped_too`)."""
        self._load(path)
        wanted = (self._split_of[path] == split) & (self._lengths[path] >= min_doc_tokens)
        if path in self._repetitions and not dropped_too:
            wanted &= self._repetitions[path] > 0
        order = self._order[path]
        return order[wanted[order]]

    def eligible(self, file: TokenFile, min_doc_tokens: int) -> TokenFile:
        """`file` as a stage with this minimum document length sees it: its train documents."""
        documents = self._listed(file.path, self._documents(file.path, 0, min_doc_tokens))
        kept = self._lengths[file.path][documents]
        return replace(file, documents=len(kept), tokens=int(kept.sum(dtype=np.int64)))

    def select(self, stage: str, file: TokenFile, view: TokenFile, min_doc_tokens: int, samples: int,
               seq_length: int) -> ViewSelection:
        """The fewest documents whose train split, least used first, holds the `samples` the stage's
        blend draws from the file in one epoch, and held-out documents for every other non-empty split."""
        pool = self._documents(file.path, 0, min_doc_tokens)
        lengths, uses = self._lengths[file.path], self._uses[file.path]
        if not lengths[pool].sum(dtype=np.int64):
            raise ValueError(f"{file.path}: no train document of at least {min_doc_tokens} tokens for stage {stage}")
        order = self._listed(file.path, _least_used_first(pool, uses[pool]))
        count = _view_size(lengths[order], samples * seq_length + EXTRA_TOKEN, self.splits)
        parts = []
        for split, bounds in enumerate(self.splits):
            if bounds is None:
                continue
            begin, end = split_documents(bounds, count)
            source = order if split == 0 else self._held_out(file.path, split, min_doc_tokens, stage)
            parts.append(np.resize(source, end - begin))  # cycling through it when it is shorter
        train = parts[0]
        seen_before = int((uses[train] > 0).sum())
        repeats = bool(seen_before) or len(train) > len(self._listed(file.path, np.unique(train)))
        np.add.at(uses, train, 1)
        documents = np.concatenate(parts)
        tokens = int(lengths[documents].sum(dtype=np.int64))
        return ViewSelection(stage, file, replace(view, documents=count, tokens=tokens), documents, len(train),
                             seen_before, repeats, len(pool), int(lengths[pool].sum(dtype=np.int64)),
                             int((uses[pool] == 0).sum()))

    def _listed(self, path: str, documents: np.ndarray) -> np.ndarray:
        """`documents` as a view lists them: each its repetitions times in a reweighted file."""
        return np.repeat(documents, self._repetitions[path][documents]) if path in self._repetitions else documents

    def _held_out(self, path: str, split: int, min_doc_tokens: int, stage: str) -> np.ndarray:
        held = self._documents(path, split, min_doc_tokens)
        if not len(held) and len(self._documents(path, split, min_doc_tokens, dropped_too=True)):
            raise HeldOutDropped(f"left no held-out document for the {SPLITS[split]} split of stage {stage} "
                                 f"(all of at least {min_doc_tokens} tokens among the dropped)")
        if not len(held):
            raise ValueError(f"{path}: no document of at least {min_doc_tokens} tokens held out for the "
                             f"{SPLITS[split]} split of stage {stage} (the file is too small for the split)")
        return held


def seeded_order(prefix: Path, seed: int) -> np.ndarray:
    """The documents (positions, int32) of the token file at `prefix` in its seeded random order:
    by the BLAKE2b-64 of the seed and each id (`blake2b(f"{seed}\\x00{id}", digest_size=8)`, its
    bytes compared), ties by position. The ids are read and hashed over their Arrow buffers a
    batch at a time: 8 bytes a document and one batch of ids, no Python string a document."""
    keys, at = np.empty(document_count(prefix), np.uint64), 0
    for ids in document_ids(prefix):
        keys[at: at + len(ids)] = blake2b_64_strings(ids, f"{seed}\x00".encode())
        at += len(ids)
    return keys.argsort(kind="stable").astype(np.int32)  # a file holds fewer than 2^31 documents


def _least_used_first(pool: np.ndarray, uses: np.ndarray) -> np.ndarray:
    """`pool` ordered by `uses` (its documents' uses), ties in pool order: a stable sort by a key of
    a few values, one pass a value (no index array of the pool's size)."""
    if not len(pool) or uses.min() == uses.max():
        return pool
    return np.concatenate([pool[uses == value] for value in np.unique(uses)])


def _view_size(ordered_lengths: np.ndarray, tokens_needed: int, splits: list[tuple[float, float] | None]) -> int:
    """How many documents, taken in order (cycling through them when one pass is not enough),
    a view needs: the train split's first documents hold `tokens_needed`, every non-empty split
    gets at least one document."""
    supply = int(ordered_lengths.sum(dtype=np.int64))
    passes, rest = divmod(tokens_needed, supply)
    needed = passes * len(ordered_lengths) + (_first_reaching(ordered_lengths, rest) + 1 if rest else 0)
    train = splits[0]
    count = max(needed, 1)
    while not _enough(count, needed, train, splits):
        count += 1
    return count


def _first_reaching(lengths: np.ndarray, total: int) -> int:
    """The first position whose running sum of `lengths` reaches `total` (numpy's searchsorted on
    the running sums), a chunk of running sums at a time."""
    before = 0
    for start in range(0, len(lengths), _RUNNING_CHUNK):
        running = np.cumsum(lengths[start: start + _RUNNING_CHUNK], dtype=np.int64) + before
        if running[-1] >= total:
            return start + int(np.searchsorted(running, total))
        before = int(running[-1])
    return len(lengths)


_RUNNING_CHUNK = 1 << 20


def _enough(count: int, needed: int, train, splits) -> bool:
    begin, end = split_documents(train, count)
    if end - begin < needed:
        return False
    return all(bounds is None or split_documents(bounds, count)[1] > split_documents(bounds, count)[0]
               for bounds in splits)


def write_view(selection: ViewSelection, prefix: Path | None = None) -> list[Path]:
    """Write the view's `.idx`, `.docs.parquet` and `.bin` at `prefix` (default: its own path; a
    staging folder to publish it by rename). The `.bin` is a hard link to the token file's: the
    view keeps the very tokens it was planned on when the dump is re-tokenized (a new file renamed
    over the old one), for as long as a published plan holds it; it costs no space, the file being
    freed with the last plan that links it. A copy where a link cannot cross filesystems."""
    prefix = Path(selection.view.path) if prefix is None else Path(prefix)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    original = Path(selection.file.path)
    reader = IndexedDatasetReader(original)
    _pin(paths.bin_path(original), paths.bin_path(prefix))
    write_view_index(prefix, reader, selection.documents)
    with DocumentIndexWriter(prefix) as docs:
        for start in range(0, max(len(selection.documents), 1), _IDS_CHUNK):  # one chunk when empty
            chunk = selection.documents[start: start + _IDS_CHUNK]
            docs.add(ids_at(original, chunk), reader.sequence_lengths[chunk])
    return paths.token_files(prefix)


_IDS_CHUNK = 1 << 18  # a view's ids are looked up this many at a time: memory for their strings only


def _pin(tokens: Path, view_tokens: Path) -> None:
    view_tokens.unlink(missing_ok=True)
    try:
        os.link(tokens, view_tokens)
    except OSError as error:
        if error.errno != errno.EXDEV:
            raise
        shutil.copyfile(tokens, view_tokens)


def view_lengths(views: Sequence[ViewSelection], stage: str) -> dict[str, np.ndarray]:
    """The document lengths of each view of `stage`, by the path the stage reads, from the original
    files: what a view will hold before it is written (or while an older one is still published
    there). One stage at a time: a view's lengths are 4 bytes a document it lists."""
    lengths, originals = {}, {}
    for selection in (s for s in views if s.stage == stage):
        path = selection.file.path
        if path not in originals:
            originals[path] = IndexedDatasetReader(Path(path)).sequence_lengths
        lengths[selection.view.path] = originals[path][selection.documents]
    return lengths


def write_views(views: Sequence[ViewSelection], folder: Path | None = None) -> list[Path]:
    """Every view of a plan's stages (`MixturePlan.views`, before building the stages' caches): at
    the paths its stages read, or under `folder` as `<stage>/<bucket>/<dump>`, a staged
    `mixtures/<recipe>/views/`."""
    written = []
    for selection in views:
        file = selection.file
        prefix = None if folder is None else Path(folder) / selection.stage / file.bucket / file.dump
        written += write_view(selection, prefix)
    return written
