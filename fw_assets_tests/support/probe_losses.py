"""Every published loss of a probe for a dump, read as the mixture assets read them (the
generation held still, each bucket's file streamed with its page checksums verified), as one table
with a `bucket` column; and the same losses published again with other values."""

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from fw_assets.formats.probe_losses import LOSS_SCHEMA, loss_batches, published_loss_record
from fw_assets.lib.publish import recorded_generation, staged_publication
from fw_assets.paths import probe_loss_path, publication_name


@contextmanager
def published_losses(output_root: Path, probe: str, dump: str) -> Iterator[pa.Table]:
    with published_loss_record(output_root, probe, dump) as record:
        tables = []
        for bucket in record["contents"]["documents"]:
            batches = list(loss_batches(output_root, record, probe, bucket, dump, LOSS_SCHEMA.names, 1 << 17))
            if batches:
                table = pa.Table.from_batches(batches, LOSS_SCHEMA)
                tables.append(table.append_column("bucket", pa.repeat(pa.scalar(bucket, pa.string()), table.num_rows)))
        yield pa.concat_tables(tables) if tables else LOSS_SCHEMA.append(pa.field("bucket", pa.string())).empty_table()


def republish_equal_losses(output_root: Path, probe: str, dump: str, loss: float) -> None:
    """Publish `probe`'s losses of `dump` again with every document's loss `loss` (a probe that
    cannot tell them apart), its record's contents and inputs unchanged."""
    name = publication_name("probe_loss", probe, dump)
    with published_losses(output_root, probe, dump) as table:
        record = recorded_generation(output_root, name)
    with staged_publication(output_root, name, dump, code_version=record["code_version"]) as staging:
        moves = {}
        for bucket in record["contents"]["documents"]:
            rows = table.filter(pc.equal(table["bucket"], bucket)).drop_columns(["bucket"])
            if rows.num_rows:
                staged = staging.path / bucket / f"{dump}.parquet"
                staged.parent.mkdir(parents=True)
                losses = pa.array(np.full(rows.num_rows, loss))
                equal = rows.set_column(LOSS_SCHEMA.get_field_index("loss"), "loss", losses)
                pq.write_table(equal, staged, write_page_checksum=True)
                moves[probe_loss_path(output_root, probe, bucket, dump)] = staged
        staging.publish(moves, record["contents"], inputs=record["inputs"])
