"""Generated FineWeb-Edu-shaped sample dumps (`python -m fw_assets.synthetic ROOT`)."""

from fw_assets.synthetic.generator import (
    DEFAULT_DUMPS,
    SCHEMA,
    int_scores,
    sample_scores,
    sample_table,
    write_sample_dump,
    write_sample_dumps,
)

__all__ = [
    "DEFAULT_DUMPS",
    "SCHEMA",
    "int_scores",
    "sample_scores",
    "sample_table",
    "write_sample_dump",
    "write_sample_dumps",
]
