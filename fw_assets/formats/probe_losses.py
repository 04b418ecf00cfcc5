"""A probe's published losses (`probe_loss`): their schema, and reading one probe's losses of one
dump, for whatever weighs documents by them (the probe stage writes them, the mixtures read them)."""

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from fw_assets.formats.lineage import checked_generation
from fw_assets.paths import probe_loss_path, publication_name
from fw_assets.lib.publish import Log

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
def published_losses(output_root: Path, probe: str, dump: str, log: Log | None = None) -> Iterator[pa.Table]:
    """Every published loss of `probe` for `dump` (LOSS_SCHEMA plus `bucket`), held still while the
    body reads. A file missing or resized since it was published, or damaged in place (its page
    checksums), is refused by name; so are losses of token files replaced since (StaleInput)."""
    name = publication_name("probe_loss", probe, dump)
    with checked_generation(output_root, name, dump, log) as record:
        if record is None:
            raise ProbeLossesMissing(
                f"Dump {dump}: probe {probe} has no published losses. Materialize `probe_loss` for "
                f"this dump (--select probe_loss --partition {dump}) with that probe first."
            )
        tables = [
            _read(output_root, probe_loss_path(output_root, probe, bucket, dump), dump).append_column(
                "bucket", pa.repeat(pa.scalar(bucket, pa.string()), documents))
            for bucket, documents in record["contents"]["documents"].items()
            if documents
        ]
        yield pa.concat_tables(tables) if tables else LOSS_SCHEMA.append(pa.field("bucket", pa.string())).empty_table()


def _read(output_root: Path, path: Path, dump: str) -> pa.Table:
    try:
        return pq.read_table(path, schema=LOSS_SCHEMA, page_checksum_verification=True)
    except (pa.ArrowException, OSError) as error:
        raise ValueError(
            f"Dump {dump}: the published probe loss file {path.relative_to(output_root)} is damaged "
            f"({error}). Materialize `probe_loss` for this dump again to republish it whole."
        ) from error
