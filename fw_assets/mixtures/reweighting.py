"""Capped loss-based reweighting of one source's documents (docs/probe-losses.md#the-rule), free of Dagster.

For a source's documents with their probe losses:
1. the `drop_top_share` S highest losses (floor(S x documents), ties by id) are dropped as likely noise;
2. every other document gets the multiplier m = clip(loss / median, 1, M), the median taken over
   all the source's losses: it grows with the loss relative to the source's typical one, is never
   above M and never below 1 (no document falls below its plain share);
3. m becomes whole repetitions floor(m) + 1 when u < frac(m), else floor(m), with
   u = xxh64(f"{seed}:{id}") / 2^64: keyed on the id and the recipe's seed, so the same inputs
   always repeat the same documents, and on average a document appears m times.

Memory is a few bytes a document: the losses, their repetition hashes (`repetition_hashes`,
computed over the ids' Arrow buffers) and the repetitions, never a Python object a document; ids
are read back (`IdReader`) only for the few documents the rule names (ties at the drop's edge, the
highest losses a report shows).
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from fw_assets.contracts.findings import count_rows
from fw_assets.lib.string_hashes import xxh64_strings

# The ids of documents at these positions (in the order the losses are given), in the order asked.
IdReader = Callable[[np.ndarray], list[str]]
HIGHEST = 10  # the highest-loss documents a reweighting names


# The cap's ceiling. A multiplier repeats a document within one pass over its source; data repeated
# up to about 4 epochs trains almost as well as unique data, and beyond that the value of each
# repetition falls off fast (Muennighoff et al. 2023, "Scaling Data-Constrained Language Models";
# the recipes' `epochs` check warns above 4 passes for the same reason).
MAX_MULTIPLIER = 4.0
# Below this median loss (nats per token: the probe gives the typical token 99 % or more) the probe
# has seen these texts or is broken: a language model on web text is at 2-3, the bigram probe at 5-7;
# every multiplier would be its loss's noise over a vanishing median.
MIN_TYPICAL_LOSS = 0.01


class ReweightingRefused(ValueError):
    """The arguments or the losses cannot be reweighted; the message says which and why."""


@dataclass(frozen=True)
class Reweighting:
    """Per document, in the order given: its repetitions (0: dropped); and the rule's figures."""

    repetitions: np.ndarray  # unsigned, the smallest type holding ⌈max_multiplier⌉
    typical_loss: float  # the median the multipliers are relative to
    max_multiplier: float
    highest: np.ndarray  # positions of the HIGHEST highest losses, from the highest down, ties by id
    highest_ids: tuple[str, ...]  # their ids
    cut: "DropCut"

    @property
    def dropped(self) -> np.ndarray:
        return self.repetitions == 0

    @property
    def tied_at_cut(self) -> int:
        """Documents sharing the loss where the drop stops (0: the cut is between two losses)."""
        return self.cut.tied

    @property
    def tied_dropped(self) -> int:
        """Of those, how many were dropped: chosen by id, not by loss."""
        return self.cut.tied_dropped

    def multipliers_in_place(self, losses: np.ndarray) -> np.ndarray:
        """`losses` (float64) turned into their multipliers: the same values as `multipliers`,
        without a second array of the losses' size."""
        return multipliers(losses, self.typical_loss, self.max_multiplier, out=losses)


@dataclass(frozen=True)
class DropCut:
    """The top share's edge: its positions, the loss at the cut, and the documents tied there."""

    positions: np.ndarray  # of the dropped documents, in position order
    loss: float  # the lowest loss dropped (nan: nothing dropped)
    tied: int = 0  # documents with that loss, when the cut falls among them (0 otherwise)
    tied_dropped: int = 0  # of those, how many were dropped


def repetition_hashes(ids: pa.Array | pa.ChunkedArray, seed: int) -> np.ndarray:
    """xxh64(f"{seed}:{id}") per id: what decides a document's extra repetition (rule 3)."""
    return xxh64_strings(ids, f"{seed}:".encode())


