"""Which probe scores the documents: the built-in bigram model, or a local causal LM directory.

A probe's name becomes a folder (`probe/<name>/`), so it must be a plain name. Its identity (what
decides its losses) goes into the generation record, the materialization's data version and,
for the probe configured in the environment, the asset's code version: changing the probe marks
its losses stale.
"""

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from fw_assets.paths import NAME_RULE, is_safe_name
from fw_assets.probe import ngram

BUILTIN = "builtin"


def checked_name(name: str) -> str:
    """`name` if it is safe as one folder name, else a ValueError saying what a name may hold."""
    if not is_safe_name(name):
        raise ValueError(f"Probe name {name!r} is not allowed: it names the folder probe/<name>/, so it {NAME_RULE}. "
                         "Nothing was published.")
    return name


@dataclass(frozen=True)
class ProbeSpec:
    """A probe as configured: no model directory means the built-in probe."""

    name: str = BUILTIN
    model_dir: Path | None = None
    device: str = "cpu"
    max_tokens: int = 1024  # a longer document is scored on its first max_tokens tokens
    batch_tokens: int = 4096  # padded tokens per forward pass

    def __post_init__(self) -> None:
        checked_name(self.name)
        if self.model_dir is None and self.name != BUILTIN:
            raise ValueError(f"Probe {self.name!r} has no model directory; only {BUILTIN!r} is built in.")
        if self.model_dir is not None and self.name == BUILTIN:
            raise ValueError(f"Probe name {BUILTIN!r} is the built-in probe's; name the model probe otherwise.")
        if self.max_tokens < 1 or self.batch_tokens < self.max_tokens:
            raise ValueError(
                f"Probe {self.name}: need max_tokens >= 1 and batch_tokens >= max_tokens "
                f"(got {self.max_tokens}, {self.batch_tokens})."
            )

    @property
    def is_builtin(self) -> bool:
        return self.model_dir is None

    def identity(self) -> dict:
        """What decides the losses (not the device, not the batch size)."""
        if self.is_builtin:
            return {"name": self.name, **ngram.PARAMETERS}
        return {**self._model_settings(), "model_sha256": directory_digest(self.model_dir)}

    def fingerprint(self) -> str:
        """A short hash of what decides the losses, for the code version. It is computed wherever
        the code location loads (webserver, daemon, every run), so a model directory is described
        there by its files' names, sizes and modification times, not read whole as identity()
        reads it in the run."""
        if self.is_builtin:
            described = self.identity()
        else:
            described = {**self._model_settings(), "model_files": directory_listing(self.model_dir)}
        return hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()[:12]

    def _model_settings(self) -> dict:
        return {"name": self.name, "kind": "causal_lm", "model_dir": str(self.model_dir), "max_tokens": self.max_tokens}


def directory_digest(folder: Path) -> str:
    """sha256 over every file of a model directory: relative path and bytes, in path order."""
    digest = hashlib.sha256()
    for path in model_files(folder):
        digest.update(str(path.relative_to(folder)).encode() + b"\0")
        with open(path, "rb") as stream:
            while chunk := stream.read(1 << 22):
                digest.update(chunk)
    return digest.hexdigest()


def directory_listing(folder: Path) -> list[tuple[str, int, int]]:
    """Each file of a model directory as (relative path, size, modification time in ns)."""
    return [
        (str(path.relative_to(folder)), stat.st_size, stat.st_mtime_ns)
        for path in model_files(folder)
        for stat in (path.stat(),)
    ]


def model_files(folder: Path) -> list[Path]:
    """The files of a model directory, in path order; a missing directory is refused by name."""
    if not folder.is_dir():
        raise ValueError(
            f"Probe model directory {folder} does not exist or is not a directory. Point "
            "FW_PROBE_MODEL_DIR (or the probe resource's model_dir) at a folder written by "
            "save_pretrained; nothing was published."
        )
    return sorted(p for p in folder.rglob("*") if p.is_file())
