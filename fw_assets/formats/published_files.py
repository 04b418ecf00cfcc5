"""Every published file against its generation record: its record checked against the schema, each
file there, of its recorded size and re-read whole against its recorded checksum. What
`python -m fw_assets.verify` and the `published_files` asset checks run; a reader checks the files it
reads through fw_assets.formats.lineage instead.
"""

from dataclasses import dataclass, field
from pathlib import Path

from fw_assets.formats.lineage import ASSET_OF_STEP, publication_step, refresh_command
from fw_assets.lib.generation_record import RecordRefused
from fw_assets.lib.publish import PublishedOutputChanged, every_file, published_generation
from fw_assets.paths import generation_record_path, publication_partition


@dataclass
class Verification:
    """What verifying some publications found: how many publications and files matched their
    records, and each that did not, by publication name: the files that differ, and the command
    that makes it again."""

    publications: int = 0
    files: int = 0
    problems: dict[str, "Problem"] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return not self.problems


@dataclass(frozen=True)
class Problem:
    """One publication that does not match its record: what differs (each file, or the record
    itself), and the command that makes it again."""

    differs: list[str]
    command: str


def publication_names(output_root: Path, partition: str | None = None, step: str | None = None) -> list[str]:
    """The publications with a generation record in the output folder (those of `partition`, a
    dump or a recipe, and of `step` when given), in the pipeline's order of their steps, then by
    name: made again in this order, each is made from inputs already made again."""
    folder = generation_record_path(output_root, "any").parent
    names = [path.name.removesuffix(".json") for path in folder.glob("*.json")] if folder.is_dir() else []
    chosen = [name for name in names if (partition is None or publication_partition(name) == partition)
              and (step is None or publication_step(name) == step)]
    return sorted(chosen, key=lambda name: (_step_rank(publication_step(name)), name))


def _step_rank(step: str) -> int:
    """Where `step` comes in the pipeline (a name of no known step: last)."""
    order = list(ASSET_OF_STEP)
    return order.index(step) if step in order else len(order)


def verify_publications(output_root: Path, partition: str | None = None, step: str | None = None) -> Verification:
    """Verify every publication of `partition` and `step` (all when not given): each held still
    while its files are re-read, so that a publication in progress is waited for, never mistaken
    for damage."""
    found = Verification()
    for name in publication_names(output_root, partition, step):
        try:
            with published_generation(output_root, name, publication_partition(name), verified=every_file) as record:
                if record is not None:  # None: removed since it was listed
                    found.publications += 1
                    found.files += len(record["files"])
        except RecordRefused as error:
            found.problems[name] = Problem([f"{error.path.relative_to(output_root)}: {error.reason}"],
                                           refresh_command(name, publication_partition(name)))
        except PublishedOutputChanged as error:
            found.problems[name] = Problem(error.problems, refresh_command(name, publication_partition(name)))
    return found
