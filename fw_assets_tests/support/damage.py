"""Damaged bytes in published files, the size and headers intact: what only a checksum or digest can tell."""

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from fw_assets.paths import publication_name
from fw_assets_tests.support.trees import rerecord_file


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


def rewrite_in_row_groups(output: Path, dump: str, path: Path, rows_per_group: int = 100) -> None:
    """A bucketed file's rows again in row groups of `rows_per_group`, as another writer might
    publish them (the dump's bucketed generation record updated with its new size and checksum)."""
    pq.write_table(pq.read_table(path), path, row_group_size=rows_per_group, compression="zstd")
    rerecord_file(output, publication_name("bucketed", dump), path)


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


def flip_byte(path: Path, offset: int) -> None:
    """One bit of the byte at `offset` flipped in place: the file keeps its size."""
    with open(path, "r+b") as file:
        file.seek(offset)
        byte = file.read(1)[0]
        file.seek(offset)
        file.write(bytes([byte ^ 0x01]))
