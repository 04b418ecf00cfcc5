"""The project's SQL statements, read from `sql/*.sql` (repo checkout) or the packaged copy."""

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

