"""Box-drawing diagrams in the docs, read back as graphs: which name each arrow leads from and to.

A drawing is names (`[A-Za-z_][A-Za-z0-9_]*`) joined by lines of box-drawing characters
(`─ │ ┌ ┐ └ ┘ ├ ┤ ┬ ┴`; `┼` is two lines crossing, not a junction) that end in an arrowhead
(`>` `<` `▲` `▼`) at the name they lead to. A line starts at a name: beside it (one space apart, or
touching) or below or above one of its letters; an arrowhead touches its name the same way. One
connected line may branch and merge: every name at its plain ends leads to every name its
arrowheads point at. Other text (titles, notes) is ignored unless a line touches it.
"""

import re
from dataclasses import dataclass, field

LINES = {"─": "LR", "│": "UD", "┌": "RD", "┐": "LD", "└": "UR", "┘": "UL",
         "├": "UDR", "┤": "UDL", "┬": "LRD", "┴": "LRU", "┼": "LRUD"}
CROSSING = "┼"
ARROWHEADS = {">": "R", "<": "L", "▲": "U", "▼": "D"}  # the way each one points
STEP = {"L": (0, -1), "R": (0, 1), "U": (-1, 0), "D": (1, 0)}
OPPOSITE = {"L": "R", "R": "L", "U": "D", "D": "U"}
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass
class Drawing:
    """The names, arrows and drawing mistakes of one diagram's text."""

    text: str
    names: set[str] = field(init=False)  # every name written in it
    edges: set[tuple[str, str]] = field(init=False, default_factory=set)  # (from, to) of every arrow
    problems: list[str] = field(init=False, default_factory=list)  # lines ending nowhere, arrowheads at no name

    def __post_init__(self) -> None:
        self.rows = self.text.split("\n")
        self.name_at = {(r, m.start() + i): m.group() for r, row in enumerate(self.rows)
                        for m in NAME.finditer(row) for i in range(len(m.group()))}
        self.names = set(self.name_at.values())
        drawn = set()
        for r, row in enumerate(self.rows):
            for c, char in enumerate(row):
                if char in ARROWHEADS:
                    drawn |= self._arrow(r, c, ARROWHEADS[char])
        stray = sorted((r, c) for r, row in enumerate(self.rows) for c, char in enumerate(row)
                       if char in LINES and (r, c) not in drawn)
        if stray:
            (r, c), more = stray[0], len(stray) - 1
            self.problems.append(f"line {r + 1}, column {c + 1}: a line that leads to no arrowhead"
                                 + (f" ({more} more such cells)" if more else ""))

    def _char(self, r: int, c: int) -> str:
        return self.rows[r][c] if 0 <= r < len(self.rows) and 0 <= c < len(self.rows[r]) else " "

    def _name_beside(self, r: int, c: int, way: str) -> str | None:
        """The name that (r, c) touches going `way`: the next cell, or sideways one space further."""
        dr, dc = STEP[way]
        for reach in (1, 2) if dr == 0 else (1,):
            cell = (r + reach * dr, c + reach * dc)
            if cell in self.name_at:
                return self.name_at[cell]
            if self._char(*cell) != " ":
                return None
        return None

    def _arrow(self, r: int, c: int, points: str) -> set[tuple[int, int]]:
        """Record the edges into the name the arrowhead at (r, c) points at; return the line's cells."""
        where = f"line {r + 1}, column {c + 1}"
        target = self._name_beside(r, c, points)
        sources, cells = self._trace(r, c, OPPOSITE[points])
        if target is None:
            self.problems.append(f"{where}: an arrowhead that points at no name")
        elif not sources:
            self.problems.append(f"{where}: an arrow into {target} that comes from no name")
        self.edges |= {(source, target) for source in sources if target}
        return cells

    def _trace(self, r: int, c: int, way: str) -> tuple[set[str], set[tuple[int, int]]]:
        """Follow the line leaving (r, c) towards `way`, through its branches, to the names at its
        plain ends; other arrowheads of the same line are ends too, not names."""
        sources, seen, todo = set(), set(), [(r, c, way)]
        while todo:
            r, c, way = todo.pop()
            dr, dc = STEP[way]
            char, came_from = self._char(r + dr, c + dc), OPPOSITE[way]
            if char in LINES and came_from in LINES[char]:
                if (r + dr, c + dc, way) not in seen:
                    seen.add((r + dr, c + dc, way))
                    ways = way if char == CROSSING else LINES[char].replace(came_from, "")
                    todo += [(r + dr, c + dc, onward) for onward in ways]
            elif ARROWHEADS.get(char) == way:
                continue
            elif name := self._name_beside(r, c, way):
                sources.add(name)
            else:
                self.problems.append(f"line {r + 1}, column {c + 1}: a line that ends at no name")
        return sources, {(r, c) for r, c, _ in seen}
