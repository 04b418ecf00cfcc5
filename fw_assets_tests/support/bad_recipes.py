"""Recipe files that cannot be planned, the ways they stop whatever reads every recipe: nested
5,000 levels deep (a RecursionError while parsing), 200 KB of YAML (minutes of parsing), a FIFO
(a reader blocks until someone writes to it), a folder named like a recipe."""

import os
from pathlib import Path

BAD_RECIPES = ("deep", "large", "fifo", "folder")


def write_bad_recipes(folder: Path) -> tuple[str, ...]:
    """Write every bad recipe into `folder`; returns their names (the files' stems)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "deep.yaml").write_text("tokenizer: " + "[" * 5_000 + "]" * 5_000 + "\n")
    (folder / "large.yaml").write_text("tokenizer: " + "[" * 100_000 + "]" * 100_000 + "\n")
    os.mkfifo(folder / "fifo.yaml")
    (folder / "folder.yaml").mkdir()
    return BAD_RECIPES
