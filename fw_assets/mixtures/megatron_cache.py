"""What Megatron-Core 0.16's `BlendedMegatronDatasetBuilder` derives from the training flags before
it builds anything: the split matrix, the normalised weights, each dataset's sample count, and the
JSON descriptions whose md5 names the cache files.

Every number here must be computed the way Megatron computes it (Python floats, numpy's pairwise
sum), because the descriptions are hashed: a weight that differs in its last bit is another cache.
"""

import hashlib
import json
import math
import re
from dataclasses import dataclass

import numpy as np

SPLITS = ("train", "valid", "test")
# `mid_level_dataset_surplus`: each member dataset is built this much larger than the blend needs
DATASET_SURPLUS = 0.005


def normalize(weights: list[float]) -> list[float]:
    """Megatron's `normalize`: `w / numpy.sum(w)` in float64 (pairwise summation from 8 values on)."""
    w = np.array(weights, dtype=np.float64)
    return (w / np.sum(w)).tolist()


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


def split_documents(bounds: tuple[float, float], document_count: int) -> tuple[int, int]:
    """The [begin, end) sequence numbers of one split of a dataset of `document_count` sequences."""
    lo, hi = bounds
    return int(round(lo * float(document_count))), int(round(hi * float(document_count)))


def samples_per_dataset(weights: list[float], split_size: int, surplus: float = 0.0) -> list[int]:
    """Samples each dataset contributes to (surplus 0) or builds for (the surplus) a blend split."""
    return [int(math.ceil(math.ceil(split_size * w) * (1 + surplus))) for w in weights]


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


def gpt_description(prefix: str, num_samples: int, split: str, settings: CacheSettings) -> dict:
    """The GPTDataset's `unique_identifiers`, in Megatron's key order."""
    return {
        "class": "GPTDataset",
        "dataset_path": prefix,
        "num_samples": num_samples,
        "index_split": split,
        **settings.identifiers(),
    }


def blend_description(datasets: list[dict], split: str, weights: list[float], size: int) -> dict:
    """The BlendedDataset's `unique_identifiers`: its members' descriptions and the weights as
    normalised a second time."""
    return {
        "class": "BlendedDataset",
        "datasets": datasets,
        "split": split,
        "weights": weights,
        "size": size,
    }


def description_text(description: dict) -> str:
    """The `description.txt` body (no trailing newline), also the md5 input."""
    return json.dumps(description, indent=4)


def cache_file_stem(description: dict) -> str:
    """`<md5>-<class>-<split>`: every cache file of one dataset is named `<stem>-<kind>`."""
    digest = hashlib.md5(description_text(description).encode("utf-8")).hexdigest()
    split = description["index_split"] if "index_split" in description else description["split"]
    return f"{digest}-{description['class']}-{split}"


GPT_FILES = ("description.txt", "document_index.npy", "sample_index.npy", "shuffle_index.npy")
BLEND_FILES = ("description.txt", "dataset_index.npy", "dataset_sample_index.npy")
