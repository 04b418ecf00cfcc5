"""The token files a recipe reads, as the mixture assets share them: the dependency on `tokenized`
of every dump, the published generations held still while a step reads them, and the refusal to
build over token files re-published since the plan was made."""

from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path

import dagster as dg

from fw_assets.paths import generation_record_path, publication_name
from fw_assets.lib.publish import Log, published_generation
from fw_assets.partitions import dump_partitions

# A recipe reads the token files of every dump its sources match: each recipe depends on `tokenized`
# of all dumps. Dagster does not follow data versions across 100 or more upstream partitions, so
# the UI marks a recipe stale through `mixture_inputs` instead; megatron_indexes and packed refuse a
# plan made from token files that have been replaced since (docs/mixtures.md). Named by its key: a stage
# imports another stage's module only in the asset that depends on it (test_structure.py).
ALL_DUMPS_TOKENIZED = dg.AssetDep(dg.AssetKey("tokenized"), partition_mapping=dg.AllPartitionMapping())


@contextmanager
def tokenized_generations(
    root: Path, tokenizer: str, log: Log, dumps: Sequence[str] | None = None
) -> Iterator[dict[str, dict]]:
    """The published `tokenized` generation record of each dump (of `dumps`, else of every dump
    that has one), by dump, held still while the body reads: no re-tokenizing replaces them meanwhile."""
    if dumps is None:
        dumps = [dump for dump in dump_partitions.get_partition_keys()
                 if generation_record_path(root, publication_name("tokenized", tokenizer, dump)).is_file()]
    with ExitStack() as stack:
        records = {}
        for dump in dumps:
            record = stack.enter_context(published_generation(root, publication_name("tokenized", tokenizer, dump), dump, log))
            if record is not None:
                records[dump] = record
        yield records


def refuse_a_stale_plan(name: str, plan_record: dict, records: dict[str, dict]) -> None:
    """The plan's weights and document counts come from the token files it read: refuse to build
    over token files re-published since."""
    planned = plan_record["contents"]["tokenized_generations"]
    changed = [f"{dump} (planned from generation {generation}, now "
               f"{records[dump]['generation'] if dump in records else 'none'})"
               for dump, generation in planned.items()
               if dump not in records or records[dump]["generation"] != generation]
    if changed:
        raise dg.Failure(
            f"Recipe {name}: the plan is stale, these dumps were re-tokenized since it was made: "
            f"{', '.join(changed[:5])}. Materialize the plan again (--select 'mixture_plan*' "
            f"--partition {name}). Nothing was published."
        )
