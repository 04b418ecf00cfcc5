"""Capped loss-based reweighting of one source's documents (seed 003, §11.6), free of Dagster.

For a source's documents with their probe losses:
1. the `drop_top_share` S highest losses (floor(S x documents), ties by id) are dropped as likely noise;
2. every other document gets the multiplier m = clip(loss / median, 1, M), the median taken over
   all the source's losses: it grows with the loss relative to the source's typical one, is never
   above M and never below 1 (no document falls below its plain share);
3. m becomes whole repetitions floor(m) + 1 when u < frac(m), else floor(m), with
   u = xxh64(f"{seed}:{id}") / 2^64: keyed on the id and the recipe's seed, so the same inputs
   always repeat the same documents, and on average a document appears m times.
"""

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import xxhash

from fw_assets.contracts.findings import count_rows


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
    """Per document, in the order given: its multiplier, repetitions (0: dropped) and whether dropped."""

    multipliers: np.ndarray
    repetitions: np.ndarray
    dropped: np.ndarray
    typical_loss: float  # the median the multipliers are relative to
    by_loss: np.ndarray  # positions from the highest loss down, ties broken by id (sorted once)
    tied_at_cut: int = 0  # documents sharing the loss where the drop stops (0: the cut is between two losses)
    tied_dropped: int = 0  # of those, how many were dropped: chosen by id, not by loss


def reweight(
    ids: Sequence[str], losses: np.ndarray, max_multiplier: float, drop_top_share: float, seed: int
) -> Reweighting:
    """Each document's repetitions under the rule above; refuses M outside [1, MAX_MULTIPLIER], S
    outside [0, 0.5), losses that are NaN or infinite (naming the ids) and a median loss under
    MIN_TYPICAL_LOSS."""
    losses = np.asarray(losses, dtype=np.float64)
    if not max_multiplier >= 1:
        raise ReweightingRefused(f"max_multiplier must be at least 1 (a document is never weighed below its plain share), got {max_multiplier}")
    if max_multiplier > MAX_MULTIPLIER:
        raise ReweightingRefused(f"max_multiplier must be at most {MAX_MULTIPLIER:g} (data repeated more than a few "
                                 f"times is worth little more), got {max_multiplier:g}")
    if not 0 <= drop_top_share < 0.5:
        raise ReweightingRefused(f"drop_top_share must be in [0, 0.5), got {drop_top_share}")
    if len(ids) != len(losses):
        raise ReweightingRefused(f"{len(ids):,} ids but {len(losses):,} losses")
    bad = ~np.isfinite(losses)
    if bad.any():
        examples = [ids[i] for i in np.flatnonzero(bad)[:5]]
        raise ReweightingRefused(f"{count_rows(int(bad.sum()))} with a NaN or infinite loss (ids {', '.join(examples)}): re-run `probe_loss` for their dumps")
    typical = float(np.median(losses)) if len(losses) else MIN_TYPICAL_LOSS
    if typical < MIN_TYPICAL_LOSS:
        raise ReweightingRefused(
            f"the median loss is {typical:.3g} nats per token, under {MIN_TYPICAL_LOSS:g}: the probe predicts these "
            f"documents almost perfectly (it was trained on them, or it is broken), so its losses cannot tell "
            f"them apart; score them with another probe")
    ratio = losses / typical
    multipliers = np.clip(ratio, 1.0, max_multiplier)
    by_loss = np.lexsort((np.asarray(ids, dtype=object).astype(str), -losses))
    dropped = np.zeros(len(losses), bool)
    cut = int(np.floor(drop_top_share * len(losses)))
    dropped[by_loss[:cut]] = True  # the top share S
    tied = losses == losses[by_loss[cut - 1]] if 0 < cut < len(losses) and losses[by_loss[cut - 1]] == losses[by_loss[cut]] else None
    whole = np.floor(multipliers)
    repetitions = (whole + (_uniforms(ids, seed) < multipliers - whole)).astype(np.int64)
    repetitions[dropped] = 0
    ties = (int(tied.sum()), int((tied & dropped).sum())) if tied is not None else (0, 0)
    return Reweighting(multipliers, repetitions, dropped, typical, by_loss, *ties)


def _uniforms(ids: Sequence[str], seed: int) -> np.ndarray:
    """xxh64(f"{seed}:{id}") / 2^64 per id, in [0, 1)."""
    hashes = np.fromiter((xxhash.xxh64_intdigest(f"{seed}:{i}".encode()) for i in ids), np.uint64, len(ids))
    return hashes.astype(np.float64) / 2.0**64


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
