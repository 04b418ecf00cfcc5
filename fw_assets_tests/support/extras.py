"""Tests that need an optional extra (pyproject.toml) import it through `extra_module`.

Outside CI a missing extra skips the test, saying which extra and how to install it. CI installs
every extra (.ci/run), so there a missing one fails the test instead of hiding it behind a skip.
"""

import importlib
import os
from types import ModuleType

import pytest

WHY = {
    "megatron": "megatron-core is the oracle of these tests",
    "k8s": "dagster-k8s checks the Helm values' run launcher",
    "postgres": "dagster-postgres runs the production instance",
    "celery": "dagster-celery runs the Celery deployment's launcher and workers",
    "docs": "mkdocs builds the documentation site",
}


def extra_module(module: str, extra: str) -> ModuleType:
    if os.environ.get("CI"):
        return importlib.import_module(module)
    reason = f"needs the `{extra}` extra ({WHY[extra]}): pip install -e '.[{extra}]'"
    return pytest.importorskip(module, reason=reason)
