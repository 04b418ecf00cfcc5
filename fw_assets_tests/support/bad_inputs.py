"""Damage generated FineWeb-Edu files the ways real downloads and re-exports go wrong."""

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from fw_assets.synthetic.generator import ROW_GROUP_SIZE


def rewrite(path: Path, change: Callable[[pa.Table], pa.Table], **write_options: Any) -> pa.Table:
    """Replace the parquet file with `change` applied to its table; returns the table before."""
    before = pq.read_table(path)
    pq.write_table(change(before), path, **{"row_group_size": ROW_GROUP_SIZE, **write_options})
    return before


def with_values(
    column: str, values: Mapping[int, Any], type: pa.DataType | None = None
) -> Callable[[pa.Table], pa.Table]:
    """A change that sets `column` at the given rows (and, with `type`, retypes the column)."""

    def change(table: pa.Table) -> pa.Table:
        index = table.schema.get_field_index(column)
        cells = table.column(column).to_pylist()
        if type is not None:
            cells = [None if v is None else _convert(v, type) for v in cells]
        for row, value in values.items():
            cells[row] = value
        new_type = type or table.schema.field(column).type
        return table.set_column(index, pa.field(column, new_type), pa.array(cells, new_type))

    return change


def _convert(value: Any, type: pa.DataType) -> Any:
    return str(value) if pa.types.is_string(type) else value


def without_column(column: str) -> Callable[[pa.Table], pa.Table]:
    return lambda table: table.drop_columns([column])


def with_extra_columns(table: pa.Table) -> pa.Table:
    """Columns a newer or re-exported snapshot might carry, placed first and last."""
    n = table.num_rows
    table = table.add_column(0, "crawl_notes", pa.array([f"note {i}" for i in range(n)]))
    return table.append_column("minhash_bucket", pa.array(range(n), pa.int32()))


def truncate(path: Path, share: float = 0.5) -> None:
    """Keep the first `share` of the file's bytes, as an interrupted download does."""
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * share)])


def corrupt_column(path: Path, column: str, row_group: int = 0) -> None:
    """Overwrite bytes inside one column chunk's data page; the footer stays readable."""
    group = pq.read_metadata(path).row_group(row_group)
    chunk = next(
        group.column(i) for i in range(group.num_columns) if group.column(i).path_in_schema == column
    )
    data = bytearray(path.read_bytes())
    start = chunk.data_page_offset + 10
    data[start : start + 200] = b"\xab" * 200
    path.write_bytes(bytes(data))


def write_empty_like(path: Path, template: Path) -> None:
    """A zero-row parquet file with the template file's schema."""
    pq.write_table(pq.read_schema(template).empty_table(), path)


def dangle(path: Path) -> None:
    """Replace the file with a link to a blob that is not there, as a Hugging Face cache whose
    download of that blob never finished leaves it."""
    path.unlink()
    path.symlink_to(path.parent / "../../blobs/0123456789abcdef0123456789abcdef01234567")


def apple_double_beside(path: Path) -> Path:
    """The `._<name>` file macOS writes beside a file copied onto a foreign disk (not parquet)."""
    twin = path.with_name(f"._{path.name}")
    twin.write_bytes(b"\x00\x05\x16\x07\x00\x02\x00\x00Mac OS X        " + bytes(4000))
    return twin


def with_latin1_texts(rows: list[int]) -> Callable[[pa.Table], pa.Table]:
    """A change that stores the text of these rows as Latin-1 bytes (not UTF-8), as a re-export by
    a tool that never checks encodings does."""

    def change(table: pa.Table) -> pa.Table:
        cells = [None if t is None else t.encode() for t in table.column("text").to_pylist()]
        for row in rows:
            cells[row] = "Café crème, déjà vu: ".encode("latin-1") + cells[row]
        texts = pa.array(cells, pa.binary()).view(pa.string())  # arrow takes the bytes unchecked
        return table.set_column(table.schema.get_field_index("text"), "text", texts)

    return change
