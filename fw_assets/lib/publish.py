"""Publish by rename: outputs are written under a staging folder and moved into place at the end.

A staging folder lives in `<output_root>/.staging/` (fw_assets.layout), on the same filesystem as
the outputs, so the final moves are renames. Before the first move a journal lists every move; a
run killed in the middle of publishing is rolled forward by the next run of the same target
(`recover`), and a run killed before publishing leaves only an abandoned staging folder, which the
next run deletes. Readers never see a half-written file under the published paths.
"""

import fcntl
import json
import os
import shutil
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from fw_assets.layout import publish_locks_dir, staging_root

JOURNAL = "PUBLISH.json"


@contextmanager
def exclusive(output_root: Path, name: str) -> Iterator[None]:
    """Hold a lock on `name` (e.g. `bucketed-CC-MAIN-2013-20`) so two runs never publish it at once."""
    lock_dir = publish_locks_dir(output_root)
    lock_dir.mkdir(parents=True, exist_ok=True)
    with open(lock_dir / f"{name}.lock", "w") as lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock_file, fcntl.LOCK_UN)


class Staging:
    """A fresh staging folder for one publication of `name`."""

    def __init__(self, output_root: Path, name: str):
        self.output_root = output_root
        self.name = name
        self.path = staging_root(output_root) / f"{name}.{uuid.uuid4().hex[:12]}"
        self.path.mkdir(parents=True)

    def publish(self, moves: Mapping[Path, Path | None]) -> None:
        """Move each staged path onto its target; a target mapped to None is removed.

        Every target is replaced whole: what it held before is moved aside, never merged into.
        """
        journal = [
            {"target": str(target), "staged": str(staged) if staged else None}
            for target, staged in moves.items()
        ]
        _write_durably(self.path / JOURNAL, json.dumps(journal, indent=1))
        _roll_forward(self.path)

    def discard(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


def recover(output_root: Path, name: str) -> None:
    """Finish publications of `name` that a killed run journaled; delete abandoned staging."""
    root = staging_root(output_root)
    if not root.is_dir():
        return
    for leftover in sorted(root.glob(f"{name}.*")):
        if (leftover / JOURNAL).exists():
            _roll_forward(leftover)
        else:
            shutil.rmtree(leftover, ignore_errors=True)


def _roll_forward(staging: Path) -> None:
    """Apply the journal's moves that are not done yet, then drop the staging folder."""
    replaced = staging / "replaced"
    replaced.mkdir(exist_ok=True)
    for index, move in enumerate(json.loads((staging / JOURNAL).read_text())):
        target = Path(move["target"])
        staged = Path(move["staged"]) if move["staged"] else None
        if staged is not None and not staged.exists():
            continue  # moved into place before the previous run was killed
        if target.exists() or target.is_symlink():
            os.rename(target, replaced / str(index))
        if staged is not None:
            target.parent.mkdir(parents=True, exist_ok=True)
            os.rename(staged, target)
    shutil.rmtree(staging)


def _write_durably(path: Path, text: str) -> None:
    with open(path, "w") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())


@contextmanager
def staged_publication(output_root: Path, name: str) -> Iterator[Staging]:
    """Lock `name`, finish or clear what an earlier killed run left, and stage a new publication.

    Whatever the body does not publish is deleted on the way out, also when it raises.
    """
    with exclusive(output_root, name):
        recover(output_root, name)
        staging = Staging(output_root, name)
        try:
            yield staging
        finally:
            staging.discard()
