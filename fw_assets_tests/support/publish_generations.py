"""Two generations of a made-up publication of one dump, to publish, break and compare."""

from pathlib import Path

from fw_assets.lib.publish import staged_publication

DUMP = "CC-MAIN-2013-20"
NAME = f"bucketed-{DUMP}"
CODE_VERSION = "test-code"


def folder_with(path: Path, files: dict[str, str]) -> Path:
    path.mkdir(parents=True)
    for name, text in files.items():
        (path / name).write_text(text)
    return path


def publish_generation(root: Path, label: str, buckets: dict[str, int]) -> None:
    """Publish `en/<bucket>/D/` for each bucket with files, removing the buckets given 0 files,
    plus `selection/D.parquet`; every file's text names the generation."""
    with staged_publication(root, NAME, DUMP, code_version=CODE_VERSION) as staging:
        moves = {}
        for bucket, files in buckets.items():
            staged = staging.path / bucket
            contents = {f"part-{i}.parquet": f"{label} {bucket} {i}" for i in range(files)}
            moves[root / "en" / bucket / DUMP] = folder_with(staged, contents) if files else None
        (staging.path / "selection.parquet").write_text(f"{label} selection")
        moves[root / "selection" / f"{DUMP}.parquet"] = staging.path / "selection.parquet"
        staging.publish(moves, {"label": label}, inputs={})


# The new generation replaces two buckets, removes one, adds one and replaces a file.
OLD = {"2.8": 2, "3.0": 1, "3.5": 1, "4.0": 0}
NEW = {"2.8": 1, "3.0": 3, "3.5": 0, "4.0": 2}
