"""The token files a recipe reads, as the mixture assets share them: the dependency on `tokenized`
of every dump, and the published generations held still while a step reads them, each refused if it
is stale (fw_assets.formats.lineage)."""

from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path

import dagster as dg

from fw_assets.formats.lineage import checked_generation
from fw_assets.lib.publish import FileSelection, Log, no_file
from fw_assets.partitions import dump_partitions
from fw_assets.paths import generation_record_path, publication_name

# A recipe reads the token files of every dump its sources match: each recipe depends on `tokenized`
# of all dumps. Dagster does not follow data versions across 100 or more upstream partitions, so
# the UI marks a recipe stale through `mixture_inputs` instead; megatron_indexes and packed refuse a
# plan made from token files that have been replaced since (docs/mixtures.md). Named by its key: a step
# folder imports another's module only in the asset that depends on it (test_structure.py).
ALL_DUMPS_TOKENIZED = dg.AssetDep(dg.AssetKey("tokenized"), partition_mapping=dg.AllPartitionMapping())


@contextmanager
def tokenized_generations(
    root: Path, tokenizer: str, log: Log, dumps: Sequence[str] | None = None, verified: FileSelection = no_file
) -> Iterator[dict[str, dict]]:
    """The published `tokenized` generation record of each dump (of `dumps`, else of every dump
    that has one), by dump, held still while the body reads: no re-tokenizing replaces them meanwhile.
    The files `verified` selects are checked against their checksums (those the reader reads whole)."""
    if dumps is None:
        dumps = [dump for dump in dump_partitions.get_partition_keys()
                 if generation_record_path(root, publication_name("tokenized", tokenizer, dump)).is_file()]
    with ExitStack() as stack:
        records = {}
        for dump in dumps:
            name = publication_name("tokenized", tokenizer, dump)
            record = stack.enter_context(checked_generation(root, name, dump, log, verified))
            if record is not None:
                records[dump] = record
        yield records


def planned_dumps(record: dict, tokenizer: str) -> list[str]:
    """The dumps whose token files an output of a recipe was made from (its record's inputs)."""
    prefix = publication_name("tokenized", tokenizer, "")
    return sorted(name.removeprefix(prefix) for name in record["inputs"] if name.startswith(prefix))
