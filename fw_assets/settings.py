"""Every environment variable fw_assets reads, with its default: where the data lives, how
often the sensor looks at it, and which host this process is."""

import os
import socket
from pathlib import Path

SOURCE_DIR_ENV = "FW_SOURCE_DIR"
OUTPUT_DIR_ENV = "FW_OUTPUT_DIR"
SENSOR_INTERVAL_ENV = "FW_SENSOR_INTERVAL_SECONDS"
SENSOR_SETTLE_ENV = "FW_SENSOR_SETTLE_SECONDS"
AUTOMATION_INTERVAL_ENV = "FW_AUTOMATION_INTERVAL_SECONDS"
DEDUP_SCOPE_ENV = "FW_DEDUP_SCOPE"
DEDUP_SCOPES = ("across_dumps", "within_dump", "off")
MIXTURES_DIR_ENV = "FW_MIXTURES_DIR"
MAX_MEMORY_ENV = "FW_MIXTURE_MAX_MEMORY_GIB"
MAX_DISK_ENV = "FW_MIXTURE_MAX_DISK_GIB"
PROBE_MODEL_DIR_ENV = "FW_PROBE_MODEL_DIR"
PROBE_DEVICE_ENV = "FW_PROBE_DEVICE"
PROBE_DTYPE_ENV = "FW_PROBE_DTYPE"
PROBE_QUEUE_ENV = "FW_PROBE_QUEUE"
HOST_ENV = "FW_HOST"
DEFAULT_SOURCE_DIR = "data/datasets/HuggingFaceFW/fineweb-edu"
DEFAULT_OUTPUT_DIR = "data/datasets/fineweb"
DEFAULT_SENSOR_INTERVAL_SECONDS = 300
DEFAULT_SENSOR_SETTLE_SECONDS = 600
DEFAULT_AUTOMATION_INTERVAL_SECONDS = 30
DEFAULT_MAX_MEMORY_GIB = 16.0  # one stage's index build: leaves 8 GiB of a 24 GiB host
DEFAULT_MAX_DISK_GIB = 256.0  # a recipe's caches and views (fineweb_edu_1t needs about 9)


def source_dir() -> Path:
    """Root of a Hugging Face snapshot of fineweb-edu (it holds `data/<dump>/`)."""
    return Path(os.environ.get(SOURCE_DIR_ENV, DEFAULT_SOURCE_DIR))


def output_dir() -> Path:
    """Root of everything fw_assets writes (`en/`, `tokenized/`, `selection/`)."""
    return Path(os.environ.get(OUTPUT_DIR_ENV, DEFAULT_OUTPUT_DIR))


def described_output_dir(root: Path) -> str:
    """`root` as a message names it: absolute, and when it is FW_OUTPUT_DIR's default because the
    variable is unset, saying so (the default is relative to the folder the command runs in)."""
    where = str(root.resolve())
    if OUTPUT_DIR_ENV not in os.environ and root == Path(DEFAULT_OUTPUT_DIR):
        where += f" ({OUTPUT_DIR_ENV} is not set: its default, {DEFAULT_OUTPUT_DIR} in the current folder)"
    return where


def mixtures_dir() -> Path | None:
    """A folder of mixture recipes (`*.yaml`) besides the shipped ones; None when unset."""
    return _optional_path(MIXTURES_DIR_ENV)


def mixture_limits() -> tuple[float, float]:
    """(GiB of memory one stage's index build may take, GiB of disk a recipe's caches and views may
    take): a recipe implying more is refused when it is planned."""
    return (env_gib(MAX_MEMORY_ENV, DEFAULT_MAX_MEMORY_GIB), env_gib(MAX_DISK_ENV, DEFAULT_MAX_DISK_GIB))


def env_gib(name: str, default: float) -> float:
    """A positive number of GiB from the environment, with a clear error when it is not one."""
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        gib = float(value)
    except ValueError:
        gib = float("nan")
    if not gib > 0 or gib == float("inf"):
        raise ValueError(f"{name}={value!r}: expected a positive number of GiB")
    return gib


def probe_model_dir() -> Path | None:
    """A local Hugging Face causal LM for `probe_loss`; None (unset): the built-in probe."""
    return _optional_path(PROBE_MODEL_DIR_ENV)


def _optional_path(name: str) -> Path | None:
    value = os.environ.get(name, "").strip()
    return Path(value) if value else None


def probe_device() -> str:
    """Where the model probe runs: `cpu` (default) or `cuda` / `cuda:N`."""
    return os.environ.get(PROBE_DEVICE_ENV, "").strip() or "cpu"


def probe_dtype() -> str:
    """The dtype the model probe runs in: `auto` (default: bfloat16 on CUDA for float32 weights,
    else the saved dtype), `float32`, `bfloat16` or `float16`; checked by the probe's spec."""
    return os.environ.get(PROBE_DTYPE_ENV, "").strip() or "auto"


def probe_queue() -> str | None:
    """The Celery queue every `probe_losses` run is sent to (a GPU host's worker); None (unset): the
    queue of its partition's kind, as any dump's run."""
    return os.environ.get(PROBE_QUEUE_ENV, "").strip() or None


def host_name() -> str:
    """The host this process runs on, as runs' tags and the per-host slots name it: $FW_HOST, else
    the machine's name. Hosts sharing one output folder need names of their own (several Celery
    workers on one machine are several hosts)."""
    return os.environ.get(HOST_ENV, "").strip() or socket.gethostname()


def sensor_interval_seconds() -> int:
    """Seconds between two ticks of the `new_dumps` sensor."""
    return env_seconds(SENSOR_INTERVAL_ENV, DEFAULT_SENSOR_INTERVAL_SECONDS, minimum=1)


def automation_interval_seconds() -> int:
    """Seconds between two evaluations of the decisions' automation conditions (decide_in_crawl_order)."""
    return env_seconds(AUTOMATION_INTERVAL_ENV, DEFAULT_AUTOMATION_INTERVAL_SECONDS, minimum=1)


def sensor_settle_seconds() -> int:
    """How long files not named like finished shards must stay unchanged before a run."""
    return env_seconds(SENSOR_SETTLE_ENV, DEFAULT_SENSOR_SETTLE_SECONDS, minimum=0)


def dedup_scope() -> str:
    """Which near-duplicates `deduplicated` drops: `across_dumps` (default: earlier dumps win),
    `within_dump` (each dump on its own, as the FineWeb paper did) or `off`. Read when the code
    location loads: it is part of the dedup policy's fingerprint, hence of the code version."""
    value = os.environ.get(DEDUP_SCOPE_ENV, "").strip() or DEDUP_SCOPES[0]
    if value not in DEDUP_SCOPES:
        raise ValueError(f"{DEDUP_SCOPE_ENV}={value!r}: expected one of {', '.join(DEDUP_SCOPES)}")
    return value


def env_seconds(name: str, default: int, minimum: int) -> int:
    """An integer number of seconds from the environment, with a clear error when it is not one."""
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    if not value.isdigit() or int(value) < minimum:
        raise ValueError(f"{name}={value!r}: expected a whole number of seconds >= {minimum}")
    return int(value)
