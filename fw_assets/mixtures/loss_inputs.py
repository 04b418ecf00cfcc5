"""The probe losses a recipe's reweighted sources read, as the mixture assets share them: the
dependency on `probe_loss` of every dump (lineage), and the published generations held still while
the plan reads them, each refused if it is stale (fw_assets.formats.lineage) and recorded among the
plan's inputs with the probe that scored it."""

from contextlib import ExitStack
from pathlib import Path

import dagster as dg
import pyarrow as pa

from fw_assets.formats.lineage import StaleInput
from fw_assets.formats.probe_losses import published_losses, scoring_identity
from fw_assets.lib.publish import Log, PublishedOutputChanged, input_entry, recorded_generation
from fw_assets.paths import publication_name

# A reweighted source reads the losses of every dump it draws on: each recipe depends on
# `probe_loss` of all dumps, named by its key (test_structure.py), like ALL_DUMPS_TOKENIZED.
ALL_DUMPS_PROBED = dg.AssetDep(dg.AssetKey("probe_loss"), partition_mapping=dg.AllPartitionMapping())


class HeldLosses:
    """A `reweighted.LossReader` that holds each (probe, dump) generation it read still until the
    stack closes, and remembers its generation record."""

    def __init__(self, root: Path, log: Log, stack: ExitStack) -> None:
        self.root, self.log, self.stack = root, log, stack
        self.tables: dict[tuple[str, str], pa.Table] = {}
        self.records: dict[tuple[str, str], dict] = {}

    def __call__(self, probe: str, dump: str) -> pa.Table:
        if (probe, dump) not in self.tables:
            try:
                table = self.stack.enter_context(published_losses(self.root, probe, dump, self.log))
            except PublishedOutputChanged as error:
                raise ValueError(f"Dump {dump}: probe {probe}: {str(error).rstrip('.')} "
                                 f"(--select probe_loss --partition {dump})") from error
            except StaleInput as error:
                raise ValueError(f"probe {probe}: {error}") from error
            self.tables[probe, dump] = table
            self.records[probe, dump] = recorded_generation(self.root, publication_name("probe_loss", probe, dump))
        return self.tables[probe, dump]

    def inputs(self) -> dict[str, dict]:
        """The losses read, as a generation record's inputs: each with the probe that scored it."""
        return {publication_name("probe_loss", probe, dump): input_entry(record, probe=scoring_identity(record))
                for (probe, dump), record in self.records.items()}
