"""Every published loss of a probe for a dump, read as the mixture assets read them (the
generation held still, each bucket's file streamed with its page checksums verified), as one table
with a `bucket` column."""

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa

from fw_assets.formats.probe_losses import LOSS_SCHEMA, loss_batches, published_loss_record


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
