"""What the contract tests share: one generated dump and the names of its files."""

DUMP = "CC-MAIN-2013-20"
OTHER_DUMP = "CC-MAIN-2013-48"
ROWS, FILES = 2_000, 2
FIRST, SECOND = "train-00000-of-00002.parquet", "train-00001-of-00002.parquet"


def outcome(outcomes, name):
    """The one outcome of the check called `name`."""
    (found,) = [o for o in outcomes if o.check.name == name]
    return found
