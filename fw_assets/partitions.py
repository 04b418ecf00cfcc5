"""One static partition per Common Crawl dump: the known FineWeb-Edu dumps plus any found on disk."""

import logging
from importlib import resources
from pathlib import Path

import dagster as dg

from fw_assets import settings
from fw_assets.paths import is_dump_name, source_data_dir

logger = logging.getLogger(__name__)


def known_dumps() -> list[str]:
    """The 110 dumps of HuggingFaceFW/fineweb-edu, shipped as package data."""
    text = resources.files("fw_assets").joinpath("dumps.txt").read_text()
    return [line.strip() for line in text.splitlines() if is_dump_name(line.strip())]


def dump_folders(source_root: Path) -> dict[str, Path]:
    """Dump folders under `<source_root>/data`, keyed by dump; anything else (a file, a folder named
    otherwise: a trailing newline, other digits) is skipped with a warning naming it exactly."""
    data_dir = source_data_dir(source_root)
    if not data_dir.is_dir():
        return {}
    found = {}
    for entry in sorted(data_dir.iterdir()):
        if entry.is_dir() and is_dump_name(entry.name):
            found[entry.name] = entry
        else:
            logger.warning(
                "Ignoring %r in %s: not a dump folder (expected a directory named like CC-MAIN-YYYY-WW, "
                "in ASCII digits)", entry.name, data_dir,
            )
    return found


def build_dump_partitions(source_root: Path) -> dg.StaticPartitionsDefinition:
    """Known dumps together with the dump folders present when the definitions load."""
    return dg.StaticPartitionsDefinition(sorted(set(known_dumps()) | set(dump_folders(source_root))))


dump_partitions = build_dump_partitions(settings.source_dir())

# What every per-dump asset shares: the dump partitions, and no backfill policy: with Dagster's
# default, a backfill launches one run per dump tagged `dagster/partition`, holding every selected
# asset of that dump the run can hold. That tag is what gives each check result its dump;
# `multi_run(1)` tags a partition range instead, and the checks' results were stored without a dump
# and shown on another dump's materialization.
#
# Two groups: `fineweb_edu` signs a dump (raw to band_key_index: what a backfill or the new_dumps
# sensor runs, dumps side by side); `fineweb_edu_kept` decides and tokenizes it, in crawl order, by
# declarative automation (fw_assets.crawl_order) once the earlier dumps' signing is done.
SIGNING_GROUP = "fineweb_edu"
KEPT_GROUP = "fineweb_edu_kept"
PER_DUMP = dict(partitions_def=dump_partitions, group_name=SIGNING_GROUP)
PER_DUMP_KEPT = dict(partitions_def=dump_partitions, group_name=KEPT_GROUP)
