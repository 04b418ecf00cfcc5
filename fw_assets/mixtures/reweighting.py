"""Capped loss-based reweighting of one source's documents (seed 003, §11.6), free of Dagster.

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

    @property
    def dropped(self) -> np.ndarray:
        return self.repetitions == 0

    def multipliers_in_place(self, losses: np.ndarray) -> np.ndarray:
        """`losses` (float64) turned into their multipliers: the same values as `multipliers`,
        without a second array of the losses' size."""
        if not self.typical_loss > 0:
            losses[:] = 1.0
            return losses
        with np.errstate(divide="ignore", invalid="ignore"):
            losses /= self.typical_loss
        return np.clip(losses, 1.0, self.max_multiplier, out=losses)


def repetition_hashes(ids: pa.Array | pa.ChunkedArray, seed: int) -> np.ndarray:
    """xxh64(f"{seed}:{id}") per id: what decides a document's extra repetition (rule 3)."""
    return xxh64_strings(ids, f"{seed}:".encode())


def reweight(
    losses: np.ndarray, hashes: np.ndarray, max_multiplier: float, drop_top_share: float, ids: IdReader
) -> Reweighting:
    """Each document's repetitions under the rule above, from its loss and repetition hash;
    refuses M < 1, S outside [0, 0.5) and losses that are NaN or infinite (naming the ids)."""
    losses = np.asarray(losses, dtype=np.float64)
    if not max_multiplier >= 1:
        raise ReweightingRefused(f"max_multiplier must be at least 1 (a document is never weighed below its plain share), got {max_multiplier}")
    if not 0 <= drop_top_share < 0.5:
        raise ReweightingRefused(f"drop_top_share must be in [0, 0.5), got {drop_top_share}")
    if len(hashes) != len(losses):
        raise ReweightingRefused(f"{len(hashes):,} documents but {len(losses):,} losses")
    bad = ~np.isfinite(losses)
    if bad.any():
        examples = ids(np.flatnonzero(bad)[:5])
        raise ReweightingRefused(f"{count_rows(int(bad.sum()))} with a NaN or infinite loss (ids {', '.join(examples)}): re-run `probe_loss` for their dumps")
    del bad
    typical = float(np.median(losses)) if len(losses) else 0.0
    repetitions = np.empty(len(losses), _repetition_type(max_multiplier))
    for start in range(0, len(losses), _CHUNK):  # a chunk at a time: a few bytes a document at most
        part = slice(start, start + _CHUNK)
        repetitions[part] = _whole_repetitions(multipliers(losses[part], typical, max_multiplier), hashes[part])
    repetitions[highest_positions(losses, int(np.floor(drop_top_share * len(losses))), ids)] = 0  # the top share S
    highest = ordered_highest(losses, min(HIGHEST, len(losses)), ids)
    return Reweighting(repetitions, typical, max_multiplier, highest, tuple(ids(highest)))


_CHUNK = 1 << 20


def multipliers(losses: np.ndarray, typical: float, max_multiplier: float) -> np.ndarray:
    """clip(loss / typical, 1, M) of each loss (all 1 when the typical loss is not positive)."""
    if not typical > 0:
        return np.ones_like(losses)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = losses / typical
    return np.clip(ratio, 1.0, max_multiplier, out=ratio)


def _whole_repetitions(multiplier: np.ndarray, hashes: np.ndarray) -> np.ndarray:
    """floor(m) + 1 when u < frac(m), else floor(m), with u = hash / 2^64 (rule 3)."""
    whole = np.floor(multiplier)
    return whole + (hashes.astype(np.float64) / 2.0**64 < multiplier - whole)


def _repetition_type(max_multiplier: float) -> np.dtype:
    """The smallest unsigned type holding ⌈max_multiplier⌉ repetitions."""
    most = np.ceil(max_multiplier) if np.isfinite(max_multiplier) else np.iinfo(np.uint64).max
    return np.min_scalar_type(int(min(most, np.iinfo(np.uint64).max)))


def highest_positions(losses: np.ndarray, count: int, ids: IdReader) -> np.ndarray:
    """Positions of the `count` highest losses (ties by id, then position), in position order. One
    partition of a copy of the losses finds the edge; ids are read only for ties at the edge."""
    if count <= 0:
        return np.zeros(0, np.int64)
    edge = np.partition(losses, len(losses) - count)[len(losses) - count]  # the count-th highest
    above = np.flatnonzero(losses > edge)
    tied = np.flatnonzero(losses == edge)
    wanted = count - len(above)
    if wanted < len(tied):
        names = ids(tied)
        tied = tied[sorted(range(len(tied)), key=lambda i: names[i])[:wanted]]  # stable: positions rise
    return np.sort(np.concatenate([above, tied]))


def ordered_highest(losses: np.ndarray, count: int, ids: IdReader) -> np.ndarray:
    """The `count` highest losses' positions from the highest down, ties by id, then position."""
    chosen = highest_positions(losses, count, ids)
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
