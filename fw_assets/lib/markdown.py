"""Small markdown tables for Dagster metadata, and text shown in them as written."""

import re
from collections.abc import Sequence

# Every ASCII punctuation character may be backslash-escaped in CommonMark; these are the ones that
# mean something inside a table cell: emphasis, strikethrough, code, links and images, HTML,
# entities and the cell's end (block markers such as `#` or `-` do not apply there).
_MARKUP = re.compile(r"([\\`*_\[\]<>|~&])")


def literal(text: str) -> str:
    """`text` on one line (whitespace runs as one space), each markup character escaped: a table
    cell that shows it as written, whatever `~`, `*`, `_`, `|` or `<` it holds."""
    return _MARKUP.sub(r"\\\1", " ".join(text.split()))


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    def cell(value: object) -> str:
        if isinstance(value, float):
            return f"{value:,.4g}" if abs(value) < 1 else f"{value:,.2f}"
        if isinstance(value, int):
            return f"{value:,}"
        return str(value)

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)
