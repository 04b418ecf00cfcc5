"""support/extras.py: the fast loop collects and runs with only the `test` extra installed (README,
Tests). No test module loads an optional extra's library when it is collected (also through the
repo's own modules it loads), a test module that imports one marks its tests `needs_extra`, and
that marker is the one way a test says it needs an extra."""

import ast
import os
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

from fw_assets_tests.support import extras
from fw_assets_tests.support.extras import ALSO_NEEDS, PYPROJECT, WHY, extra_requirements, missing_extra
from fw_assets_tests.support.source_imports import all_imports, load_time_imports, parents

REPO = PYPROJECT.parent
TESTS = REPO / "fw_assets_tests"
REPO_PACKAGES = ("fw_assets", "bench", "fw_assets_tests")
# Distributions whose import name is not their name with `-` as `_`.
IMPORT_NAMES = {"megatron-core": "megatron", "mkdocs-material": "material"}
# What the fast loop installs: every test may use it.
INSTALLED_BY_THE_FAST_LOOP = "test"


@cache
def optional_libraries() -> dict[str, set[str]]:
    """Import name -> the extras that bring it, for every library only an optional extra brings."""
    requirements = extra_requirements()
    installed = set(requirements[INSTALLED_BY_THE_FAST_LOOP])
    libraries: dict[str, set[str]] = {}
    for extra, names in requirements.items():
        for name in {*names, *ALSO_NEEDS.get(extra, ())} - installed:
            libraries.setdefault(IMPORT_NAMES.get(name, name.replace("-", "_")), set()).add(extra)
    return libraries


@cache
def repo_modules() -> dict[str, Path]:
    found = {}
    for package in REPO_PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            parts = path.relative_to(REPO).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


@cache
def tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text())


@cache
def libraries_loaded_with(module: str) -> frozenset[str]:
    """Top-level names of the libraries loading `module` imports, through the repo's own modules."""
    loaded, pending, libraries = set(), [module], set()
    while pending:
        name = pending.pop()
        if name in loaded:
            continue
        loaded.add(name)
        for imported in load_time_imports(tree(repo_modules()[name])) | set(parents(name)):
            if imported in repo_modules():
                pending.append(imported)
            elif imported.split(".")[0] not in REPO_PACKAGES:
                libraries.add(imported.split(".")[0])
    return frozenset(libraries)


def modules_of_tests() -> list[Path]:
    return [path for path in sorted(TESTS.rglob("*.py")) if path.name.startswith("test_")]


def marked_extras(path: Path) -> set[str]:
    """The extras named by the `needs_extra(...)` marks in a module."""
    return {
        node.args[0].value
        for node in ast.walk(tree(path))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "needs_extra"
        and node.args and isinstance(node.args[0], ast.Constant)
    }


def test_optional_libraries_are_read_from_pyproject():
    libraries = optional_libraries()
    assert {"megatron", "dagster_k8s", "dagster_postgres", "datatrove", "transformers", "dagster_celery"} <= set(
        libraries
    )
    assert libraries["torch"] == {"probe", "megatron"} and "pytest" not in libraries


def test_every_extra_a_test_may_need_says_why():
    assert set(WHY) == set(extra_requirements()) - {INSTALLED_BY_THE_FAST_LOOP}


def test_no_test_module_needs_an_optional_extra_to_be_collected():
    libraries = optional_libraries()
    needing = [
        f"loading {module} imports {name} (extra {sorted(libraries[name])}): import it inside a test marked needs_extra"
        for module, path in repo_modules().items()
        if path.is_relative_to(TESTS)
        for name in sorted(libraries_loaded_with(module) & set(libraries))
    ]
    assert not needing


def test_a_test_module_that_imports_an_extra_marks_its_tests_needs_extra():
    """Imports inside tests and fixtures count too: of the extra's library, or of a repo module that
    loads it (the marker skips before the fixtures are set up, so a conftest's fixtures are left to
    the tests that use them)."""
    libraries = optional_libraries()
    unmarked = []
    for path in modules_of_tests():
        for imported in all_imports(tree(path)):
            loaded = libraries_loaded_with(imported) if imported in repo_modules() else {imported.split(".")[0]}
            for name in sorted(loaded & set(libraries)):
                if not libraries[name] & marked_extras(path):
                    unmarked.append(f"{path.relative_to(TESTS)} imports {imported}, which needs {name}")
    assert not unmarked


