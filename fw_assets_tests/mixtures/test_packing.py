"""packing.py: packed rows are Megatron-Core's own `BlendedDataset[i]`, with where each document
starts, in files of a fixed number of rows that sort in sample order."""

import pyarrow.dataset as ds
import pytest

from fw_assets.mixtures.packing import write_packed
from fw_assets.paths import packed_dir
from fw_assets_tests.support.megatron_oracle import megatron_build

pytestmark = pytest.mark.needs_extra("megatron")


def test_packed_rows_are_megatrons_samples(curriculum_cache, process_group):
    mixture, ours, root = curriculum_cache
    for stage in (mixture.stages[0], mixture.stages[-1]):
        folder = packed_dir(root / "out", "curriculum", stage.name)
        files = write_packed(stage, ours, folder, rows_per_file=24)
        assert len(files) > 1 and [f.name for f in files] == sorted(f.name for f in files)
        table = ds.dataset(str(folder), format="parquet").to_table()
        blended = megatron_build(stage, ours)[0]
        assert table.num_rows == stage.num_samples[0] <= len(blended)
        for i in range(table.num_rows):
            item = blended[i]
            row = {k: table[k][i].as_py() for k in ("input_ids", "labels", "documents")}
            assert row["input_ids"] == item["tokens"].tolist()
            assert row["labels"] == item["labels"].tolist()
            assert len(row["input_ids"]) == stage.seq_length and row["documents"][0] == 0
            eod = 50_000 - 1
            # a new document starts right after each end-of-document token of the inputs
            assert row["documents"][1:] == [k + 1 for k, t in enumerate(row["input_ids"][:-1]) if t == eod]
