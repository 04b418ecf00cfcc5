"""Where the data lives: the two public environment variables and their seed defaults."""

import os
from pathlib import Path

SOURCE_DIR_ENV = "FW_SOURCE_DIR"
OUTPUT_DIR_ENV = "FW_OUTPUT_DIR"
DEFAULT_SOURCE_DIR = "data/datasets/HuggingFaceFW/fineweb-edu"
DEFAULT_OUTPUT_DIR = "data/datasets/fineweb"


def source_dir() -> Path:
    """Root of a Hugging Face snapshot of fineweb-edu (it holds `data/<dump>/`)."""
    return Path(os.environ.get(SOURCE_DIR_ENV, DEFAULT_SOURCE_DIR))


def output_dir() -> Path:
    """Root of everything fw_assets writes (`en/`, `tokenized/`, `selection/`)."""
    return Path(os.environ.get(OUTPUT_DIR_ENV, DEFAULT_OUTPUT_DIR))
