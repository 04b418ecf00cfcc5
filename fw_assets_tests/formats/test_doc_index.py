"""doc_index.py: the ids beside a token file, read back by position a few row groups at a time."""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fw_assets.formats import doc_index
from fw_assets.formats.doc_index import DocumentIndexWriter, ids_at
from fw_assets.paths import docs_path


@pytest.fixture
def sidecar(tmp_path, monkeypatch):
    """25 documents in row groups of 4 (the last one short)."""
    monkeypatch.setattr(doc_index, "ROW_GROUP_ROWS", 4)
    with DocumentIndexWriter(tmp_path / "tokens") as writer:
        writer.add(pa.array([f"<urn:uuid:{n:03d}>" for n in range(25)]), np.full(25, 3))
    return tmp_path / "tokens"


def test_ids_at_gives_the_ids_in_the_order_asked_across_row_groups_repeats_included(sidecar):
    assert pq.ParquetFile(docs_path(sidecar)).num_row_groups == 7
    positions = np.array([24, 0, 5, 5, 17, 3, 4, 24, 11])
    assert ids_at(sidecar, positions).to_pylist() == [f"<urn:uuid:{n:03d}>" for n in positions]
    assert ids_at(sidecar, np.zeros(0, np.int32)).to_pylist() == []


@pytest.mark.parametrize("position", [25, -1])
def test_ids_at_refuses_a_position_outside_the_file_naming_it(sidecar, position):
    with pytest.raises(IndexError, match=rf"tokens\.docs\.parquet has 25 documents, asked for document {position}"):
        ids_at(sidecar, np.array([1, position]))
