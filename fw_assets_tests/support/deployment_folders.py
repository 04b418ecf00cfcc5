"""The folders a test's Celery deployment (bench.celery_local) runs in."""

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def deployment_folders(prefix: str) -> Iterator[dict[str, Path]]:
    """`home`, `source`, `output` and `one-machine` (what one machine publishes, to compare) under a
    fresh folder outside pytest's: PostgreSQL runs as the postgres user and must reach
    DAGSTER_HOME. Removed afterwards."""
    root = Path(tempfile.mkdtemp(prefix=prefix))
    root.chmod(0o755)
    try:
        yield {name: root / name for name in ("home", "source", "output", "one-machine")}
    finally:
        shutil.rmtree(root, ignore_errors=True)
