"""Shared test helpers: run the chain on real files and read what it published."""

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dagster as dg
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dagster._core.remote_origin import InProcessCodeLocationOrigin, RemoteJobOrigin, RemoteRepositoryOrigin
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin

from fw_assets.automation.dump_runs import PARTITION_TAG
from fw_assets.bucketing.bucketed import bucketed
from fw_assets.bucketing.raw import raw
from fw_assets.bucketing.sampled import sampled
from fw_assets.dedup.deduplicated import deduplicated
from fw_assets.dedup.minhash import minhash
from fw_assets.jobs import dump_chain_job
from fw_assets.paths import generation_record_path, publication_name
from fw_assets.resources import Warehouse, FineWebStorage

CHAIN = [raw, sampled, bucketed, minhash, deduplicated]


def resources(source_root: Path, output_root: Path) -> dict:
    return {
        "storage": FineWebStorage(source_dir=str(source_root), output_dir=str(output_root)),
        "warehouse": Warehouse(threads=2, memory_limit="2GiB"),
    }


def materialize_dump(
    source_root: Path,
    output_root: Path,
    dump: str,
    assets=CHAIN,
    instance=None,
    raise_on_error=True,
    extra_resources: dict | None = None,
) -> dg.ExecuteInProcessResult:
    """Materialize `assets` for one dump; `extra_resources` (e.g. `tokenizer`) join the defaults."""
    return dg.materialize(
        assets,
        partition_key=dump,
        resources={**resources(source_root, output_root), **(extra_resources or {})},
        instance=instance,
        raise_on_error=raise_on_error,
    )


def read_source(source_root: Path, dump: str) -> pa.Table:
    files = sorted((source_root / "data" / dump).glob("*.parquet"))
    return pa.concat_tables(pq.read_table(f) for f in files)


def published_tree(output_root: Path) -> dict[str, str]:
    """Every published file (not staging) under the output root, relative path -> sha256."""
    return {
        str(p.relative_to(output_root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(output_root.rglob("*"))
        if p.is_file() and ".staging" not in p.relative_to(output_root).parts
    }


def rerecord_size(output_root: Path, publication: str, published: Path) -> None:
    """After a test edits a published file: make the generation record agree with its new size,
    as damage that no size check sees would."""
    record_file = generation_record_path(output_root, publication)
    record = json.loads(record_file.read_text())
    record["files"][str(published.relative_to(output_root))] = published.stat().st_size
    record_file.write_text(json.dumps(record))


def damage_first_page(path: Path, column: str) -> None:
    """Overwrite 256 bytes inside the first page of `column`'s chunk in row group 0 of a parquet
    file, leaving its size, page headers and footer intact: only the page checksum can tell."""
    group = pq.read_metadata(path).row_group(0)
    chunks = [group.column(i) for i in range(group.num_columns)]
    (chunk,) = [c for c in chunks if c.path_in_schema == column]
    start = (chunk.dictionary_page_offset or chunk.data_page_offset) + 64
    data = bytearray(path.read_bytes())
    data[start : start + 256] = bytes(range(256))
    path.write_bytes(bytes(data))


def damage_arrow_values(path: Path, column: str) -> None:
    """Overwrite 256 bytes of an Arrow file from where `column`'s first value is stored, leaving
    its size, message headers and footer intact: only the column's digest can tell."""
    table = pa.ipc.open_file(pa.memory_map(str(path))).read_all()
    first = table.column(column).drop_null()[0].as_py()
    stored = first if isinstance(first, bytes) else np.uint64(first).tobytes()  # binary or uint64
    data = bytearray(path.read_bytes())
    start = data.index(stored)
    data[start : start + 256] = bytes(range(256))
    path.write_bytes(bytes(data))


def make_read_only(root: Path) -> None:
    """Take write permission from every file and folder under `root`: a test that writes into
    an output other tests share fails at once instead of changing what they read."""
    for folder, _, files in os.walk(root):
        for name in files:
            os.chmod(os.path.join(folder, name), stat.S_IRUSR | stat.S_IRGRP)
        os.chmod(folder, stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP)


def writable_copy(shared: Path, destination: Path) -> Path:
    """A copy of a shared read-only output that a test may write into."""
    shutil.copytree(shared, destination, copy_function=shutil.copyfile)
    for folder, _, _ in os.walk(destination):
        os.chmod(folder, stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP)
    return destination


def unfinished_run(instance: dg.DagsterInstance, dump: str, status: dg.DagsterRunStatus) -> str:
    """A run of the dump's chain as the daemon queues it (from the code location) or the CLI
    starts it; returns its id."""
    origin = RemoteJobOrigin(
        RemoteRepositoryOrigin(
            InProcessCodeLocationOrigin(LoadableTargetOrigin(module_name="fw_assets.definitions")),
            "__repository__",
        ),
        dump_chain_job.name,
    )
    run = dg.DagsterRun(job_name=dump_chain_job.name, run_id=str(uuid.uuid4()), status=status,
                        tags={PARTITION_TAG: dump}, remote_job_origin=origin)
    instance.add_run(run)
    return run.run_id


def mount(*arguments: str) -> None:
    """`mount` as root; the test is skipped where the sandbox cannot mount."""
    result = subprocess.run(["mount", *arguments], capture_output=True, text=True)
    if result.returncode:
        pytest.skip(f"cannot mount a test filesystem here ({result.stderr.strip()}): needs root")


@contextmanager
def tmpfs(folder: Path, size: str) -> Iterator[Path]:
    """A filesystem of its own of `size` (`2m`, `64m`) at `folder`, unmounted afterwards: for full
    and read-only disks (`mount("-o", "remount,ro", str(folder))`)."""
    folder.mkdir(exist_ok=True)
    mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder))
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def fill_disk(disk: Path, leave: int) -> Path:
    """Fill the filesystem of `disk` but `leave` bytes with a file, returned (unlink it to free)."""
    filler = disk / "filler"
    with open(filler, "wb") as handle:
        handle.write(b"\0" * max(shutil.disk_usage(disk).free - leave, 0))
    return filler


