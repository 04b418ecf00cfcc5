"""`minhash` on a damaged bucketed file: the failure names the file and the row group, and
nothing is published."""

import json
import shutil
from pathlib import Path

import dagster as dg
import pyarrow.parquet as pq

from fw_assets.dedup.minhash import minhash
from fw_assets.layout import generation_record_path, minhash_path, publication_name
from fw_assets_tests.dedup.test_deduplicated import LATE, failure_message, in_order, source  # noqa: F401
from fw_assets_tests.helpers import materialize_dump

ROWS_PER_GROUP = 100


def rewrite_in_row_groups(output: Path, path: Path) -> None:
    """The same rows in row groups of ROWS_PER_GROUP, as another writer might publish them (its
    generation record updated with the new size)."""
    pq.write_table(pq.read_table(path), path, row_group_size=ROWS_PER_GROUP, compression="zstd")
    record_path = generation_record_path(output, publication_name("bucketed", LATE))
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


def test_a_damaged_page_of_a_bucketed_file_names_the_file_and_the_row_group(source, in_order, tmp_path):  # noqa: F811
    output = tmp_path / "damaged"
    shutil.copytree(in_order[0], output)
    record = json.loads(generation_record_path(output, publication_name("bucketed", LATE)).read_text())
    path = output / max(record["files"], key=lambda f: record["files"][f])  # the largest bucket file
    rewrite_in_row_groups(output, path)
    damage_text_page(path, 1)
    before = minhash_path(output, LATE).read_bytes()
    result = materialize_dump(source, output, LATE, assets=[minhash], raise_on_error=False)
    assert not result.success
    message = failure_message(result)
    groups = pq.ParquetFile(path).metadata.num_row_groups
    for expected in (f"Dump {LATE}: the bucketed file {path} is damaged", f"row group 1 (of {groups})",
                     "Nothing was published", "Materialize `bucketed` of this dump again"):
        assert expected in message, message
    assert minhash_path(output, LATE).read_bytes() == before
    assert not any(e.event_type == dg.DagsterEventType.ASSET_MATERIALIZATION for e in result.all_events)