def reweight(
    losses: np.ndarray, hashes: np.ndarray, max_multiplier: float, drop_top_share: float, ids: IdReader
) -> Reweighting:
    """Each document's repetitions under the rule above, from its loss and repetition hash;
    refuses M outside [1, MAX_MULTIPLIER], S outside [0, 0.5), losses that are NaN or infinite
    (naming the ids) and a median loss under MIN_TYPICAL_LOSS."""
    losses = np.asarray(losses, dtype=np.float64)
    if not max_multiplier >= 1:
        raise ReweightingRefused(
            "max_multiplier must be at least 1 (a document is never weighed below its plain share), "
            f"got {max_multiplier}"
        )
    if max_multiplier > MAX_MULTIPLIER:
        raise ReweightingRefused(f"max_multiplier must be at most {MAX_MULTIPLIER:g} (data repeated more than a few "
                                 f"times is worth little more), got {max_multiplier:g}")
    if not 0 <= drop_top_share < 0.5:
        raise ReweightingRefused(f"drop_top_share must be in [0, 0.5), got {drop_top_share}")
    if len(hashes) != len(losses):
        raise ReweightingRefused(f"{len(hashes):,} documents but {len(losses):,} losses")
    bad = ~np.isfinite(losses)
    if bad.any():
        examples = ids(np.flatnonzero(bad)[:5])
        raise ReweightingRefused(
            f"{count_rows(int(bad.sum()))} with a NaN or infinite loss (ids {', '.join(examples)}): "
            "re-run `probe_loss` for their dumps"
        )
    del bad
    typical = float(np.median(losses)) if len(losses) else MIN_TYPICAL_LOSS
    if typical < MIN_TYPICAL_LOSS:
        raise ReweightingRefused(
            f"the median loss is {typical:.3g} nats per token, under {MIN_TYPICAL_LOSS:g}: the probe predicts these "
            f"documents almost perfectly (it was trained on them, or it is broken), so its losses cannot tell "
            f"them apart; score them with another probe")
    repetitions = np.empty(len(losses), _repetition_type(max_multiplier))
    for start in range(0, len(losses), _CHUNK):  # a chunk at a time: a few bytes a document at most
        part = slice(start, start + _CHUNK)
        repetitions[part] = _whole_repetitions(multipliers(losses[part], typical, max_multiplier), hashes[part])
    cut = drop_cut(losses, int(np.floor(drop_top_share * len(losses))), ids)
    repetitions[cut.positions] = 0  # the top share S
    highest = ordered_highest(losses, min(HIGHEST, len(losses)), ids)
    return Reweighting(repetitions, typical, max_multiplier, highest, tuple(ids(highest)), cut)


_CHUNK = 1 << 20


def multipliers(losses: np.ndarray, typical: float, max_multiplier: float, out: np.ndarray | None = None) -> np.ndarray:
    """clip(loss / typical, 1, M) of each loss (typical is positive: `reweight` refuses less), into
    `out` if given (the losses themselves, to save an array of their size)."""
    ratio = np.divide(losses, typical, out=out)
    return np.clip(ratio, 1.0, max_multiplier, out=ratio)


def _whole_repetitions(multiplier: np.ndarray, hashes: np.ndarray) -> np.ndarray:
    """floor(m) + 1 when u < frac(m), else floor(m), with u = hash / 2^64 (rule 3)."""
    whole = np.floor(multiplier)
    return whole + (hashes.astype(np.float64) / 2.0**64 < multiplier - whole)


def _repetition_type(max_multiplier: float) -> np.dtype:
    """The smallest unsigned type holding ⌈max_multiplier⌉ repetitions."""
    most = np.ceil(max_multiplier) if np.isfinite(max_multiplier) else np.iinfo(np.uint64).max
    return np.min_scalar_type(int(min(most, np.iinfo(np.uint64).max)))


def drop_cut(losses: np.ndarray, count: int, ids: IdReader) -> DropCut:
    """The `count` highest losses (ties by id, then position). One partition of a copy of the
    losses finds the edge; ids are read only for ties at the edge."""
    if count <= 0:
        return DropCut(np.zeros(0, np.int64), float("nan"))
    edge = np.partition(losses, len(losses) - count)[len(losses) - count]  # the count-th highest
    above = np.flatnonzero(losses > edge)
    tied = np.flatnonzero(losses == edge)
    wanted = count - len(above)
    if wanted == len(tied):
        return DropCut(np.sort(np.concatenate([above, tied])), float(edge))
    names = ids(tied)
    chosen = tied[sorted(range(len(tied)), key=lambda i: names[i])[:wanted]]  # stable: positions rise
    return DropCut(np.sort(np.concatenate([above, chosen])), float(edge), len(tied), wanted)


def ordered_highest(losses: np.ndarray, count: int, ids: IdReader) -> np.ndarray:
    """The `count` highest losses' positions from the highest down, ties by id, then position."""
    chosen = drop_cut(losses, count, ids).positions
    names = ids(chosen)
    order = sorted(range(len(chosen)), key=lambda i: (-losses[chosen[i]], names[i]))
    return chosen[order]


def aligned_losses(
    dump: str, ids: Sequence[str] | pa.Array, loss_ids: Sequence[str] | pa.Array, losses: np.ndarray
) -> np.ndarray:
    """The losses of `ids` (a source's documents of `dump`), from a probe's `loss_ids`/`losses`;
    refuses documents the probe did not score, naming the dump and how many. One hash join in
    Arrow: a dump's losses are millions of rows, looked up once for each of its token files."""
    ids, loss_ids = (x if isinstance(x, pa.Array) else pa.array(x, pa.string()) for x in (ids, loss_ids))
    positions = pc.index_in(ids, value_set=loss_ids)
    if positions.null_count:
        missing = ids.filter(positions.is_null())
        raise ReweightingRefused(
            f"Dump {dump}: the probe has no loss for {count_rows(len(missing))} of the source's "
            f"{len(ids):,} documents (e.g. {', '.join(missing[:3].to_pylist())}): materialize "
            f"`probe_loss` for {dump} again (--select probe_loss --partition {dump})."
        )
    return np.asarray(losses, dtype=np.float64)[positions.to_numpy()]
