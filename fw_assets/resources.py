"""Resources: where the data lives, and DuckDB connections sized for this machine."""

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dagster as dg
import duckdb
from pydantic import Field

from fw_assets import settings
from fw_assets.lib.cores import usable_cores

# The instance's key-value record of the output folder its history describes.
OUTPUT_FOLDER_KEY = "fw_assets/output_folder"


class AnotherOutputFolder(RuntimeError):
    """The instance's history describes the outputs of another folder."""


class FineWebStorage(dg.ConfigurableResource):
    """The source snapshot and the output root (defaults: `FW_SOURCE_DIR`, `FW_OUTPUT_DIR`);
    fw_assets.paths spells every path under them.

    One Dagster instance belongs to one output folder: its materializations, observations and
    sensor cursors describe that folder's outputs, and would be taken for another's. The first step
    or sensor tick on an instance records the folder in the instance (`claim`); every later one with
    another folder is refused, naming both."""

    source_dir: str = Field(description="Root of the fineweb-edu snapshot; holds data/<dump>/.")
    output_dir: str = Field(description="Root of the outputs: en/, tokenized/, selection/.")

    @property
    def source_root(self) -> Path:
        return Path(self.source_dir)

    @property
    def output_root(self) -> Path:
        return Path(self.output_dir)

    @classmethod
    def from_environment(cls) -> "FineWebStorage":
        return cls(source_dir=str(settings.source_dir()), output_dir=str(settings.output_dir()))

    def claim(self, instance: dg.DagsterInstance) -> None:
        """Record the output folder as the instance's if it has none; refuse (AnotherOutputFolder)
        if it has another. Every step that writes and every sensor tick calls it first."""
        claim_output_folder(instance, self.output_root)


def claim_output_folder(instance: dg.DagsterInstance, output_root: Path) -> None:
    """Record `output_root` as the instance's output folder if it has none; refuse another one."""
    mine = str(output_root.resolve())
    recorded = instance.run_storage.get_cursor_values({OUTPUT_FOLDER_KEY}).get(OUTPUT_FOLDER_KEY)
    if recorded is None:
        instance.run_storage.set_cursor_values({OUTPUT_FOLDER_KEY: mine})
    elif recorded != mine:
        home = getattr(instance, "root_directory", None) or "this instance"
        raise AnotherOutputFolder(
            f"The Dagster instance at {home} keeps the history of the outputs in {recorded}, but this "
            f"run or sensor writes to {mine} ({settings.OUTPUT_DIR_ENV}). One instance belongs to one "
            f"output folder: its materializations, observations and sensor cursors would be taken for "
            f"those of {mine}. Use an instance of its own for {mine} (another DAGSTER_HOME), or set "
            f"{settings.OUTPUT_DIR_ENV}={recorded}. Nothing was run."
        )


# Rows each thread gathers before writing its share of every PARTITION_BY folder. DuckDB's
# default (524,288) holds ~2.7 GB of web pages per thread: peak memory grew with the dump, and a
# 4M-document dump hit the memory limit and spilled (3.5x slower). At 2,048 the bucketed step
# peaks at ~0.75 GB on two threads whatever the dump's size and spends no more CPU (smaller
# buffers stay in cache); row groups are bounded in `write_buckets.sql`. Evidence in
# docs/benchmarks.md (Memory of the DuckDB steps).
PARTITIONED_WRITE_FLUSH_ROWS = 2048


def default_memory_limit_bytes() -> int:
    """A quarter of physical memory: room for a second dump run and the tokenizer beside it."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return max(total // 4, 512 * 2**20)


def default_memory_limit() -> str:
    return f"{default_memory_limit_bytes() // 2**20}MiB"


# An asset whose step runs DuckDB on every core. It holds this machine's `duckdb` slot while it
# works (fw_assets.run_health.heavy_step), not a Dagster pool slot that a killed run would keep.
DUCKDB_STEP = dict(kinds={"duckdb", "parquet"})


class Warehouse(dg.ConfigurableResource):
    """One in-memory DuckDB connection per step, always closed; nothing shared between runs."""

    threads: int = Field(
        default=0,
        description="Worker threads; 0 means one per core this process may use (its CPU affinity "
        "and cgroup CPU quota, not the machine's count).",
    )
    memory_limit: str = Field(default="", description="e.g. '6GiB'; empty means a quarter of RAM.")
    temp_directory: str = Field(
        default="", description="Spill folder; empty means <output_dir>/.staging/duckdb-spill."
    )

    def thread_count(self) -> int:
        return self.threads or usable_cores()

    def cores_metadata(self) -> dict[str, int]:
        """For a step's metadata: the DuckDB threads it ran and the cores the process may use."""
        return {"threads": self.thread_count(), "usable_cores": usable_cores()}

    @contextmanager
    def connect(self, spill_root: Path) -> Iterator[duckdb.DuckDBPyConnection]:
        """A fresh connection spilling into its own folder under `spill_root` (or temp_directory)."""
        spill_parent = Path(self.temp_directory) if self.temp_directory else spill_root
        spill_parent.mkdir(parents=True, exist_ok=True)
        spill_dir = Path(tempfile.mkdtemp(prefix="duckdb-", dir=spill_parent))
        con = duckdb.connect(
            ":memory:",
            config={
                "threads": self.thread_count(),
                "memory_limit": self.memory_limit or default_memory_limit(),
                "temp_directory": str(spill_dir),
                "preserve_insertion_order": False,
                "partitioned_write_flush_threshold": PARTITIONED_WRITE_FLUSH_ROWS,
            },
        )
        try:
            # Progress is only tracked with the bar on; it is read by query_progress(), not printed.
            con.execute("SET enable_progress_bar = true; SET enable_progress_bar_print = false")
            yield con
        finally:
            con.close()
            shutil.rmtree(spill_dir, ignore_errors=True)
