"""Which probe scores the documents: the built-in bigram model, or a local causal LM directory.

A probe's name becomes a folder (`probe/<name>/`), so it must be a plain name. Its identity (what
decides its losses: for a model, its files' bytes, `max_tokens` and the dtype it runs in) goes into
the generation record, the materialization's data version and, for the probe configured in the
environment, the asset's code version: changing the probe marks its losses stale.
"""

import hashlib
import json
import struct
from dataclasses import dataclass
from pathlib import Path

from fw_assets.paths import NAME_RULE, is_safe_name
from fw_assets.probe import ngram

BUILTIN = "builtin"
# The dtypes a model probe runs in. AUTO: bfloat16 on CUDA when the saved weights are float32 (it
# moves a document's loss by ~1e-4 and runs several times faster), else the saved dtype.
AUTO = "auto"
DTYPES = ("float32", "bfloat16", "float16")
# How safetensors headers name them (other dtypes are not floating-point weights).
SAFETENSORS_DTYPES = {"F32": "float32", "BF16": "bfloat16", "F16": "float16"}
SAFETENSORS_HEADER_LIMIT = 100 * 2**20  # the format's own limit on a header's size


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
    batch_tokens: int | None = None  # tokens per forward pass; None: fit the device (causal_lm.py)
    dtype: str = AUTO  # one of DTYPES, or AUTO

    def __post_init__(self) -> None:
        checked_name(self.name)
        if self.model_dir is None and self.name != BUILTIN:
            raise ValueError(f"Probe {self.name!r} has no model directory; only {BUILTIN!r} is built in.")
        if self.model_dir is not None and self.name == BUILTIN:
            raise ValueError(f"Probe name {BUILTIN!r} is the built-in probe's; name the model probe otherwise.")
        if self.max_tokens < 1 or (self.batch_tokens is not None and self.batch_tokens < self.max_tokens):
            raise ValueError(
                f"Probe {self.name}: need max_tokens >= 1 and batch_tokens >= max_tokens "
                f"(got {self.max_tokens}, {self.batch_tokens})."
            )
        if self.dtype not in (AUTO, *DTYPES):
            raise ValueError(f"Probe {self.name}: dtype {self.dtype!r} is not one of {', '.join((AUTO, *DTYPES))} "
                             "(FW_PROBE_DTYPE, or the probe resource's dtype).")

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

    def run_dtype(self) -> str:
        """The dtype the model runs in: `dtype`, or for AUTO bfloat16 on CUDA when the saved
        weights are float32, else the saved dtype. Reads the model's config (or a weight file's
        header), never its weights."""
        if self.dtype != AUTO:
            return self.dtype
        saved = saved_dtype(self.model_dir)
        return "bfloat16" if self.device.startswith("cuda") and saved == "float32" else saved

    def _model_settings(self) -> dict:
        return {"name": self.name, "kind": "causal_lm", "model_dir": str(self.model_dir), "max_tokens": self.max_tokens,
                "dtype": self.run_dtype()}


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


def saved_dtype(folder: Path) -> str:
    """The dtype of a model directory's weights, as `from_pretrained(dtype="auto")` reads it: the
    config's `dtype` (or older `torch_dtype`), else the first floating-point tensor of its first
    safetensors file, else float32. A config that is not JSON is refused by name."""
    config = folder / "config.json"
    try:
        settings = json.loads(config.read_text())
    except FileNotFoundError:
        settings = {}
    except (OSError, ValueError) as error:
        raise ValueError(f"Probe model directory {folder}: {config.name} cannot be read as JSON ({error}); "
                         "nothing was published.") from error
    if not isinstance(settings, dict):
        settings = {}
    named = settings.get("dtype") or settings.get("torch_dtype")
    if named in DTYPES:
        return named
    weights = sorted(folder.glob("*.safetensors"))
    found = _safetensors_dtype(weights[0]) if weights else None
    return found or "float32"


def _safetensors_dtype(path: Path) -> str | None:
    """The dtype of the first floating-point tensor a safetensors file's header lists; None if
    the header is unreadable or lists none (the weights' loader then says what is wrong)."""
    try:
        with open(path, "rb") as stream:
            (size,) = struct.unpack("<Q", stream.read(8))
            if size > SAFETENSORS_HEADER_LIMIT:
                return None
            header = json.loads(stream.read(size))
    except (OSError, ValueError, struct.error):
        return None
    tensors = [entry for key, entry in sorted(header.items()) if key != "__metadata__" and isinstance(entry, dict)]
    return next((SAFETENSORS_DTYPES[t["dtype"]] for t in tensors if t.get("dtype") in SAFETENSORS_DTYPES), None)