def test_the_marker_is_the_one_way_to_need_an_extra():
    by_hand = [
        f"{path.relative_to(TESTS)}:{node.lineno}"
        for path in sorted(TESTS.rglob("*.py"))
        for node in ast.walk(tree(path))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "importorskip"
    ]
    assert not by_hand
    unknown = {extra for path in modules_of_tests() for extra in marked_extras(path)} - set(WHY)
    assert not unknown


def test_a_missing_extra_is_named_with_the_command_that_brings_it(monkeypatch):
    monkeypatch.setattr(extras, "_installed", lambda name: name not in ("megatron-core", "torch"))
    missing_extra.cache_clear()
    try:
        assert missing_extra("megatron") == (
            "needs the `megatron` extra (megatron-core is the oracle of these tests; missing: megatron-core, torch): "
            "pip install -e '.[megatron]' and torch (pip install torch --index-url https://download.pytorch.org/whl/cpu)"
        )
        assert missing_extra("probe").endswith("missing: torch): pip install -e '.[probe]' and torch "
                                               "(pip install torch --index-url https://download.pytorch.org/whl/cpu)")
        assert missing_extra("k8s") is None
        with pytest.raises(ValueError, match="needs_extra\\('probes'\\): not an extra of pyproject.toml"):
            missing_extra("probes")
    finally:
        missing_extra.cache_clear()


MARKED = """
import pytest

@pytest.mark.needs_extra("k8s")
def test_needing_k8s():
    pass

@pytest.mark.needs_extra("probe")
def test_needing_probe():
    pass
"""
# Where dagster-k8s is missing.
WITHOUT_K8S = """
from fw_assets_tests.support import extras

extras._installed = lambda name: name != "dagster-k8s"
"""


@pytest.mark.parametrize("ci", ["", "true"])
def test_a_test_needing_a_missing_extra_is_skipped_naming_it_and_fails_in_ci(tmp_path, ci):
    (tmp_path / "conftest.py").write_text(WITHOUT_K8S)
    (tmp_path / "test_marked.py").write_text(MARKED)
    env = {**os.environ, "CI": ci, "PYTHONPATH": str(REPO)}
    plugins = ["-p", "fw_assets_tests.support.extras", "-p", "no:cacheprovider", "-o", "markers=needs_extra"]
    finished = subprocess.run([sys.executable, "-m", "pytest", *plugins, "-rs", str(tmp_path)], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=120)
    reason = ("needs the `k8s` extra (dagster-k8s checks the Helm values' run launcher; missing: dagster-k8s): "
              "pip install -e '.[k8s]'")
    if ci:  # failed where its fixtures are set up
        assert finished.returncode == 1 and "1 passed, 1 error" in finished.stdout, finished.stdout
        assert "ERROR at setup of test_needing_k8s" in finished.stdout, finished.stdout
        assert f"\n{reason} (CI installs every extra)\n" in finished.stdout, finished.stdout
    else:
        assert finished.returncode == 0 and "1 passed, 1 skipped" in finished.stdout, finished.stdout
        assert f"SKIPPED [1] test_marked.py:4: {reason}" in finished.stdout, finished.stdout


def test_ci_installs_every_extra_and_then_fails_a_test_whose_extra_is_missing():
    """.ci/run is CI: its install names every extra of pyproject.toml, and it sets `CI` after that
    install and before pytest, so there a missing extra fails its tests instead of skipping them."""
    script = (REPO / ".ci" / "run").read_text().splitlines()
    installs = [line for line in script if "-e '.[" in line and not line.lstrip().startswith("#")]
    assert installs, "no install of `-e '.[...]'` in .ci/run"
    installed = set(installs[-1].split("'.[")[1].split("]'")[0].split(","))
    assert installed == set(extra_requirements())
    sets_ci = script.index("export CI=true")
    assert script.index(installs[-1]) < sets_ci < next(i for i, line in enumerate(script) if "-m pytest" in line)
