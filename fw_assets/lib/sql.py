"""The project's SQL statements, read from `sql/*.sql` (repo checkout) or the packaged copy."""

import hashlib
from functools import cache
from pathlib import Path

_PACKAGED = Path(__file__).resolve().parents[1] / "sql"
_CHECKOUT = Path(__file__).resolve().parents[2] / "sql"


def sql_dir() -> Path:
    return _PACKAGED if _PACKAGED.is_dir() else _CHECKOUT


@cache
def load_sql(name: str) -> str:
    """The text of `sql/<name>.sql`."""
    return (sql_dir() / f"{name}.sql").read_text()


def sql_fingerprint(*names: str) -> str:
    """Short hash of the named statements, part of the code version of the assets running them."""
    digest = hashlib.sha256()
    for name in names:
        digest.update(load_sql(name).encode())
    return digest.hexdigest()[:12]
