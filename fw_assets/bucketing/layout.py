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
