"""`minhash` on a damaged bucketed file: the failure names the file and the row group, and
nothing is published."""

import json
import shutil

import dagster as dg
import pyarrow.parquet as pq

from fw_assets.dedup.minhash import minhash
from fw_assets.paths import generation_record_path, minhash_path, publication_name
from fw_assets_tests.support.damage import damage_text_page, rewrite_in_row_groups
from fw_assets_tests.support.dedup_runs import LATE, failure_message
from fw_assets_tests.support.runs import materialize_dump
from fw_assets_tests.support.trees import rerecord_file


def test_a_damaged_page_of_a_bucketed_file_names_the_file_and_the_row_group(source, in_order, tmp_path):
    output = tmp_path / "damaged"
    shutil.copytree(in_order[0], output)
    record = json.loads(generation_record_path(output, publication_name("bucketed", LATE)).read_text())
    path = output / max(record["files"], key=lambda f: record["files"][f]["size"])  # the largest bucket file
    rewrite_in_row_groups(output, LATE, path)
    damage_text_page(path, 1)
    rerecord_file(output, publication_name("bucketed", LATE), path)  # damaged before it was checksummed
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
