"""Arrow files with a digest per column of each record batch: what a later dump's decisions read in
place."""

from __future__ import annotations

import re

import pyarrow as pa
import pytest

from fw_assets.dedup.checked_arrow import read_checked_arrow, write_checked_arrow

SCHEMA = pa.schema([("id", pa.string()), ("signature", pa.binary(4))], metadata={b"dump": b"d1"})


def tables() -> list[pa.Table]:
    """Slices of a table with nulls: offsets that do not start at 0, validity bitmaps."""
    whole = pa.table({
        "id": [f"<urn:uuid:{i:04d}>" for i in range(1000)],
        "signature": [None if i % 7 == 0 else i.to_bytes(4, "little") for i in range(1000)],
    }, schema=SCHEMA)
    return [whole.slice(0, 300), whole.slice(300, 699), whole.slice(999)]


def test_what_is_written_is_read_back_with_its_metadata(tmp_path):
    path = tmp_path / "f.arrow"
    write_checked_arrow(path, SCHEMA, tables())
    table = read_checked_arrow(path)
    assert table.equals(pa.concat_tables(tables()))
    assert table.schema.metadata == SCHEMA.metadata
    assert [b.num_rows for b in table.to_batches()] == [300, 699, 1]  # a record batch per table


@pytest.mark.parametrize(
    "column, stored, other",
    [("id", b"<urn:uuid:0500>", "signature"), ("signature", (500).to_bytes(4, "little"), "id")],
)
def test_a_changed_byte_is_refused_naming_the_file_batch_and_column(tmp_path, column, stored, other):
    path = tmp_path / "f.arrow"
    write_checked_arrow(path, SCHEMA, tables())
    data = bytearray(path.read_bytes())
    data[data.index(stored)] ^= 0x01  # an id's or a signature's byte in the second batch
    path.write_bytes(bytes(data))
    refused = re.escape(f"{path}: record batch 1, column {column} does not match its xxh3 digest")
    with pytest.raises(ValueError, match=refused):
        read_checked_arrow(path)
    with pytest.raises(ValueError, match=refused):
        read_checked_arrow(path, [column])
    # a reader of the other column only reads (and verifies) what it uses, as parquet's page checksums
    intact = read_checked_arrow(path, [other])
    assert intact.column_names == [other]
    assert intact.column(other).equals(pa.concat_tables(tables()).column(other))


def test_a_truncated_file_is_refused_naming_it(tmp_path):
    path = tmp_path / "f.arrow"
    write_checked_arrow(path, SCHEMA, tables())
    path.write_bytes(path.read_bytes()[:-50])
    with pytest.raises(ValueError, match=re.escape(str(path)) + ": not a readable Arrow file"):
        read_checked_arrow(path)