# A child process materializes one asset of a dump and SIGKILLs itself right after moving the first
# old published file or folder aside (into `replaced/`): a publication killed half way.
_KILLED_MID_PUBLISH = """
import os, signal, sys
from pathlib import Path
from fw_assets_tests.helpers import materialize_dump
{imports}
real_rename = os.rename
def rename_then_die(src, dst):
    real_rename(src, dst)
    if Path(dst).parent.name == "replaced":
        os.kill(os.getpid(), signal.SIGKILL)
os.rename = rename_then_die
materialize_dump(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], assets=[{asset}], extra_resources={resources})
"""


def killed_mid_publish(source: Path, output: Path, dump: str, imports: str, asset: str, resources: str = "None") -> int:
    """Run the child above (`imports`: the lines bringing `asset` and what `resources` names);
    its exit code, -9 when it was killed as planned."""
    script = _KILLED_MID_PUBLISH.format(imports=imports, asset=asset, resources=resources)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run([sys.executable, "-c", script, str(source), str(output), dump], env=env).returncode


def rewrite_in_row_groups(output: Path, dump: str, path: Path, rows_per_group: int = 100) -> None:
    """A bucketed file's rows again in row groups of `rows_per_group`, as another writer might
    publish them (the dump's bucketed generation record updated with the new size)."""
    pq.write_table(pq.read_table(path), path, row_group_size=rows_per_group, compression="zstd")
    record_path = generation_record_path(output, publication_name("bucketed", dump))
    record = json.loads(record_path.read_text())
    record["files"][str(path.relative_to(output))] = path.stat().st_size
    record_path.write_text(json.dumps(record))


def damage_text_page(path: Path, group: int) -> None:
    """Overwrite 64 bytes in the middle of the `text` column of row group `group`, same size."""
    metadata = pq.ParquetFile(path).metadata
    names = [metadata.row_group(group).column(i).path_in_schema for i in range(metadata.num_columns)]
    chunk = metadata.row_group(group).column(names.index("text"))
    start = chunk.dictionary_page_offset if chunk.has_dictionary_page else chunk.data_page_offset
    middle = start + chunk.total_compressed_size // 2
    data = bytearray(path.read_bytes())
    data[middle : middle + 64] = bytes(range(64))
    path.write_bytes(bytes(data))
