"""Where each stage's output of a dump lives under the output root."""

from pathlib import Path

from fw_assets.policy import SamplingPolicy


def selection_path(output_root: Path, dump: str) -> Path:
    """The sampled stage's decision for every row of the dump (no text)."""
    return output_root / "selection" / f"{dump}.parquet"


def bucket_dump_dir(output_root: Path, bucket: str, dump: str) -> Path:
    """The seed's published layout: `en/<bucket>/<dump>/`."""
    return output_root / "en" / bucket / dump


def bucket_dump_dirs(output_root: Path, dump: str, policy: SamplingPolicy) -> dict[str, Path]:
    return {b.name: bucket_dump_dir(output_root, b.name, dump) for b in policy.buckets}


def bucketed_files(output_root: Path, dump: str, policy: SamplingPolicy) -> dict[str, list[Path]]:
    """The published parquet files of a dump, per bucket, in name order."""
    return {
        bucket: sorted(folder.glob("*.parquet"))
        for bucket, folder in bucket_dump_dirs(output_root, dump, policy).items()
    }


def sampled_publication(dump: str) -> str:
    """The name under which sampled publishes a dump (locks, staging, generation record)."""
    return f"sampled-{dump}"


def bucketed_publication(dump: str) -> str:
    """The name under which bucketed publishes a dump (locks, staging, generation record)."""
    return f"bucketed-{dump}"


def bucket_contents(output_root: Path, folders: dict[str, Path], targets: dict[str, Path], rows: dict[str, int]) -> dict:
    """What a bucketed generation record says of each bucket: its rows and published files, also
    for a bucket without rows (so a reader knows it is empty, not missing)."""
    return {
        bucket: {
            "rows": rows.get(bucket, 0),
            "files": [
                str((target / p.name).relative_to(output_root))
                for p in (sorted(folders[bucket].glob("*.parquet")) if bucket in folders else [])
            ],
        }
        for bucket, target in targets.items()
    }


def recorded_bucket_files(output_root: Path, record: dict) -> dict[str, tuple[int, list[Path]]]:
    """Each bucket's rows and published files, as the generation record of bucketed says."""
    return {
        bucket: (entry["rows"], [output_root / f for f in entry["files"]])
        for bucket, entry in record["contents"]["buckets"].items()
    }
