"""support/extras.py: the fast loop collects and runs with only the `test` extra installed (README, Tests):
no test module imports an optional extra's library except through `extra_module`."""

import ast
import re
import tomllib
from pathlib import Path

from bench.dagster_services import REPO_ROOT

TESTS = Path(__file__).parent
# Distributions whose import name is not their name with `-` as `_`.
IMPORT_NAMES = {"megatron-core": "megatron"}
# Extras every test may use: `test` is what the fast loop installs.
INSTALLED_BY_THE_FAST_LOOP = {"test"}


def optional_libraries() -> dict[str, str]:
    """Import name -> extra, for every library only an optional extra brings."""
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    installed = {_name(d) for d in project["dependencies"]}
    installed |= {_name(d) for extra in INSTALLED_BY_THE_FAST_LOOP for d in extras[extra]}
    return {
        IMPORT_NAMES.get(name, name.replace("-", "_")): extra
        for extra, requirements in extras.items()
        for name in map(_name, requirements)
        if name not in installed
    }


def _name(requirement: str) -> str:
    return re.split(r"[<>=\[ ;]", requirement)[0]


def module_level_imports(path: Path) -> set[str]:
    """Top-level names of what a module imports when it is loaded (not inside functions)."""
    names, pending = set(), list(ast.parse(path.read_text()).body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
        elif isinstance(node, (ast.If, ast.Try)):
            pending += node.body + node.orelse + getattr(node, "finalbody", [])
    return names


def test_no_test_module_needs_an_optional_extra_to_be_collected():
    libraries = optional_libraries()
    assert {"megatron", "dagster_k8s", "dagster_postgres", "datatrove"} <= set(libraries)
    needing = [
        f"{path.relative_to(TESTS)} imports {name} (extra `{libraries[name]}`): use extras.extra_module"
        for path in sorted(TESTS.rglob("*.py"))
        for name in sorted(module_level_imports(path) & set(libraries))
    ]
    assert not needing
