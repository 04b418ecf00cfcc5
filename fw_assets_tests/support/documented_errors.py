"""The recipe errors docs/recipes.md shows, read from the page, so that a test checks each message
is what fw_assets prints: the page's example recipe `mix.yaml`, and per table row the mistake (the
changes it makes to that recipe: code spans `path: value`, e.g. `phases[0].tokens: 0`, and
environment settings `NAME=value`) and the message, a pattern where `…` stands for anything and
`<output>` for the output folder."""

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import yaml

PAGE = Path(__file__).resolve().parents[2] / "docs" / "recipes.md"
PLANNING_SECTION = "## Errors found when planning"
CODE_SPAN = re.compile(r"(`+)\s?(.+?)\s?\1(?!`)")
CHANGE = re.compile(r"(?P<path>[A-Za-z_]\w*(?:\.\w+|\[\d+\])*):(?: (?P<value>.*))?")
SETTING = re.compile(r"(?P<name>FW_[A-Z_]+)=(?P<value>\S+)")
MESSAGE = re.compile(r"recipe …/(?P<file>[^/:]+\.yaml): ")


@dataclass(frozen=True)
class DocumentedError:
    line: int  # on the page
    planning: bool  # found when planning (needs token files), else when the recipe is read
    mistake: str  # the row's first cell, as written
    message: str  # the row's `recipe …` code span

    @property
    def changes(self) -> list[tuple[str, str]]:
        """(path, YAML value as written) of each `path: value` code span of the mistake."""
        spans = [m.group(2) for m in CODE_SPAN.finditer(self.mistake)]
        return [(m["path"], m["value"] or "") for span in spans if (m := CHANGE.fullmatch(span))]

    @property
    def settings(self) -> dict[str, str]:
        """The environment settings (`FW_…=value`) the mistake names."""
        spans = [m.group(2) for m in CODE_SPAN.finditer(self.mistake)]
        return {m["name"]: m["value"] for span in spans if (m := SETTING.fullmatch(span))}

    @property
    def file_name(self) -> str:
        return MESSAGE.match(self.message)["file"]

    def recipe_text(self) -> str:
        """The page's `mix.yaml` with the mistake's changes, each value as the page writes it."""
        recipe, values = example_recipe(), {}
        for i, (path, value) in enumerate(self.changes):
            placeholder = f"CHANGE{i}PLACEHOLDER"
            _set(recipe, path, placeholder)
            values[placeholder] = value
        text = yaml.safe_dump(recipe, sort_keys=False)
        return re.sub(r"CHANGE\d+PLACEHOLDER", lambda m: values[m.group(0)], text)

    def shows(self, message: str, output: Path | None = None) -> bool:
        """Whether `message` is what the page shows (`<output>` is `output`)."""
        return shows(self.message if output is None else self.message.replace("<output>", str(output)), message)

    def __str__(self) -> str:
        return f"docs/recipes.md:{self.line}"


@cache
def example_recipe_text() -> str:
    """The page's first YAML block that starts `# mix.yaml`: the recipe its messages are for."""
    blocks = re.findall(r"```yaml\n(# mix\.yaml.*?)```", PAGE.read_text(), re.S)
    return blocks[0]


def example_recipe() -> dict:
    return yaml.safe_load(example_recipe_text())


@cache
def documented_errors() -> tuple[DocumentedError, ...]:
    """Every row of the page's `| mistake | error |` tables, in page order."""
    rows, planning, in_table = [], False, False
    for number, line in enumerate(PAGE.read_text().splitlines(), 1):
        if line.startswith("## "):
            planning = line.startswith(PLANNING_SECTION)
        if line.startswith("| mistake | error |"):
            in_table = True
        elif not line.startswith("|"):
            in_table = False
        elif in_table and not line.startswith("|---"):
            mistake, error = _cells(line)
            messages = [m.group(2) for m in CODE_SPAN.finditer(error) if m.group(2).startswith("recipe ")]
            assert len(messages) == 1, f"docs/recipes.md:{number}: one `recipe …` message a row, got {messages}"
            rows.append(DocumentedError(number, planning, mistake, messages[0]))
    return tuple(rows)


def _cells(line: str) -> list[str]:
    """The cells of a table row (a `|` inside a code span is not a border)."""
    cells, cell, code = [], "", ""
    for run in re.findall(r"`+|[^`]", line.strip().strip("|")):
        if run.startswith("`"):
            code = "" if run == code else (code or run)
        if run == "|" and not code:
            cells.append(cell.strip())
            cell = ""
        else:
            cell += run
    return [*cells, cell.strip()]


def _set(recipe: dict, path: str, value) -> None:
    """Set `path` (`phases[0].tokens`) in `recipe`; an index one past a list's end appends."""
    keys = [int(k[1:-1]) if k.startswith("[") else k for k in re.findall(r"\[\d+\]|\w+", path)]
    target = recipe
    for key in keys[:-1]:
        target = target[key]
    if isinstance(target, list) and keys[-1] == len(target):
        target.append(value)
    else:
        target[keys[-1]] = value


FAILURE_MODES = PAGE.with_name("failure-modes.md")
RECIPES_SECTION = ("### Recipes\n", "\n### ")


def failure_mode_messages() -> dict[str, list[str]]:
    """The `recipe …` messages of docs/failure-modes.md's Recipes section, by case (a row's first cell)."""
    text = FAILURE_MODES.read_text()
    start = text.index(RECIPES_SECTION[0])
    section = text[start:text.index(RECIPES_SECTION[1], start + 1)]
    found = {}
    for line in section.splitlines():
        if line.startswith("| ") and not line.startswith(("| case |", "|---")):
            case, *cells = _cells(line)
            spans = [m.group(2) for cell in cells for m in CODE_SPAN.finditer(cell)]
            found[case] = [span for span in spans if span.startswith("recipe ")]
    return found


def shows(pattern: str, message: str) -> bool:
    """Whether `message` is what the docs show (`…` stands for anything)."""
    return re.fullmatch(re.escape(pattern).replace("…", ".*"), message, re.S) is not None
