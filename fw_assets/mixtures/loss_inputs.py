"""The probe losses a recipe's reweighted sources read, as the mixture assets share them: the
dependency on `probe_loss` of every dump (lineage), and the published generations held still while
the plan reads them, each refused if it is stale (fw_assets.formats.lineage) and recorded among the
plan's inputs with the probe that scored it."""

import json
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import dagster as dg
import pyarrow as pa

from fw_assets.formats.lineage import RefusedInput
from fw_assets.formats.probe_losses import loss_batches, published_loss_record, scoring_identity
from fw_assets.lib.publish import Log, input_entry
from fw_assets.paths import publication_name

# A reweighted source reads the losses of every dump it draws on: each recipe depends on
# `probe_loss` of all dumps, named by its key (test_structure.py), like ALL_DUMPS_TOKENIZED.
ALL_DUMPS_PROBED = dg.AssetDep(dg.AssetKey("probe_loss"), partition_mapping=dg.AllPartitionMapping())
LOSS_BATCH_ROWS = 1 << 17  # the loss files' row groups: a batch is read from one


class HeldLosses:
    """A `reweighted.LossReader` that holds each (probe, dump) generation it read still until the
    stack closes, and remembers its generation record; each call streams one bucket's losses from
    its file (nothing of them is kept between calls)."""

    def __init__(self, root: Path, log: Log, stack: ExitStack) -> None:
        self.root, self.log, self.stack = root, log, stack
        self.records: dict[tuple[str, str], dict] = {}

    def __call__(self, probe: str, dump: str, bucket: str) -> Iterator[pa.RecordBatch]:
        if (probe, dump) not in self.records:
            try:
                record = self.stack.enter_context(published_loss_record(self.root, probe, dump, self.log))
            except RefusedInput as error:  # stale, or its record or files cannot be trusted
                raise ValueError(f"probe {probe}: {error}") from error
            self.records[probe, dump] = record
            self._refuse_mixed_scorers(probe)
        return loss_batches(self.root, self.records[probe, dump], probe, bucket, dump, ("id", "loss"), LOSS_BATCH_ROWS)

    def _refuse_mixed_scorers(self, probe: str) -> None:
        """Losses are weighed against their source's median: every dump read under one probe
        name must have been scored by the same probe (model bytes, settings)."""
        scorers = {dump: scoring_identity(record) for (p, dump), record in self.records.items() if p == probe}
        if len({json.dumps(s, sort_keys=True) for s in scorers.values()}) > 1:
            listed = "; ".join(f"{dump}: {_describe(identity)}" for dump, identity in sorted(scorers.items()))
            raise ValueError(
                f"probe {probe} scored the dumps with different models: {listed}. A source's losses are "
                f"compared with each other, so its dumps must be scored by one probe: materialize "
                f"probe_loss of each of them with the same one (--select probe_loss --partition DUMP)")

    def inputs(self) -> dict[str, dict]:
        """The losses read, as a generation record's inputs: each with the probe that scored it."""
        return {publication_name("probe_loss", probe, dump): input_entry(record, probe=scoring_identity(record))
                for (probe, dump), record in self.records.items()}


def _describe(identity: dict) -> str:
    """A probe's identity, short: its model's sha256 (first 12) and settings, or its parameters."""
    return ", ".join(f"{key} {str(value)[:12] if key == 'model_sha256' else value}"
                     for key, value in sorted(identity.items()) if key != "name")
