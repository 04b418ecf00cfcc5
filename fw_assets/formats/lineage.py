"""What each output was made from, and the one check every reader makes before relying on an output.

Every generation record (`published/<name>.json`, fw_assets.lib.publish) names its `inputs`: each
publication it was made from with the generation it read, plus the identity that mattered (a
tokenizer, a probe). An output whose inputs have been replaced since is stale: what it says no
longer describes what is published beside it (losses of other token files, decisions over other
band keys, a plan over other documents). `checked_generation` is how every asset, the sensors and
the `explain` commands read an upstream output: it refuses a stale one, naming both generations and
the command that makes it again. An output read for its content alone (another dump's band keys,
compared by content version) is read with `content_generation`: whether it is still current is its
own chain's to settle, and a reader that recorded its content sees any change of it.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from fw_assets.lib.publish import ChangedInput, Log, changed_inputs, published_generation

# What makes a publication again, by the step its name begins with (fw_assets.paths.publication_name).
# A recipe's outputs are made again with what follows them (the plan's indexes are built from it).
REFRESHED_BY = {
    "sampled": "sampled",
    "bucketed": "bucketed",
    "minhash": "minhash",
    "dedup": "deduplicated",
    "tokenized": "tokenized",
    "probe_loss": "probe_loss",
    "mixture_plan": "'mixture_plan*'",
    "megatron_indexes": "'megatron_indexes*'",
    "packed": "packed",
}
PER_RECIPE = ("mixture_plan", "megatron_indexes", "packed")
SHOWN = 3


class StaleInput(RuntimeError):
    """An output was made from inputs that have been replaced since; the message says which and how
    to make it again."""


def publication_step(name: str) -> str:
    """`tokenized-cl100k_base_offline-CC-MAIN-2013-20` -> `tokenized` (step names hold no '-')."""
    return name.split("-", 1)[0]


def refresh_command(name: str, partition: str) -> str:
    """The command that publishes `name` (of `partition`) again from what is published now."""
    select = REFRESHED_BY[publication_step(name)]
    return f"dagster asset materialize -m fw_assets.definitions --select {select} --partition {partition}"


def _partition_label(name: str, partition: str) -> str:
    """`Dump CC-MAIN-2013-20` or `Recipe demo`, as messages name a partition."""
    return f"{'Recipe' if publication_step(name) in PER_RECIPE else 'Dump'} {partition}"


def _stale_message(record: dict, changed: list[ChangedInput]) -> str:
    """Why `record`'s output is stale (its first inputs replaced, both generations named) and how
    to make it again."""
    name, partition = record["name"], record["dump"]
    reasons = "; ".join(_describe(c) for c in changed[:SHOWN])
    more = f"; and {len(changed) - SHOWN} more inputs" if len(changed) > SHOWN else ""
    return (
        f"{_partition_label(name, partition)}: {name} (generation {record['generation']}) is stale: {reasons}{more}. "
        f"Make it again from what is published now: `{refresh_command(name, partition)}`."
    )


def _describe(change: ChangedInput) -> str:
    made = (f"it was made from generation {change.recorded} of {change.name}" if change.recorded
            else f"it was made when {change.name} was not published")
    now = (f"generation {change.published} is published now" if change.published
           else "that is no longer published")
    return f"{made}, but {now}"


def refuse_stale_inputs(output_root: Path, record: dict) -> None:
    """Raise StaleInput if an input of `record` has been replaced since its output was made."""
    changed = changed_inputs(output_root, record)
    if changed:
        raise StaleInput(_stale_message(record, changed))


@contextmanager
def checked_generation(output_root: Path, name: str, partition: str, log: Log | None = None) -> Iterator[dict | None]:
    """The generation record of `name` (None if never published), held still while the body reads
    (fw_assets.lib.publish.published_generation), refused with StaleInput if its output is stale."""
    with published_generation(output_root, name, partition, log) as record:
        if record is not None:
            refuse_stale_inputs(output_root, record)
        yield record


@contextmanager
def content_generation(output_root: Path, name: str, partition: str, log: Log | None = None) -> Iterator[dict | None]:
    """The generation record of an output read for its content version (None if never published),
    held still while the body reads, not refused when its own inputs changed since: its chain is
    making it again (a dump's chain beside the reader's), and the reader records its content."""
    with published_generation(output_root, name, partition, log) as record:
        yield record
