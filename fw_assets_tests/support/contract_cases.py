"""What the contract tests share: one generated dump and the names of its files, and the refusal
a step raises for its outcomes."""

import dagster as dg
import pytest

from fw_assets.contracts.asset_checks import ContractReport
from fw_assets.contracts.findings import CheckOutcome

DUMP = "CC-MAIN-2013-20"
OTHER_DUMP = "CC-MAIN-2013-48"
ROWS, FILES = 2_000, 2
FIRST, SECOND = "train-00000-of-00002.parquet", "train-00001-of-00002.parquet"


def outcome(outcomes, name):
    """The one outcome of the check called `name`."""
    (found,) = [o for o in outcomes if o.check.name == name]
    return found


def refusal(dump: str, stage: str, outcomes: list[CheckOutcome]) -> str:
    """The step failure the asset raises for these outcomes, as its run log shows it."""
    with pytest.raises(dg.Failure) as failure:
        list(ContractReport(dump, stage, outcomes).refuse_if_blocked())
    return failure.value.description


def line_of(message: str, rule: str) -> str:
    (line,) = [line for line in message.splitlines() if f"({rule})" in line]
    return line
