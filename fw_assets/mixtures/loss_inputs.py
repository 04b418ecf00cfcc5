"""The probe losses a recipe's reweighted sources read, as the mixture assets share them: the
dependency on `probe_loss` of every dump (lineage), the published generations held still while the
plan reads them and recorded in its identity, and the refusal to build over losses re-published
(or changed underneath) since the plan was made."""

import json
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import dagster as dg
import pyarrow as pa

from fw_assets.paths import generation_record_path, publication_name
from fw_assets.formats.probe_losses import loss_batches, published_loss_record
from fw_assets.lib.publish import Log, PublishedOutputChanged, published_generation

# A reweighted source reads the losses of every dump it draws on: each recipe depends on
# `probe_loss` of all dumps, named by its key (test_structure.py), like ALL_DUMPS_TOKENIZED.
ALL_DUMPS_PROBED = dg.AssetDep(dg.AssetKey("probe_loss"), partition_mapping=dg.AllPartitionMapping())
LOSS_BATCH_ROWS = 1 << 17  # the loss files' row groups: a batch is read from one


class HeldLosses:
    """A `reweighted.LossReader` that holds each (probe, dump) generation it read still until the
    stack closes, and remembers which generation that was; each call streams one bucket's losses
    from its file (nothing of them is kept between calls)."""

    def __init__(self, root: Path, log: Log, stack: ExitStack) -> None:
        self.root, self.log, self.stack = root, log, stack
        self.records: dict[tuple[str, str], dict] = {}
        self.generations: dict[str, dict[str, str]] = {}  # probe -> dump -> generation

    def __call__(self, probe: str, dump: str, bucket: str) -> Iterator[pa.RecordBatch]:
        if (probe, dump) not in self.records:
            try:
                record = self.stack.enter_context(published_loss_record(self.root, probe, dump, self.log))
            except PublishedOutputChanged as error:
                raise ValueError(f"Dump {dump}: probe {probe}: {str(error).rstrip('.')} "
                                 f"(--select probe_loss --partition {dump})") from error
            self.records[probe, dump] = record
            self.generations.setdefault(probe, {})[dump] = record["generation"]
        return loss_batches(self.root, self.records[probe, dump], probe, bucket, dump, ("id", "loss"), LOSS_BATCH_ROWS)


def loss_generations(root: Path, probes: list[str], dumps: list[str]) -> dict[str, dict[str, str]]:
    """The published loss generation of each probe and dump that has one (for data versions)."""
    found = {}
    for probe in probes:
        for dump in dumps:
            record = generation_record_path(root, publication_name("probe_loss", probe, dump))
            if record.is_file():
                found.setdefault(probe, {})[dump] = json.loads(record.read_text())["generation"]
    return found


@contextmanager
def refuse_a_plan_on_other_losses(name: str, root: Path, plan_record: dict, log: Log) -> Iterator[None]:
    """Hold the loss generations the plan was made from still while the body builds on it;
    refuse (naming the probe and dump) if one was re-published or changed underneath since."""
    planned = plan_record["contents"].get("probe_generations", {})
    changed = []
    with ExitStack() as stack:
        for probe, dumps in planned.items():
            for dump, generation in dumps.items():
                try:
                    record = stack.enter_context(published_generation(root, publication_name("probe_loss", probe, dump), dump, log))
                except PublishedOutputChanged as error:
                    changed.append(f"{probe} of {dump} ({error})")
                    continue
                if record is None or record["generation"] != generation:
                    now = "none" if record is None else record["generation"]
                    changed.append(f"{probe} of {dump} (planned from generation {generation}, now {now})")
        if changed:
            raise dg.Failure(
                f"Recipe {name}: the plan is stale, the probe losses it reweighted by changed since it "
                f"was made: {'; '.join(changed[:5])}. Materialize the plan again (--select "
                f"'mixture_plan*' --partition {name}). Nothing was published."
            )
        yield
