"""The flags of Megatron-Core 0.16's `BlendedMegatronDatasetConfig`
(`blended_megatron_dataset_config.py`) that enter every cache description: `--split` parsed
(`parse_and_normalize_split`) into the split matrix (`convert_split_vector_to_split_matrix`), the
seed, the sequence length and the tokenizer's identifiers.

Ours differs in form only: `CacheSettings` holds just the flags the descriptions name, and the split
matrix is built from one split vector (Megatron's optional second vector is never passed by
`pretrain_gpt.py`).
"""

import re
from dataclasses import dataclass

from fw_assets.mixtures.megatron.utils import SPLITS, normalize


def parse_split(split: str) -> list[float]:
    """`--split "99,1,0"` → [0.99, 0.01, 0.0]: every number in the string, padded to three, normalised."""
    values = [float(number) for number in re.findall(r"[.0-9]+", split)]
    if len(values) > len(SPLITS) or any(value < 0 for value in values):
        raise ValueError(f"split {split!r} must have at most {len(SPLITS)} non-negative numbers")
    if not sum(values) > 0:
        raise ValueError(f"split {split!r} gives no data to any split")
    return normalize(values + [0.0] * (len(SPLITS) - len(values)))


def split_matrix(split: str) -> list[tuple[float, float] | None]:
    """Each split's [start, end) share of a dataset's documents, None when the split is empty.

    The running sum starts from the integer 0, so the first bound is `0`, not `0.0`, in the JSON.
    """
    bounds = [0]
    for share in parse_split(split):
        bounds.append(bounds[-1] + share)
    return [(lo, hi) if hi > lo else None for lo, hi in zip(bounds[:-1], bounds[1:])]


@dataclass(frozen=True)
class CacheSettings:
    """The flags that enter every description: `--seed`, `--seq-length`, `--split` and the
    training tokenizer's `unique_identifiers`."""

    seed: int
    seq_length: int
    split: str
    tokenizer_identity: dict

    def identifiers(self) -> dict:
        return {
            "random_seed": self.seed,
            "sequence_length": self.seq_length,
            "split": self.split,
            "split_matrix": split_matrix(self.split),
            "tokenizer": self.tokenizer_identity,
        }
