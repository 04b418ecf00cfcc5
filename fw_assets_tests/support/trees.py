"""What an output root published, and copies of it that a test may write into."""

import hashlib
import json
import os
import shutil
import stat
from collections.abc import Callable
from pathlib import Path

from fw_assets.lib.checksums import file_checksum
from fw_assets.lib.generation_record import file_entry, sealed
from fw_assets.paths import generation_record_path


def published_tree(output_root: Path) -> dict[str, str]:
    """Every published file (not staging) under the output root, relative path -> sha256. Staging
    folders are not entered: a writer may delete one while this walks."""
    files = []
    for folder, subfolders, names in os.walk(output_root):
        subfolders[:] = sorted(d for d in subfolders if d != ".staging")
        files += [Path(folder, name) for name in names]
    return {str(p.relative_to(output_root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(files)}


def without_probe_losses(tree: dict[str, str]) -> dict[str, str]:
    """A published tree without probe losses: whenever a recipe reweights by the probe (the shipped
    `demo` recipe does), the `stale_losses` sensor scores each dump's token files on its own
    schedule, so whether a dump's losses exist yet depends on when it ticked, not on its chain."""
    return {path: digest for path, digest in tree.items()
            if not path.startswith(("probe/", "published/probe_loss-"))}


def published_data(output_root: Path) -> dict[str, str]:
    """`published_tree` comparable between two runs of the same dumps: a generation record counts by
    the files it lists and their sizes, not by its ids and times (which name this publication and
    the ones it read)."""
    tree = published_tree(output_root)
    for record in sorted(generation_record_path(output_root, "any").parent.glob("*.json")):
        files = json.dumps(json.loads(record.read_text())["files"], sort_keys=True)
        tree[str(record.relative_to(output_root))] = hashlib.sha256(files.encode()).hexdigest()
    return tree


def rerecord_file(output_root: Path, publication: str, published: Path) -> None:
    """After a test edits a published file: make the generation record agree with its new size and
    checksum, as damage done before the file was checksummed (by its writer) would."""
    relative = str(published.relative_to(output_root))
    rewrite_record(output_root, publication, lambda record: record["files"].__setitem__(
        relative, file_entry(published.stat().st_size, file_checksum(published))))


def rewrite_record(output_root: Path, publication: str, edit: Callable[[dict], object]) -> None:
    """Edit a publication's generation record in place, sealed again with its checksum: a record
    whose every field passes the schema (what only a reader comparing it with more can refuse)."""
    record_file = generation_record_path(output_root, publication)
    record = json.loads(record_file.read_text())
    edit(record)
    record_file.write_text(json.dumps(sealed(record)))


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
