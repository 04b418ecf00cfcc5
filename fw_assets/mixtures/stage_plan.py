"""What a plan is made of, shared by the planner (fw_assets.mixtures.plan) and everything that reads,
writes or builds from a plan (views, reweighting, the cache builder, the report, the published
plan): a token file, a stage's members with their weights, and a planned stage with its flags."""

from dataclasses import dataclass

from fw_assets.mixtures.megatron.blended_megatron_dataset_config import CacheSettings


@dataclass(frozen=True)
class TokenFile:
    """One tokenized (bucket, dump): read here from `path`, named `prefix` in the training flags."""

    source: str
    bucket: str
    dump: str
    path: str
    prefix: str
    documents: int
    tokens: int


@dataclass(frozen=True)
class Member:
    """A token file in a stage's blend with its `--data-args-path` weight (the text is what
    Megatron parses, so the text is the weight of record)."""

    file: TokenFile
    weight: str


@dataclass(frozen=True)
class StagePlan:
    """One stage as planned: its blend's members and weights, its sample counts, its cache's
    settings and the flags training runs it with."""

    phase: str
    name: str
    tokens: int
    seq_length: int
    temperature: float
    shares: dict[str, float]  # source → share of the stage's samples
    members: tuple[Member, ...]
    num_samples: tuple[int, int, int]  # train, valid, test: what training asks the builder for
    cache: CacheSettings
    data_args_path: str  # the `--data-args-path` file, as training sees it
    megatron_args: tuple[str, ...]

    @property
    def data_args(self) -> str:
        """The `--data-args-path` file's text: `w1 prefix1 w2 prefix2 …`, one pair a line."""
        return "".join(f"{m.weight} {m.file.prefix}\n" for m in self.members)
