"""The optional extras (pyproject.toml) a test needs, declared by one marker:
`@pytest.mark.needs_extra("megatron")` on a test, or `pytestmark = pytest.mark.needs_extra(...)`
on a module. This module is the pytest plugin that honours it (the top conftest loads it): outside
CI a test whose extra is not installed is skipped, saying which extra and the `pip install` that
brings it, before any of its fixtures is set up; CI installs every extra (.ci/run), so there it
fails instead of hiding behind a skip.

A test module imports an extra's library only inside the tests and fixtures that carry the marker,
never when it is loaded (test_extras.py checks both), so it is collected without the extra."""

import os
import re
import tomllib
from functools import cache
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

import pytest

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"

WHY = {
    "megatron": "megatron-core is the oracle of these tests",
    "probe": "the model probe scores with a Hugging Face causal LM",
    "k8s": "dagster-k8s checks the Helm values' run launcher",
    "postgres": "dagster-postgres runs the production instance",
    "celery": "dagster-celery runs the Celery deployment's launcher and workers",
    "docs": "mkdocs builds the documentation site",
    "bench": "datatrove is the reference of the near-duplicate benchmark",
}
# Distributions an extra's tests import beyond its requirements: torch, which megatron-core
# requires and the probe extra leaves out (pip's default torch is a multi-GB CUDA build; .ci/run
# installs the CPU wheel).
ALSO_NEEDS = {"probe": ("torch",), "megatron": ("torch",)}
TORCH_CPU = "pip install torch --index-url https://download.pytorch.org/whl/cpu"


def in_ci() -> bool:
    """Whether the tests run in CI (.ci/run exports CI=true), where every extra is installed."""
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if in_ci():
        return
    for item in items:
        if reason := missing_extras(item):
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    if in_ci() and (reason := missing_extras(item)):
        pytest.fail(f"{reason} (CI installs every extra)", pytrace=False)


def missing_extras(item: pytest.Item) -> str | None:
    """Why `item` cannot run here (each extra its `needs_extra` marks name that is not installed),
    or None."""
    reasons = [reason for marker in item.iter_markers("needs_extra") if (reason := missing_extra(*marker.args))]
    return "; ".join(dict.fromkeys(reasons)) or None


@cache
def extra_requirements() -> dict[str, tuple[str, ...]]:
    """Distribution names each optional extra brings, by extra."""
    extras = tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"]
    return {extra: tuple(distribution_name(r) for r in requirements) for extra, requirements in extras.items()}


def distribution_name(requirement: str) -> str:
    return re.split(r"[<>=~!\[ ;]", requirement)[0]


@cache
def missing_extra(extra: str) -> str | None:
    """None when every distribution `extra` needs is installed, else why the test cannot run:
    the extra, what is missing and the command that brings it."""
    requirements = extra_requirements()
    if extra not in requirements or extra not in WHY:
        raise ValueError(f"needs_extra({extra!r}): not an extra of pyproject.toml with a reason in extras.WHY")
    missing = [name for name in (*requirements[extra], *ALSO_NEEDS.get(extra, ())) if not _installed(name)]
    if not missing:
        return None
    command = f"pip install -e '.[{extra}]'"
    if "torch" in missing and "torch" not in requirements[extra]:
        command += f" and torch ({TORCH_CPU})"
    return f"needs the `{extra}` extra ({WHY[extra]}; missing: {', '.join(missing)}): {command}"


def _installed(name: str) -> bool:
    try:
        distribution(name)
    except PackageNotFoundError:
        return False
    return True
