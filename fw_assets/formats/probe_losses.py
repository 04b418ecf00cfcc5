"""A probe's published losses (`probe_loss`): their schema, and reading one probe's losses of one
dump, for whatever weighs documents by them (the probe step writes them, the mixtures read them)."""

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from fw_assets.formats.lineage import checked_generation
from fw_assets.lib.publish import Log
from fw_assets.paths import probe_loss_path, publication_name

LOSS_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("tokens", pa.int64()),
        ("loss", pa.float64()),
        ("bits_per_byte", pa.float64()),
        ("truncated", pa.bool_()),
    ]
)


# What a generation record of losses says of its probe but does not decide its losses: where the
# model folder was, and the built-in probe's reference sample (fitted on each dump it scores).
NOT_DECIDING = ("model_dir", "reference_sha256")


class ProbeLossesMissing(ValueError):
    """The probe has no published losses of the dump."""


def scoring_identity(record: dict) -> dict:
    """What decided the losses of a generation record of `probe_loss` (the probe's kind, settings,
    and a model's sha256): equal for two dumps scored by the same probe, wherever its folder was."""
    return {key: value for key, value in record["contents"]["probe"].items() if key not in NOT_DECIDING}


@contextmanager
def published_loss_record(output_root: Path, probe: str, dump: str, log: Log | None = None) -> Iterator[dict]:
    """The generation record of `probe`'s published losses of `dump`, held still while the body
    reads them (`loss_batches`); refuses a dump the probe has no published losses of, and losses of
    token files replaced since (StaleInput). A file missing or resized since it was published is
    refused by name; one damaged in place (its page checksums) by `loss_batches`."""
    name = publication_name("probe_loss", probe, dump)
    with checked_generation(output_root, name, dump, log) as record:
        if record is None:
            raise ProbeLossesMissing(
                f"Dump {dump}: probe {probe} has no published losses. Materialize `probe_loss` for "
                f"this dump (--select probe_loss --partition {dump}) with that probe first."
            )
        yield record


def loss_batches(
    output_root: Path, record: dict, probe: str, bucket: str, dump: str, columns: Sequence[str], batch_rows: int
) -> Iterator[pa.RecordBatch]:
    """`columns` of one bucket's published losses (of the generation `record` holds still), in the
    file's order (its token file's documents'), `batch_rows` rows at a time: memory for one batch,
    not the file. A bucket without documents has none; a damaged file is refused by name."""
    if not record["contents"]["documents"].get(bucket):
        return
    path = probe_loss_path(output_root, probe, bucket, dump)
    try:
        losses = pq.ParquetFile(path, page_checksum_verification=True)
        yield from losses.iter_batches(batch_size=batch_rows, columns=list(columns))
    except (pa.ArrowException, OSError) as error:
        raise _damaged(output_root, path, dump, error) from error


def _damaged(output_root: Path, path: Path, dump: str, error: Exception) -> ValueError:
    return ValueError(
        f"Dump {dump}: the published probe loss file {path.relative_to(output_root)} is damaged "
        f"({error}). Materialize `probe_loss` for this dump again to republish it whole."
    )
