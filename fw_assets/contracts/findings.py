"""What a contract found: violations that name dump, file, column, rows and examples, per check."""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from fw_assets.lib.markdown import table

MAX_EXAMPLES = 5
_LONGEST_VALUE = 60


@dataclass(frozen=True)
class ContractCheck:
    """One asset check of a step's contract; a blocking one stops publishing and the steps after."""

    name: str
    description: str
    blocking: bool = True

    def outcome(
        self,
        violations: "Sequence[Violation]" = (),
        figures: Mapping[str, int | float | str] | None = None,
        details: str = "",
    ) -> "CheckOutcome":
        return CheckOutcome(self, tuple(violations), dict(figures or {}), details)


@dataclass(frozen=True)
class Violation:
    """Rows of one file (or of the whole dump when `file` is None) breaking one rule of a column."""

    rule: str
    column: str | None
    rows: int
    problem: str
    file: str | None = None
    examples: tuple[str, ...] = ()

    def describe(self) -> str:
        """`train-00000.parquet, column score: 3 rows are NaN or ±inf (examples: …)`."""
        where = ", ".join(
            part
            for part in (self.file and f"file {self.file}", self.column and f"column {self.column}")
            if part
        )
        text = f"{where}: {self.problem}" if where else self.problem
        if self.examples:
            text += f" (examples: {', '.join(self.examples[:MAX_EXAMPLES])})"
        return text


@dataclass(frozen=True)
class CheckOutcome:
    """The result of one contract check: its violations and the figures it measured."""

    check: ContractCheck
    violations: tuple[Violation, ...] = ()
    figures: Mapping[str, int | float | str] = field(default_factory=dict)
    details: str = ""  # a markdown table of the figures, when a table reads better

    @property
    def passed(self) -> bool:
        return not self.violations

    @property
    def blocks(self) -> bool:
        return self.check.blocking and not self.passed

    def violations_table(self) -> str:
        """The violations as a markdown table for the check's metadata."""
        return table(
            ["file", "column", "rule", "rows", "examples"],
            [
                (v.file or "(whole dump)", v.column or "", v.rule, v.rows, _code_list(v.examples))
                for v in self.violations
            ],
        )


def rejection_message(dump: str, step: str, outcomes: Sequence[CheckOutcome], kind: str = "Dump") -> str:
    """Why `step` rejected `dump` (a partition of `kind`: Dump, Recipe), one line per violation of
    every blocking check that failed."""
    lines = [
        f"{kind} {dump} failed the {step} contract; nothing was published and the {kind.lower()}'s "
        "previous output is unchanged."
    ]
    for outcome in outcomes:
        if outcome.blocks:
            lines += [f"- {outcome.check.name}: {v.describe()}" for v in outcome.violations]
    return "\n".join(lines)


def count_rows(n: int) -> str:
    """`1 row` / `1,234 rows`."""
    return f"{n:,} row" if n == 1 else f"{n:,} rows"


def short(value: object) -> str:
    """A value for an example, quoted if a string and cut to a readable length."""
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= _LONGEST_VALUE else text[: _LONGEST_VALUE - 1] + "…"


def _code_list(values: Sequence[str]) -> str:
    """Values as markdown code spans, so `<urn:uuid:…>` is not taken for a link or a tag."""
    cleaned = (v.replace("`", "'").replace("|", "\\|") for v in values)
    return ", ".join(f"`{v}`" for v in cleaned)
